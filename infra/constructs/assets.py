"""Lambda code and the ``runplane`` layer, built from this repository.

The layer holds the ``runplane`` package and the project's runtime dependencies.
Bundling runs at deploy time only, on the deploying machine and without Docker:
``pip install`` fetches wheels for the Lambda platform (``--platform`` with
``--only-binary=:all:``), so the native wheels (regopy, cryptography, pydantic-core)
are the Linux ones whatever the deploying machine is. A synth that skips bundling
(``aws:cdk:bundling-stacks`` empty, as ``make synth`` and the tests do) stages the
sources unchanged and never runs pip.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

REPO = Path(__file__).resolve().parents[2]

# Arm64 (Graviton): every native wheel the functions need is published for
# manylinux aarch64 (regopy 1.5.2 only as manylinux_2_34, hence an Amazon Linux 2023
# runtime), and arm64 Lambda costs less per GB-second than x86_64.
ARCHITECTURE = lambda_.Architecture.ARM_64
RUNTIME = lambda_.Runtime.PYTHON_3_14
PIP_PLATFORMS = ("manylinux_2_34_aarch64", "manylinux_2_28_aarch64", "manylinux2014_aarch64")

# What each asset may see of the repository: exclude globs, the last match wins.
FUNCTIONS_ASSET_EXCLUDE = [
    "*",
    "!functions",
    "!functions/**",
    "functions/runner",
    "functions/runner/**",
    "**/.*",
    "**/__pycache__",
    "**/*.pyc",
]
LAYER_ASSET_EXCLUDE = [
    "*",
    "!pyproject.toml",
    "!layers",
    "layers/*",
    "!layers/runplane",
    "!layers/runplane/**",
    "**/.*",
    "**/__pycache__",
    "**/*.pyc",
]


def runtime_version() -> str:
    """``3.14`` for ``python3.14``."""
    return RUNTIME.name.removeprefix("python")


def runtime_dependencies() -> list[str]:
    """The project's runtime requirements, as pyproject.toml declares them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["dependencies"])


def pip_install_arguments(target: str) -> list[str]:
    platforms = [arg for platform in PIP_PLATFORMS for arg in ("--platform", platform)]
    return [
        "install",
        "--quiet",
        "--no-compile",
        "--disable-pip-version-check",
        "--target",
        target,
        *platforms,
        "--implementation",
        "cp",
        "--python-version",
        runtime_version(),
        "--only-binary=:all:",
        *runtime_dependencies(),
    ]


@jsii.implements(ILocalBundling)
class _LocalLayerBundling:
    """Builds the layer on the deploying machine: pip for the Lambda platform, then
    the ``runplane`` package next to its dependencies."""

    def try_bundle(self, output_dir: str, **options: Any) -> bool:
        target = Path(output_dir) / "python"
        subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
            [sys.executable, "-m", "pip", *pip_install_arguments(str(target))],
            check=True,
        )
        shutil.copytree(
            REPO / "layers" / "runplane",
            target / "runplane",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )
        return True


def layer_code() -> lambda_.Code:
    """The layer's code asset (bundled at deploy; Docker only if pip is unavailable)."""
    in_container = shlex.join(pip_install_arguments("/asset-output/python"))
    return lambda_.Code.from_asset(
        str(REPO),
        exclude=LAYER_ASSET_EXCLUDE,
        asset_hash_type=AssetHashType.SOURCE,
        bundling=BundlingOptions(
            image=RUNTIME.bundling_image,
            command=[
                "bash",
                "-c",
                f"python -m pip {in_container} && "
                "cp -r /asset-input/layers/runplane /asset-output/python/runplane",
            ],
            local=_LocalLayerBundling(),
        ),
    )


def functions_code() -> lambda_.Code:
    """The entry points (``functions/``), one asset shared by every function."""
    return lambda_.Code.from_asset(str(REPO), exclude=FUNCTIONS_ASSET_EXCLUDE)
