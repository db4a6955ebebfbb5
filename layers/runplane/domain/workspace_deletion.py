"""The rules of a workspace's deletion (pure): what counts as a resource it still
manages, why it is in use, and the reason a forced deletion must give.

A workspace is deleted only once nothing of it is left running or locked, and, unless
forced, only once its current state manages nothing (a destroy run emptied it). A
forced deletion leaves whatever its state manages unmanaged, so it must say why: the
reason is recorded in the ``workspace.deleted`` audit event.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import InvalidInput, StateRejected
from runplane.domain.state import parse_json

DELETED_EVENT: Final = "workspace.deleted"
MAX_REASON: Final = 500
REASON_POINTER: Final = "/reason"


@dataclass(frozen=True)
class DeletedWorkspace:
    """What a deletion did: the workspace it deleted, whether it was forced (and why),
    and how many resources its current state still managed."""

    id: str
    name: str
    deleted_at: datetime
    deleted_by: str
    forced: bool
    reason: str | None
    resources: int


def valid_reason(force: bool, reason: str | None) -> str | None:
    """The reason as recorded: required when forced, 1-500 characters, one line of text
    (no control character). A reason given without force is recorded too."""
    if reason is None or reason == "":
        if force:
            raise InvalidInput(
                "a forced deletion needs a reason (--reason TEXT): it is audited", REASON_POINTER
            )
        return None
    if not isinstance(reason, str) or len(reason) > MAX_REASON or not reason.strip():
        raise InvalidInput(f"the reason is 1-{MAX_REASON} characters of text", REASON_POINTER)
    for character in reason:
        if unicodedata.category(character) == "Cc":
            raise InvalidInput(
                f"the reason has a control character (U+{ord(character):04X})", REASON_POINTER
            )
    return reason


def busy_because(workspace: Workspace, runs: Iterable[Run]) -> str | None:
    """Why the workspace is in use, or None: a run holds or waits for its writer
    reservation, it is locked, or a run of it has not ended (a plan included)."""
    if workspace.writer_run_id is not None:
        return f"run {workspace.writer_run_id} holds its writer reservation"
    if workspace.queue_length > 0:
        return f"{workspace.queue_length} run(s) wait for its writer reservation"
    if workspace.lock_id is not None:
        return f"it is locked by {workspace.lock_holder_display or 'someone'}"
    for run in runs:
        if not run.status.is_terminal:
            return f"run {run.id} is {run.status.value}"
    return None


def managed_resources(raw: bytes) -> int:
    """How many resource instances a state document (format 4) manages: the instances
    of its managed resources, deposed ones included (they exist until destroyed), as
    ``tofu state list`` counts them. Data sources and outputs manage nothing."""
    try:
        state = parse_json(raw)
    except (ValueError, RecursionError):
        raise StateRejected("the workspace's current state is not valid JSON") from None
    return managed_resources_of(state)


def managed_resources_of(state: Any) -> int:
    """``managed_resources`` of a parsed state document."""
    resources = state.get("resources") if isinstance(state, dict) else None
    count = 0
    for resource in resources if isinstance(resources, list) else ():
        if not isinstance(resource, dict) or resource.get("mode", "managed") != "managed":
            continue
        instances = resource.get("instances")
        if isinstance(instances, list):
            count += len(instances)
    return count


def audit_details(deleted: DeletedWorkspace) -> dict[str, str]:
    details = {
        "name": deleted.name,
        "force": "true" if deleted.forced else "false",
        "resources": str(deleted.resources),
    }
    if deleted.reason is not None:
        details["reason"] = deleted.reason
    return details
