"""The app entry point (``make synth``) and the layer's deploy-time build."""

from __future__ import annotations

import json
import marshal
import subprocess
import sys
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


def _recording_subprocess(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """A subprocess.run that records its commands instead of running them (no pip
    download, no compile)."""
    calls: list[list[str]] = []

    def run(command: list[str], check: bool) -> subprocess.CompletedProcess[bytes]:
        calls.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr("infra.constructs.assets.subprocess.run", run)
    return calls


def _runtime_python_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ``python3.X`` of the Lambda runtime's version, alone on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / f"python{assets.runtime_version()}"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return str(python)


def _is_runtime_python() -> bool:
    return f"{sys.version_info.major}.{sys.version_info.minor}" == assets.runtime_version()


def _compile_step(command: list[str]) -> tuple[str, list[str]]:
    python, *arguments = command
    assert arguments[:2] == ["-m", "compileall"]
    return python, arguments


def test_the_layer_build_installs_lambda_wheels_and_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a pip and a compiler that record their arguments, and the runtime's Python
    calls = _recording_subprocess(monkeypatch)
    runtime_python = _runtime_python_on_path(tmp_path, monkeypatch)
    output = tmp_path / "out"
    # When the layer is bundled locally
    bundled = assets._LocalLayerBundling().try_bundle(str(output), image=None)
    # Then pip fetched only binary wheels for the functions' platform and Python
    assert bundled is True
    pip, compile_ = calls
    assert pip[1:4] == ["-m", "pip", "install"]
    assert "--only-binary=:all:" in pip
    platforms = {pip[i + 1] for i, arg in enumerate(pip) if arg == "--platform"}
    assert platforms
    assert all(p.endswith("_aarch64") for p in platforms)
    assert "manylinux_2_34_aarch64" in platforms  # regopy's wheels
    version = pip[pip.index("--python-version") + 1]
    assert assets.RUNTIME.name == f"python{version}"
    assert pip[pip.index("--target") + 1] == str(output / "python")
    assert set(assets.runtime_dependencies()) <= set(pip)
    # And the runplane package sits next to its dependencies, without stale bytecode
    assert (output / "python" / "runplane" / "wiring.py").is_file()
    assert not list((output / "python").rglob("__pycache__"))
    # And then everything in the layer is compiled by the runtime's own Python,
    # unchecked (read-only /opt never recompiles), as deployed under /opt/python
    python, arguments = _compile_step(compile_)
    assert python == (sys.executable if _is_runtime_python() else runtime_python)
    assert arguments[arguments.index("--invalidation-mode") + 1] == "unchecked-hash"
    assert arguments[-1] == str(output / "python")
    assert arguments[arguments.index("-p") + 1] == "/opt/python"


def test_the_functions_asset_ships_the_entry_points_compiled_for_the_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a compiler that records its arguments, and the runtime's Python
    calls = _recording_subprocess(monkeypatch)
    runtime_python = _runtime_python_on_path(tmp_path, monkeypatch)
    output = tmp_path / "out"
    # When the functions' asset is bundled locally
    bundled = assets._LocalFunctionsBundling().try_bundle(str(output), image=None)
    # Then it holds the entry points, not the sandbox image's runner nor stale bytecode
    assert bundled is True
    assert (output / "functions" / "api" / "app.py").is_file()
    assert not (output / "functions" / "runner").exists()
    assert not list(output.rglob("__pycache__"))
    # And they are compiled by the runtime's Python, unchecked, as under /var/task
    (compile_,) = calls
    python, arguments = _compile_step(compile_)
    assert python == (sys.executable if _is_runtime_python() else runtime_python)
    assert arguments[arguments.index("--invalidation-mode") + 1] == "unchecked-hash"
    assert arguments[-1] == str(output)
    assert arguments[arguments.index("-p") + 1] == "/var/task"


@pytest.mark.skipif(_is_runtime_python(), reason="this Python is the runtime's")
def test_without_the_runtimes_python_the_local_build_declines_for_the_bundling_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no Python of the runtime's version on this machine
    calls = _recording_subprocess(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))
    # When either asset is bundled locally
    layer = assets._LocalLayerBundling().try_bundle(str(tmp_path / "layer"), image=None)
    functions = assets._LocalFunctionsBundling().try_bundle(str(tmp_path / "fn"), image=None)
    # Then both decline (CDK builds them in the runtime's image) and nothing ran
    assert (layer, functions) == (False, False)
    assert calls == []
    # And the image's builds compile with its Python, unchecked, like the local ones
    for command in (assets.layer_container_command(), assets.functions_container_command()):
        script = command[-1]
        assert "python -m compileall" in script
        assert "--invalidation-mode unchecked-hash" in script
    assert "rm -rf /asset-output/functions/runner" in assets.functions_container_command()[-1]


def test_the_compile_step_writes_bytecode_no_runtime_recompiles(tmp_path: Path) -> None:
    # Given a module in an asset tree
    tree = tmp_path / "asset"
    (tree / "functions").mkdir(parents=True)
    (tree / "functions" / "entry.py").write_text("def handler():\n    raise ValueError\n")
    # When the compile step runs on it (with this Python: the flags do not depend on it)
    subprocess.run([sys.executable, *assets.compile_arguments(str(tree), "/var/task")], check=True)
    # Then the module has bytecode that is hash-based and never checked against its
    # source (flags 0b01), naming the deployed path in tracebacks
    (pyc,) = (tree / "functions" / "__pycache__").glob("entry.*.pyc")
    data = pyc.read_bytes()
    assert int.from_bytes(data[4:8], "little") == 0b01
    code = marshal.loads(data[16:])  # noqa: S302 - bytecode this test just wrote
    assert code.co_filename == "/var/task/functions/entry.py"


def test_every_function_declares_the_runtime_the_assets_are_compiled_for(
    tmp_path: Path,
) -> None:
    # When the app is synthesized
    infra_app.main(["--no-bundling", "--outdir", str(tmp_path), "-c", "environmentName=ci"])
    template = json.loads((tmp_path / "runplane-ci.template.json").read_text())
    resources = template["Resources"].values()
    # Then every function and the layer declare the runtime the bytecode targets
    functions = [r for r in resources if r["Type"] == "AWS::Lambda::Function"]
    runtimes = {f["Properties"]["Runtime"] for f in functions}
    assert runtimes == {assets.RUNTIME.name}
    (layer,) = [r for r in resources if r["Type"] == "AWS::Lambda::LayerVersion"]
    assert layer["Properties"]["CompatibleRuntimes"] == [assets.RUNTIME.name]
