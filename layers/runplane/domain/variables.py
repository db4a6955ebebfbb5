"""Run variable names: the rule the engine applies to ``variable`` blocks, checked up front.

A name the engine would reject must be refused when the run is created (422, with a
pointer to the variable), not discovered by the sandbox. Names are Terraform
identifiers limited to ASCII (a letter or underscore, then letters, digits,
underscores and hyphens); the engine also reserves some names for module blocks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from runplane.domain.errors import InvalidInput, VariablesTooLarge

MAX_VARIABLES: Final = 100
MAX_VARIABLE_NAME: Final = 128
MAX_VARIABLE_BYTES: Final = 64 * 1024
MAX_VARIABLES_BYTES: Final = 256 * 1024
IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
ENGINE_RESERVED: Final = frozenset(
    {"source", "version", "providers", "count", "for_each", "lifecycle", "depends_on", "locals"}
)
"""Names the engine refuses for ``variable`` blocks (their meaning in ``module`` blocks)."""
PLATFORM_RESERVED: Final = frozenset({"TF_STATE_PERSIST_INTERVAL"})
"""State publication cadence during apply is the platform's to set."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a run variable's name, or None if it can."""
    if not IDENTIFIER.fullmatch(name):
        return (
            f"variable name {name[:80]!r} is not an identifier: it must start with a letter "
            "or underscore and continue with letters, digits, underscores or hyphens"
        )
    if name in ENGINE_RESERVED:
        return f"variable name {name!r} is reserved by the engine"
    if name in PLATFORM_RESERVED or name.upper() in PLATFORM_RESERVED:
        return f"variable name {name!r} is reserved by the platform"
    return None


def pointer(name: str) -> str:
    """The JSON pointer to the variable ``name`` in a run-creation request."""
    return "/variables/" + name.replace("~", "~0").replace("/", "~1")


def check_variables(variables: Mapping[str, object]) -> None:
    """Raise :class:`InvalidInput` for the first variable the engine could not take, and
    :class:`VariablesTooLarge` past the documented size bounds (docs/runs.md)."""
    if len(variables) > MAX_VARIABLES:
        raise InvalidInput(f"at most {MAX_VARIABLES} variables", "/variables")
    total = 0
    for name, value in variables.items():
        if len(name) > MAX_VARIABLE_NAME:
            raise InvalidInput(
                f"a variable name has at most {MAX_VARIABLE_NAME} characters",
                pointer(name[:MAX_VARIABLE_NAME]),
            )
        problem = name_problem(name)
        if problem is not None:
            raise InvalidInput(problem, pointer(name))
        if not isinstance(value, str):
            raise InvalidInput(f"variable {name!r} must have a string value", pointer(name))
        size = len(value.encode("utf-8"))
        if size > MAX_VARIABLE_BYTES:
            raise VariablesTooLarge(
                f"variable {name} is {size:,} bytes; a value has at most {MAX_VARIABLE_BYTES:,}",
                pointer(name),
            )
        total += size
    if total > MAX_VARIABLES_BYTES:
        raise VariablesTooLarge(
            f"the variables' values add up to {total:,} bytes; at most {MAX_VARIABLES_BYTES:,}",
            "/variables",
        )
