"""Summarise a saved plan from the engine's ``show -json`` document (format 0.x and 1.x).

One counting rule for the whole product: the runner's plan summary (plan evidence,
the run's views, drift records) and the policy input's ``summary`` both count
resource actions with ``tally``. Each keeps the names it was first persisted with:
``ActionCounts.policy_input`` gives the policy input's names (``add``, ``change``,
...), whose digest an approval binds, so they cannot be renamed.

Pure functions: no I/O. Missing or malformed parts of the document count as empty, so an
empty plan (no ``resource_changes``, no ``output_changes``) summarises to no changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

OutputAction = Literal["create", "update", "delete", "no-op"]
OUTPUT_ACTIONS: Final[frozenset[str]] = frozenset({"create", "update", "delete", "no-op"})

NO_CHANGE_ACTIONS: Final = frozenset({"no-op", "read"})
"""Resource actions that change nothing: they are not counted and are not changes."""


@dataclass(frozen=True)
class ActionCounts:
    """Counts of planned resource actions.

    A replacement (``["delete", "create"]`` or ``["create", "delete"]``) counts as one
    add, one destroy and one replace; ``no-op``, ``read`` and actions not counted here
    (such as OpenTofu's ``forget``) count nothing.
    """

    adds: int = 0
    changes: int = 0
    destroys: int = 0
    replaces: int = 0

    def policy_input(self) -> dict[str, int]:
        """The counts under the policy input's names (format ``runplane-policy-input/1``)."""
        return {
            "add": self.adds,
            "change": self.changes,
            "destroy": self.destroys,
            "replace": self.replaces,
        }


def tally(changes: Iterable[Sequence[str]]) -> ActionCounts:
    """The counts of resource changes, each given by its ``actions``."""
    adds = changes_ = destroys = replaces = 0
    for actions in changes:
        shape = tuple(actions)
        if len(shape) == 2 and set(shape) == {"create", "delete"}:
            adds, destroys, replaces = adds + 1, destroys + 1, replaces + 1
        elif shape == ("create",):
            adds += 1
        elif shape == ("update",):
            changes_ += 1
        elif shape == ("delete",):
            destroys += 1
    return ActionCounts(adds, changes_, destroys, replaces)


@dataclass(frozen=True)
class PlanSummary(ActionCounts):
    """The counts, the action planned for each output, and whether anything changes.

    ``has_changes`` is true iff some resource has an action other than ``no-op``/``read``
    (including actions not counted) or some output's action is not ``no-op``; for a
    refresh-only plan, also when the refresh found drift. ``drifted`` is set for a
    refresh-only plan only: how many resources changed outside the engine.
    """

    output_changes: dict[str, OutputAction] = field(default_factory=dict)
    has_changes: bool = False
    drifted: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the summary (as plan evidence stores it)."""
        body: dict[str, Any] = {
            "adds": self.adds,
            "changes": self.changes,
            "destroys": self.destroys,
            "replaces": self.replaces,
            "output_changes": dict(self.output_changes),
            "has_changes": self.has_changes,
        }
        if self.drifted is not None:
            body["drifted"] = self.drifted
        return body


def _actions(change: object) -> tuple[str, ...]:
    """The ``actions`` of a change object (``{"actions": [...], ...}``), or ``()``."""
    if not isinstance(change, Mapping):
        return ()
    actions = change.get("actions")
    if isinstance(actions, str) or not isinstance(actions, Sequence):
        return ()
    return tuple(action for action in actions if isinstance(action, str))


def output_action(actions: Sequence[str]) -> OutputAction:
    """The single action of an output change.

    ``create``, ``update``, ``delete`` and ``no-op`` map to themselves, ``read`` and an
    empty list to ``no-op``; any other shape (a replacement, an unknown action) is an
    ``update``, so that it is never mistaken for no change.
    """
    shape = tuple(actions)
    if shape in {(), ("no-op",), ("read",)}:
        return "no-op"
    if shape == ("create",):
        return "create"
    if shape == ("delete",):
        return "delete"
    return "update"


def summarize(plan: Mapping[str, Any]) -> PlanSummary:
    """Summarise a ``show -json`` plan document."""
    resource_changes = plan.get("resource_changes")
    if not isinstance(resource_changes, Sequence) or isinstance(resource_changes, str):
        resource_changes = ()
    actions = [
        _actions(entry.get("change") if isinstance(entry, Mapping) else None)
        for entry in resource_changes
    ]
    resource_changed = any(set(shape) - NO_CHANGE_ACTIONS for shape in actions)

    output_changes: dict[str, OutputAction] = {}
    raw_outputs = plan.get("output_changes")
    if isinstance(raw_outputs, Mapping):
        for name, entry in raw_outputs.items():
            if isinstance(name, str):
                output_changes[name] = output_action(_actions(entry))

    outputs_changed = any(action != "no-op" for action in output_changes.values())
    counts = tally(actions)
    return PlanSummary(
        adds=counts.adds,
        changes=counts.changes,
        destroys=counts.destroys,
        replaces=counts.replaces,
        output_changes=output_changes,
        has_changes=resource_changed or outputs_changed,
    )


def drifted_resources(plan: Mapping[str, Any]) -> int:
    """How many resources the refresh found changed outside the engine (``resource_drift``
    entries whose action is not ``no-op``/``read``): what a refresh-only plan reports."""
    drift = plan.get("resource_drift")
    if not isinstance(drift, Sequence) or isinstance(drift, str):
        return 0
    return sum(
        1
        for entry in drift
        if isinstance(entry, Mapping) and set(_actions(entry.get("change"))) - NO_CHANGE_ACTIONS
    )
