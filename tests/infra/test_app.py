"""The app entry point (``make synth``) and the layer's deploy-time build."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infra import app as infra_app
from infra.constructs import assets


def test_synth_writes_the_cloud_assembly_without_bundling(tmp_path: Path) -> None:
    # When the app runs as `make synth` runs it
    infra_app.main(["--no-bundling", "--outdir", str(tmp_path), "-c", "environmentName=ci"])
    # Then the assembly holds the one stack, named for the environment
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    assert [s["properties"]["templateFile"] for s in stacks] == ["runplane-ci.template.json"]
    # And the layer was not built (its asset still points at the sources)
    assets_manifest = json.loads((tmp_path / "runplane-ci.assets.json").read_text())
    sources = [f["source"]["path"] for f in assets_manifest["files"].values()]
    assert str(assets.REPO) in sources


def test_the_layer_build_installs_lambda_wheels_and_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a pip that records its arguments instead of downloading
    calls: list[list[str]] = []

    def run(command: list[str], check: bool) -> subprocess.CompletedProcess[bytes]:
        calls.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr("infra.constructs.assets.subprocess.run", run)
    # When the layer is bundled locally
    bundled = assets._LocalLayerBundling().try_bundle(str(tmp_path), image=None)
    # Then pip fetched only binary wheels for the functions' platform and Python
    assert bundled is True
    (command,) = calls
    assert command[1:4] == ["-m", "pip", "install"]
    assert "--only-binary=:all:" in command
    platforms = {command[i + 1] for i, arg in enumerate(command) if arg == "--platform"}
    assert platforms
    assert all(p.endswith("_aarch64") for p in platforms)
    assert "manylinux_2_34_aarch64" in platforms  # regopy's wheels
    version = command[command.index("--python-version") + 1]
    assert assets.RUNTIME.name == f"python{version}"
    assert command[command.index("--target") + 1] == str(tmp_path / "python")
    assert set(assets.runtime_dependencies()) <= set(command)
    # And the runplane package sits next to its dependencies, without bytecode
    assert (tmp_path / "python" / "runplane" / "wiring.py").is_file()
    assert not list((tmp_path / "python").rglob("__pycache__"))
