"""A new run's variables: every source resolved per (category, name), and the document
the run's encrypted variables artifact holds.

Precedence, highest first (docs/runs.md, "Variable precedence"):

1. the run's own variables (Terraform category; the run API's and CLI's ``variables``);
2. the workspace's variables;
3. the variable sets applied to the workspace: those applied to it by name before the
   global ones (applied to every workspace of the organization), and among sets of the
   same kind the one whose name sorts first (as HCP Terraform resolves them).

A variable is sensitive in the run if any source defining it marks it so: the name is
what a configuration and a reader of the run know a secret by, and marking too much
only hides a value.

The artifact is a JSON object. A run with Terraform variables only stores them as it
always did, ``{"name": "value", ...}``, so a runner of an earlier release reads it; a run
with environment variables stores ``{"terraform": {...}, "env": {...},
"sensitive_env": [...]}``. The two cannot be confused: every value of the first is a
string, and no value of the second is. A runner of an earlier release refuses the
second (its values are not all strings) rather than run without its environment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.domain.env_variables import env_name_problem
from runplane.domain.errors import InvalidInput, VariablesTooLarge
from runplane.domain.variables import (
    MAX_VARIABLE_BYTES,
    MAX_VARIABLES,
    PinnedVariables,
    VariableCategory,
    VariableSource,
    check_variables,
    value_problem,
)

MAX_ENV_VARIABLES: Final = 100
"""The most environment variables a run may give its engine (all sources together)."""
MAX_ENV_BYTES: Final = 256 * 1024
"""The most bytes their values may add up to."""

_TERRAFORM: Final = "terraform"
_ENV: Final = "env"
_SENSITIVE_ENV: Final = "sensitive_env"

Key = tuple[VariableCategory, str]


@dataclass(frozen=True)
class PinnedSet:
    """A variable set as a new run reads it: ``specific`` when it is applied to the
    run's workspace by name (not only as a global set)."""

    id: str
    name: str
    specific: bool
    variables: PinnedVariables

    def __repr__(self) -> str:
        return f"PinnedSet({self.id!r}, {self.name!r}, specific={self.specific})"


def set_order(sets: Iterable[PinnedSet]) -> list[PinnedSet]:
    """The sets from the highest precedence down: applied by name before global, then
    by name."""
    return sorted(sets, key=lambda s: (not s.specific, s.name, s.id))


@dataclass(frozen=True)
class ResolvedVariable:
    category: VariableCategory
    name: str
    value: str = field(repr=False)
    source: VariableSource
    sensitive: bool
    variable_set_id: str | None = None
    variable_set_name: str | None = None

    def entry(self) -> dict[str, Any]:
        """What the run's input snapshot and its review say of it: never the value."""
        entry: dict[str, Any] = {
            "name": self.name,
            "category": self.category.value,
            "source": self.source.value,
            "sensitive": self.sensitive,
        }
        if self.variable_set_id is not None:
            entry["variable_set_id"] = self.variable_set_id
            entry["variable_set_name"] = self.variable_set_name
        return entry


@dataclass(frozen=True)
class Resolved:
    """A run's variables, one per (category, name), in category then name order."""

    variables: tuple[ResolvedVariable, ...]

    def __repr__(self) -> str:
        return f"Resolved({[(v.category.value, v.name) for v in self.variables]})"

    def _of(self, category: VariableCategory) -> list[ResolvedVariable]:
        return [v for v in self.variables if v.category is category]

    @property
    def terraform(self) -> dict[str, str]:
        return {v.name: v.value for v in self._of(VariableCategory.TERRAFORM)}

    @property
    def env(self) -> dict[str, str]:
        return {v.name: v.value for v in self._of(VariableCategory.ENV)}

    @property
    def sensitive_names(self) -> list[str]:
        """The sensitive Terraform variables (declared so to the engine)."""
        return sorted(v.name for v in self._of(VariableCategory.TERRAFORM) if v.sensitive)

    @property
    def sensitive_env(self) -> list[str]:
        return sorted(v.name for v in self._of(VariableCategory.ENV) if v.sensitive)

    @property
    def workspace_names(self) -> list[str]:
        """The Terraform variables the workspace gave (``workspace_variable_names``)."""
        return sorted(
            v.name
            for v in self._of(VariableCategory.TERRAFORM)
            if v.source is VariableSource.WORKSPACE
        )

    def entries(self) -> list[dict[str, Any]]:
        return [v.entry() for v in self.variables]

    def document(self) -> bytes | None:
        """The variables artifact's content, or None when the run has no variable."""
        if not self.variables:
            return None
        if not self._of(VariableCategory.ENV):
            return json.dumps(self.terraform, sort_keys=True).encode()
        sectioned = {
            _TERRAFORM: self.terraform,
            _ENV: self.env,
            _SENSITIVE_ENV: self.sensitive_env,
        }
        return json.dumps(sectioned, sort_keys=True).encode()


def resolve(
    run: Mapping[str, str],
    workspace: PinnedVariables,
    sets: Sequence[PinnedSet] = (),
) -> Resolved:
    """Every variable of a new run from its sources, highest precedence first (module
    docstring). ``run`` holds the run's own Terraform variables."""
    run_layer = PinnedVariables(dict(run))
    layers: list[tuple[PinnedVariables, VariableSource, PinnedSet | None]] = [
        (run_layer, VariableSource.RUN, None),
        (workspace, VariableSource.WORKSPACE, None),
        *((each.variables, VariableSource.VARIABLE_SET, each) for each in set_order(sets)),
    ]
    chosen: dict[Key, ResolvedVariable] = {}
    sensitive: set[Key] = set()
    for pinned, source, origin in layers:
        for category, values, marked in (
            (VariableCategory.TERRAFORM, pinned.values, pinned.sensitive),
            (VariableCategory.ENV, pinned.env, pinned.sensitive_env),
        ):
            for name, value in values.items():
                key = (category, name)
                if name in marked:
                    sensitive.add(key)
                if key in chosen:
                    continue
                chosen[key] = ResolvedVariable(
                    category,
                    name,
                    value,
                    source,
                    sensitive=False,
                    variable_set_id=origin.id if origin else None,
                    variable_set_name=origin.name if origin else None,
                )
    # Terraform variables first, then environment variables; each by name.
    ordered = sorted(
        chosen.items(), key=lambda item: (item[0][0] is not VariableCategory.TERRAFORM, item[0][1])
    )
    return Resolved(
        tuple(
            ResolvedVariable(
                v.category,
                v.name,
                v.value,
                v.source,
                sensitive=key in sensitive,
                variable_set_id=v.variable_set_id,
                variable_set_name=v.variable_set_name,
            )
            for key, v in ordered
        )
    )


def check_resolved(resolved: Resolved) -> None:
    """The run's variables must fit the documented bounds (docs/runs.md): the Terraform
    ones the run variables' (:func:`check_variables`), the environment ones at most
    :data:`MAX_ENV_VARIABLES` adding up to :data:`MAX_ENV_BYTES`."""
    check_variables(resolved.terraform)
    env = resolved.env
    if len(env) > MAX_ENV_VARIABLES:
        raise InvalidInput(
            f"a run has at most {MAX_ENV_VARIABLES} environment variables; its workspace "
            f"and variable sets give it {len(env)}"
        )
    total = sum(len(value.encode("utf-8")) for value in env.values())
    if total > MAX_ENV_BYTES:
        raise VariablesTooLarge(
            f"the run's environment variables add up to {total:,} bytes; at most {MAX_ENV_BYTES:,}"
        )


@dataclass(frozen=True)
class VariablesDocument:
    """A variables artifact as the runner reads it."""

    terraform: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    sensitive_env: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"VariablesDocument({sorted(self.terraform)}, env={sorted(self.env)})"


def read_document(document: object) -> VariablesDocument:
    """The variables a run's artifact holds, either shape (module docstring). Raises
    ``ValueError`` for anything else, naming no value: an environment variable whose
    name is not allowed (:func:`env_name_problem`), one not marked in the document, a
    value not a string or with a control character the rules refuse."""
    if not isinstance(document, dict):
        raise ValueError("the run's variables are not a JSON object")
    if all(isinstance(value, str) for value in document.values()):
        return VariablesDocument(dict(document))
    if not set(document) <= {_TERRAFORM, _ENV, _SENSITIVE_ENV}:
        raise ValueError("the run's variables document has sections this runner does not know")
    terraform = _strings(document.get(_TERRAFORM, {}), "Terraform variables")
    env = _strings(document.get(_ENV, {}), "environment variables")
    marked = document.get(_SENSITIVE_ENV, [])
    if not isinstance(marked, list) or not all(isinstance(n, str) for n in marked):
        raise ValueError("the run's sensitive environment variables are not a list of names")
    for name, value in env.items():
        problem = env_name_problem(name)
        if problem is not None:
            raise ValueError(problem.message)
        if value_problem(name, value) is not None or len(value.encode()) > MAX_VARIABLE_BYTES:
            raise ValueError(f"environment variable {name} has a value the engine cannot take")
    if not set(marked) <= env.keys():
        raise ValueError("the run marks an environment variable sensitive that it does not set")
    if len(env) > MAX_ENV_VARIABLES or len(terraform) > MAX_VARIABLES:
        raise ValueError("the run's variables are more than a run may have")
    return VariablesDocument(terraform, env, frozenset(marked))


def _strings(section: object, what: str) -> dict[str, str]:
    if not isinstance(section, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in section.items()
    ):
        raise ValueError(f"the run's {what} are not a JSON object of strings")
    return dict(section)
