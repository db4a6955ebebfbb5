"""Environment variables a run gives its engine: which names a workspace, a variable
set or a run may use, and which belong to the runner or the platform.

An ``env`` variable becomes an environment variable of the engine's process in the
sandbox (plan and apply), and so of every provider and program the engine starts. Its
name is a POSIX environment name: a letter or underscore, then letters, digits or
underscores (ASCII only), at most :data:`MAX_ENV_NAME` characters. The names the runner
sets itself or that would change how the runner drives the engine are refused (422
``VARIABLE_NAME_RESERVED``, the message saying who owns the name), compared without
regard to letter case, so no spelling of one is accepted: ``Path`` is refused as
``PATH`` is. ``TF_VAR_name`` is allowed: it is how the engine reads a Terraform
variable from its environment (a Terraform-category variable of the same name wins,
since the engine's ``-var-file`` beats its environment).

Cloud credential variables (``AWS_*``, ``GOOGLE_*``, ``ARM_*``) are allowed as static
credentials. When the workspace's dynamic cloud credentials give the engine a variable
of the same name, the runner's value overrides the env variable's for that run, and
the run's log says which names it overrode (``runner/engine_env.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_ENV_NAME: Final = 128
ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TF_VAR_PREFIX: Final = "TF_VAR_"

_ACCOUNT = "the sandbox's account and shell are the runner's to set"
_CLI_CONFIG = "the runner's CLI configuration points the engine at the control plane"
_UNATTENDED = "the runner runs the engine unattended and sets it so"
_LAYOUT = "the runner lays out the engine's working directory and plugins"
_LOG = "the engine's log is the runner's to capture and redact"

RESERVED_NAMES: Final[dict[str, str]] = {
    "PATH": "the runner sets the engine's search path",
    "HOME": "the runner gives the engine its own home directory",
    "TMPDIR": "the runner gives the engine its own temporary directory",
    "USER": _ACCOUNT,
    "LOGNAME": _ACCOUNT,
    "SHELL": _ACCOUNT,
    "PWD": _ACCOUNT,
    "TF_CLI_CONFIG_FILE": _CLI_CONFIG,
    "TERRAFORM_CONFIG": _CLI_CONFIG + " (this is the older name of TF_CLI_CONFIG_FILE)",
    "TF_CLI_ARGS": "it would add arguments to every engine command the runner runs",
    "TF_DATA_DIR": _LAYOUT,
    "TF_PLUGIN_CACHE_DIR": _LAYOUT,
    "TF_LOG": _LOG,
    "TF_LOG_PATH": _LOG,
    "TF_IN_AUTOMATION": _UNATTENDED,
    "TF_INPUT": _UNATTENDED,
    "CHECKPOINT_DISABLE": _UNATTENDED,
    "TF_WORKSPACE": "the run's workspace is named by the runner's backend configuration",
    "TF_STATE_PERSIST_INTERVAL": "state publication cadence during apply is the platform's",
    "TF_REATTACH_PROVIDERS": "the engine starts its providers itself; none is attached",
    "TF_APPEND_USER_AGENT": "the engine's user agent is the platform's",
    "TFE_RUN_ID": "the runner names the run to the engine",
}
"""Names refused outright (upper case), each with who owns it and why."""

RESERVED_PREFIXES: Final[tuple[tuple[str, str], ...]] = (
    ("TF_CLI_ARGS_", "it would add arguments to the engine commands the runner runs"),
    ("TF_LOG_", _LOG),
    (
        "TF_TOKEN_",
        "host tokens are the runner's: its relay authenticates the engine to the control plane",
    ),
    ("LD_", "the dynamic loader would run code of its choosing in the sandbox's processes"),
    ("DYLD_", "the dynamic loader would run code of its choosing in the sandbox's processes"),
    ("PYTHON", "the sandbox's Python (the runner, Python providers) reads them"),
    ("RUNPLANE_", "the runner's own settings"),
)
"""Prefixes refused (upper case): every name starting with one, with why."""


@dataclass(frozen=True)
class NameProblem:
    """Why a name cannot be an environment variable's: ``reserved`` when it is well
    formed but owned by the runner or the platform."""

    message: str
    reserved: bool = False


def env_name_problem(name: str) -> NameProblem | None:
    """Why ``name`` cannot be an ``env`` variable's name, or None if it can."""
    if len(name) > MAX_ENV_NAME:
        return NameProblem(f"an environment variable name has at most {MAX_ENV_NAME} characters")
    if not ENV_NAME.fullmatch(name):
        return NameProblem(
            f"environment variable name {name[:80]!r} is not a POSIX name: it must start "
            "with a letter or underscore and continue with letters, digits or underscores"
        )
    upper = name.upper()
    reason = RESERVED_NAMES.get(upper)
    if reason is None:
        reason = next((why for prefix, why in RESERVED_PREFIXES if upper.startswith(prefix)), None)
    if reason is not None:
        return NameProblem(f"environment variable {name} is reserved: {reason}", reserved=True)
    return None


def tf_var_name(name: str) -> str | None:
    """The Terraform variable an environment variable ``TF_VAR_<name>`` sets, or None
    (the engine reads the prefix as written, upper case)."""
    if name.startswith(TF_VAR_PREFIX) and len(name) > len(TF_VAR_PREFIX):
        return name[len(TF_VAR_PREFIX) :]
    return None
