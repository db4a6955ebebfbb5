"""Run variable names: the rule the engine applies to ``variable`` blocks, checked up front.

A name the engine would reject must be refused when the run is created (422, with a
pointer to the variable), not discovered by the sandbox. Names are Terraform
identifiers limited to ASCII (a letter or underscore, then letters, digits,
underscores and hyphens); the engine also reserves some names for module blocks.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from runplane.domain.env_variables import env_name_problem
from runplane.domain.errors import InvalidInput, ReservedVariableName, VariablesTooLarge

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


ALLOWED_CONTROLS: Final = frozenset("\t\n")
"""The only control characters a value may hold: a multi-line value needs them. Others
(NUL truncates a C string; carriage return and escapes rewrite what a reader of a log or
a terminal sees) have no place in a Terraform string variable, so they are refused."""


def value_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be variable ``name``'s value, or None if it can. The message
    names the character, never the value (it may be a secret)."""
    for character in value:
        if unicodedata.category(character) == "Cc" and character not in ALLOWED_CONTROLS:
            return (
                f"variable {name!r} has a control character (U+{ord(character):04X}) in its "
                "value; only tab and newline are allowed"
            )
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
        problem = value_problem(name, value)
        if problem is not None:
            raise InvalidInput(problem, pointer(name))
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


# -- workspace variables ---------------------------------------------------------------------

MAX_DESCRIPTION: Final = 512


class VariableSource(StrEnum):
    """Where a run's variable came from: the run's own win over the workspace's, which
    win over the variable sets' (``domain/variable_precedence.py``)."""

    RUN = "run"
    WORKSPACE = "workspace"
    VARIABLE_SET = "variable_set"


class VariableCategory(StrEnum):
    """What a variable is to the engine: a Terraform variable (``-var-file``), or an
    environment variable of its process (``docs/runs.md``). A name is unique per
    category: ``region`` may be both."""

    TERRAFORM = "terraform"
    ENV = "env"


def category_of(value: object, pointer: str = "/category") -> VariableCategory:
    """``value`` as a category, else :class:`InvalidInput` at ``pointer``."""
    try:
        return VariableCategory(str(value))
    except ValueError:
        raise InvalidInput(
            f"category {str(value)[:40]!r} is not one of terraform, env", pointer
        ) from None


def check_name(name: str, category: VariableCategory, pointer: str) -> None:
    """Raise :class:`InvalidInput` for a name ``category`` cannot have, and
    :class:`ReservedVariableName` for an environment name the runner or platform owns."""
    if category is VariableCategory.ENV:
        problem = env_name_problem(name)
        if problem is not None:
            error = ReservedVariableName if problem.reserved else InvalidInput
            raise error(problem.message, pointer)
        return
    if len(name) > MAX_VARIABLE_NAME:
        raise InvalidInput(f"a variable name has at most {MAX_VARIABLE_NAME} characters", pointer)
    message = name_problem(name)
    if message is not None:
        raise InvalidInput(message, pointer)


@dataclass(frozen=True)
class WorkspaceVariable:
    """A workspace variable as stored; ``value`` is None for a sensitive one, whose
    value is sealed and never read back."""

    name: str
    sensitive: bool
    description: str | None
    value: str | None
    updated_at: datetime
    updated_by: str
    category: VariableCategory = VariableCategory.TERRAFORM

    def __repr__(self) -> str:
        # Never the value: a repr ends up in logs and tracebacks.
        return (
            f"WorkspaceVariable({self.name!r}, {self.category.value}, sensitive={self.sensitive})"
        )

    def view(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category.value,
            "sensitive": self.sensitive,
            "description": self.description,
            "value": None if self.sensitive else self.value,
            "updated_at": self.updated_at.isoformat(),
            "updated_by": self.updated_by,
        }


@dataclass(frozen=True)
class StoredVariable:
    """A workspace variable with what its record holds besides: the value's size, the
    record's version, and a sensitive value's sealing (a wrapped data key and the
    ciphertext)."""

    variable: WorkspaceVariable
    size: int
    version: int
    wrapped_key: bytes | None
    sealed: bytes | None

    def __repr__(self) -> str:
        return f"StoredVariable({self.variable!r}, version={self.version})"


def check_workspace_variable(
    name: str,
    value: object,
    description: str | None,
    category: VariableCategory = VariableCategory.TERRAFORM,
) -> int:
    """Raise :class:`InvalidInput` (:class:`ReservedVariableName`, or
    :class:`VariablesTooLarge`) for a workspace or variable set variable the engine
    could not take; the value's size in bytes otherwise."""
    check_name(name, category, "/name")
    if not isinstance(value, str):
        raise InvalidInput(f"variable {name!r} must have a string value", "/value")
    problem = value_problem(name, value)
    if problem is not None:
        raise InvalidInput(problem, "/value")
    if description is not None and len(description) > MAX_DESCRIPTION:
        raise InvalidInput(
            f"a description has at most {MAX_DESCRIPTION} characters", "/description"
        )
    size = len(value.encode("utf-8"))
    if size > MAX_VARIABLE_BYTES:
        raise VariablesTooLarge(
            f"variable {name} is {size:,} bytes; a value has at most {MAX_VARIABLE_BYTES:,}",
            "/value",
        )
    return size


def replacing(
    previous: StoredVariable | None,
    *,
    name: str,
    value: str,
    sensitive: bool,
    description: str | None,
    category: VariableCategory,
    at: datetime,
    by: str,
) -> WorkspaceVariable:
    """The variable a set of ``name`` stores over ``previous`` (a workspace's or a
    variable set's): a sensitive one stays sensitive until it is deleted, and a
    sensitive value is never kept in the clear."""
    if previous is not None and previous.variable.sensitive and not sensitive:
        raise InvalidInput(
            f"variable {name} is sensitive; delete it first to store it in the clear",
            "/sensitive",
        )
    return WorkspaceVariable(
        name=name,
        sensitive=sensitive,
        description=description,
        value=None if sensitive else value,
        updated_at=at,
        updated_by=by,
        category=category,
    )


@dataclass(frozen=True)
class PinnedVariables:
    """A workspace's (or a variable set's) variables as a new run pins them: every
    value (sensitive ones opened) and the names of the sensitive ones; Terraform
    variables in ``values``, environment variables in ``env``."""

    values: dict[str, str]
    sensitive: frozenset[str] = frozenset()
    env: dict[str, str] = field(default_factory=dict)
    sensitive_env: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        # Never the values: a repr ends up in logs and tracebacks.
        shown = f"PinnedVariables({sorted(self.values)}, sensitive={sorted(self.sensitive)}"
        if self.env:
            shown += f", env={sorted(self.env)}, sensitive_env={sorted(self.sensitive_env)}"
        return shown + ")"
