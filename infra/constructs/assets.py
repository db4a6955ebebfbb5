"""Lambda code and the ``runplane`` layer, built from this repository.

The layer holds the ``runplane`` package and the project's runtime dependencies.
Bundling runs at deploy time only, on the deploying machine and without Docker:
``pip install`` fetches wheels for the Lambda platform (``--platform`` with
``--only-binary=:all:``), so the native wheels (regopy, cryptography, pydantic-core)
are the Linux ones whatever the deploying machine is. A synth that skips bundling
(``aws:cdk:bundling-stacks`` empty, as ``make synth`` and the tests do) stages the
sources unchanged and never runs pip.

Both assets ship bytecode compiled by the runtime's own Python (its magic number is
per minor version) with unchecked hashes: Lambda's ``/opt`` and ``/var/task`` are
read-only, so a cold start that finds no valid ``.pyc`` compiles every module from
source, every time. Unchecked-hash bytecode is valid whatever the files' timestamps
and is never checked against its source. Without that Python on the deploying
machine (``python3.14`` on PATH), the local build declines and CDK builds the asset
in the runtime's bundling image instead (Docker).
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


def runtime_interpreter() -> str | None:
    """A Python of the runtime's version on this machine, if any: this one, or
    ``python3.X`` on PATH."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == runtime_version():
        return sys.executable
    return shutil.which(f"python{runtime_version()}")


def compile_arguments(tree: str, deployed_at: str) -> list[str]:
    """``compileall`` of ``tree``, recording ``deployed_at`` as the sources' directory
    (tracebacks name the deployed paths), timestamp-independent and never rechecked."""
    return [
        "-m",
        "compileall",
        "-q",
        "-j",
        "0",
        "--invalidation-mode",
        "unchecked-hash",
        "-s",
        tree,
        "-p",
        deployed_at,
        tree,
    ]


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


# Where Lambda mounts each asset (a layer's ``python/`` is on the runtime's path).
LAYER_ROOT = "/opt/python"
FUNCTIONS_ROOT = "/var/task"
_NO_BYTECODE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


@jsii.implements(ILocalBundling)
class _LocalLayerBundling:
    """Builds the layer on the deploying machine: pip for the Lambda platform, the
    ``runplane`` package next to its dependencies, then all of it compiled."""

    def try_bundle(self, output_dir: str, **options: Any) -> bool:
        python = runtime_interpreter()
        if python is None:
            return False
        target = Path(output_dir) / "python"
        # pip needs not be the runtime's: it fetches the runtime's wheels by version.
        subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
            [sys.executable, "-m", "pip", *pip_install_arguments(str(target))],
            check=True,
        )
        shutil.copytree(
            REPO / "layers" / "runplane",
            target / "runplane",
            ignore=_NO_BYTECODE,
            dirs_exist_ok=True,
        )
        subprocess.run(  # noqa: S603 - the runtime's interpreter, fixed arguments
            [python, *compile_arguments(str(target), LAYER_ROOT)],
            check=True,
        )
        return True


@jsii.implements(ILocalBundling)
class _LocalFunctionsBundling:
    """Copies the entry points (not the sandbox image's ``runner``) and compiles them."""

    def try_bundle(self, output_dir: str, **options: Any) -> bool:
        python = runtime_interpreter()
        if python is None:
            return False
        shutil.copytree(
            REPO / "functions",
            Path(output_dir) / "functions",
            ignore=shutil.ignore_patterns("runner", "__pycache__", "*.pyc", ".*"),
            dirs_exist_ok=True,
        )
        subprocess.run(  # noqa: S603 - the runtime's interpreter, fixed arguments
            [python, *compile_arguments(output_dir, FUNCTIONS_ROOT)],
            check=True,
        )
        return True


def layer_container_command() -> list[str]:
    """The layer's build in the runtime's bundling image (whose ``python`` is the
    runtime's)."""
    pip = shlex.join(pip_install_arguments("/asset-output/python"))
    compile_ = shlex.join(compile_arguments("/asset-output/python", LAYER_ROOT))
    return [
        "bash",
        "-c",
        f"python -m pip {pip} && "
        "cp -r /asset-input/layers/runplane /asset-output/python/runplane && "
        "find /asset-output/python/runplane -name __pycache__ -prune -exec rm -rf {} + && "
        f"python {compile_}",
    ]


def functions_container_command() -> list[str]:
    """The entry points' build in the runtime's bundling image."""
    compile_ = shlex.join(compile_arguments("/asset-output", FUNCTIONS_ROOT))
    return [
        "bash",
        "-c",
        "cp -r /asset-input/functions /asset-output/functions && "
        "rm -rf /asset-output/functions/runner && "
        "find /asset-output -name __pycache__ -prune -exec rm -rf {} + && "
        f"python {compile_}",
    ]


def layer_code() -> lambda_.Code:
    """The layer's code asset (bundled at deploy; Docker only without the runtime's
    Python)."""
    return lambda_.Code.from_asset(
        str(REPO),
        exclude=LAYER_ASSET_EXCLUDE,
        asset_hash_type=AssetHashType.SOURCE,
        bundling=BundlingOptions(
            image=RUNTIME.bundling_image,
            command=layer_container_command(),
            local=_LocalLayerBundling(),
        ),
    )


def functions_code() -> lambda_.Code:
    """The entry points (``functions/``), one asset shared by every function, compiled
    at deploy like the layer."""
    return lambda_.Code.from_asset(
        str(REPO),
        exclude=FUNCTIONS_ASSET_EXCLUDE,
        asset_hash_type=AssetHashType.SOURCE,
        bundling=BundlingOptions(
            image=RUNTIME.bundling_image,
            command=functions_container_command(),
            local=_LocalFunctionsBundling(),
        ),
    )
