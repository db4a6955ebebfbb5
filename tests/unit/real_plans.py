"""Real saved plans and their ``show -json``, from the pinned engine (Terraform 1.0.3,
tests/engine.py) and the offline ``runplane/test`` provider (docs/test-provider.md)."""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from examples.providers.install import install_mirror, provider_installation_block
from tests.engine import engine_env, engine_path

PROVIDER = """\
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
"""


@dataclass(frozen=True)
class RealPlan:
    plan: bytes
    """The saved plan file (``plan -out``)."""
    document: dict[str, Any]
    """The engine's ``show -json`` of it."""


class Engine:
    """Plans configurations with the pinned engine and the offline test provider."""

    def __init__(self, root: Path) -> None:
        if not (
            sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}
        ):
            pytest.skip("the pinned engine binary is linux_amd64")
        assert importlib.util.find_spec("tf") is not None, "the test provider needs 'tf'"
        self.root = root
        mirror = install_mirror(root / "mirror")
        self.cli_config = root / "cli.tfrc"
        self.cli_config.write_text(
            "disable_checkpoint = true\n\n" + provider_installation_block(mirror),
            encoding="utf-8",
        )
        self.count = 0

    def _run(self, work: Path, env: dict[str, str], *args: str) -> str:
        result = subprocess.run(
            [str(engine_path()), *args, "-no-color"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def plan(self, files: dict[str, str]) -> RealPlan:
        """``init``, ``plan -out`` and ``show -json`` of a configuration (relative file
        names to text; the provider requirement is added to the root module)."""
        self.count += 1
        work = self.root / f"work{self.count}"
        home = self.root / f"home{self.count}"
        home.mkdir()
        for name, text in {"versions.tf": PROVIDER, **files}.items():
            path = work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        env = engine_env(home, self.cli_config)
        self._run(work, env, "init", "-input=false")
        self._run(work, env, "plan", "-input=false", "-lock=false", "-out=plan.bin")
        document = json.loads(self._run(work, env, "show", "-json", "plan.bin"))
        return RealPlan((work / "plan.bin").read_bytes(), document)
