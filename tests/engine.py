"""Locate the pinned engine binary for tests, and a clean environment to run it in.

The binary is Terraform v1.0.3, used as an OpenTofu-compatible engine; `make engine`
(``python -m tools.fetch_engine``) installs it into ``.venv/engine``. See docs/engine.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ENGINE_DIR = REPO_ROOT / ".venv" / "engine"
ENGINE_BINARY = ENGINE_DIR / "terraform"


def engine_path() -> Path:
    """Return the engine binary, fetching (and verifying) it first if it is not installed."""
    if not ENGINE_BINARY.is_file():
        subprocess.run(
            [sys.executable, "-m", "tools.fetch_engine", "--dest", str(ENGINE_DIR)],
            check=True,
            cwd=REPO_ROOT,
        )
    return ENGINE_BINARY


def engine_env(tmp: Path, cli_config: Path | None = None) -> dict[str, str]:
    """A minimal environment for the engine: nothing from the parent but PATH.

    In particular no AWS_* credentials and no TF_TOKEN_* registry tokens leak in; HOME
    points at ``tmp`` so no user CLI configuration or plugin cache is picked up.
    """
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(tmp),
        "CHECKPOINT_DISABLE": "1",
        "TF_IN_AUTOMATION": "1",
    }
    if cli_config is not None:
        env["TF_CLI_CONFIG_FILE"] = str(cli_config)
    return env
