"""Configuration directories for the runner's checks, written from a file map."""

from __future__ import annotations

from pathlib import Path


def write_configuration(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    """``tmp_path/config`` holding ``files`` (relative names; text or bytes)."""
    root = tmp_path / "config"
    root.mkdir(parents=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root
