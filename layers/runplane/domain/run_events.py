"""Run events: what a committed status move means to people and to other workspaces.

A status move is committed first; its event is published afterwards and
handled asynchronously (run triggers, notifications, other hooks). This module
is pure: which moves publish which event, and the event's wire form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from runplane.domain.entities import Run, Workspace
from runplane.domain.identity import PrincipalKind
from runplane.domain.run import RunKind, RunStatus

S = RunStatus


class EventType(StrEnum):
    NEEDS_ATTENTION = "needs_attention"
    APPROVAL_EXPIRING = "approval_expiring"
    APPLIED = "applied"
    ERRORED = "errored"
    EXPIRED = "expired"
    NEEDS_RECOVERY = "needs_recovery"
    DRIFT_DETECTED = "drift_detected"
    # A workspace's auto-destroy: due in 24 h or 1 h (no run yet), and a destroy run
    # that failed (it is tried again later) (docs/auto-destroy.md).
    AUTO_DESTROY_SCHEDULED = "auto_destroy_scheduled"
    AUTO_DESTROY_FAILED = "auto_destroy_failed"
    # Every other ending (plan completed, canceled, rejected): published for hooks
    # that follow every terminal status; not a notification filter.
    ENDED = "ended"


# What a notification destination may subscribe to.
NOTIFIABLE: frozenset[EventType] = frozenset(EventType) - {EventType.ENDED}
# The events of a move into a terminal status: exactly one per run.
ENDINGS: frozenset[EventType] = frozenset(
    {
        EventType.APPLIED,
        EventType.ERRORED,
        EventType.EXPIRED,
        EventType.NEEDS_RECOVERY,
        EventType.ENDED,
    }
)

_ERRORED = frozenset({S.PLAN_FAILED, S.PLAN_CREDENTIALS_REQUIRED, S.POLICY_FAILED, S.APPLY_FAILED})
_RECOVERY = frozenset({S.APPLY_START_UNCERTAIN, S.APPLY_INTERRUPTED, S.NEEDS_RECOVERY})


def event_for_move(source: RunStatus, target: RunStatus) -> EventType | None:
    """The event a committed move publishes, or None for a move inside the active path.

    Only ``applying -> succeeded`` is *applied*: a plan_and_apply run whose plan had no
    changes ends ``policy_passed -> succeeded`` without an apply, so it is an ordinary
    ending and triggers no dependent run.
    """
    if target is S.AWAITING_APPROVAL:
        return EventType.NEEDS_ATTENTION
    if target is S.SUCCEEDED:
        return EventType.APPLIED if source is S.APPLYING else EventType.ENDED
    if target in _ERRORED:
        return EventType.ERRORED
    if target is S.EXPIRED:
        return EventType.EXPIRED
    if target in _RECOVERY:
        return EventType.NEEDS_RECOVERY
    if target.is_terminal:
        return EventType.ENDED
    return None


@dataclass(frozen=True)
class Subscribers:
    """What a run's workspace had when the run moved: notification destinations, and
    workspaces its applies trigger. Consumers look for neither when it had none."""

    notifications: bool
    dependents: bool

    @classmethod
    def of(cls, workspace: Workspace | None) -> Subscribers | None:
        """The workspace's, if it counts them (None: look, as for an older workspace)."""
        if workspace is None:
            return None
        destinations, dependents = workspace.destination_count, workspace.dependent_count
        if destinations is None or dependents is None:
            return None
        return cls(destinations > 0, dependents > 0)


@dataclass(frozen=True)
class RunEvent:
    """One event of one run. ``id`` is deterministic (run and version), so publishing
    the same move twice yields the same event and every consumer dedupes on it.

    A workspace's own event (``auto_destroy_scheduled``) has no run: its ``run_id``,
    ``run_kind`` and ``status`` are None."""

    id: str
    type: EventType
    run_id: str | None
    organization_id: str
    workspace_id: str
    run_kind: RunKind | None
    status: RunStatus | None
    at: datetime
    reason: str | None = None
    details: Mapping[str, str] = field(default_factory=dict)
    # Whether a repository's source (a push, a pull request) created the run: what the
    # commit status and pull request hooks need to know before they read the run. None
    # when unknown (an event queued before the field existed): read the run.
    created_by_source: bool | None = None
    # The run's workspace's subscribers as the move read them; None when unknown.
    subscribers: Subscribers | None = None

    @property
    def of_run(self) -> str:
        """The run of a run's event (any event but a workspace's own)."""
        if self.run_id is None:
            raise ValueError(f"event {self.id} ({self.type.value}) has no run")
        return self.run_id

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type.value,
            "run_id": self.run_id,
            "organization_id": self.organization_id,
            "workspace_id": self.workspace_id,
            "run_kind": None if self.run_kind is None else self.run_kind.value,
            "status": None if self.status is None else self.status.value,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "details": dict(self.details),
            "created_by_source": self.created_by_source,
            "subscribers": None
            if self.subscribers is None
            else {
                "notifications": self.subscribers.notifications,
                "dependents": self.subscribers.dependents,
            },
        }

    @classmethod
    def from_message(cls, body: Mapping[str, Any]) -> RunEvent:
        return cls(
            id=str(body["id"]),
            type=EventType(body["type"]),
            run_id=None if body.get("run_id") is None else str(body["run_id"]),
            organization_id=str(body["organization_id"]),
            workspace_id=str(body["workspace_id"]),
            run_kind=None if body.get("run_kind") is None else RunKind(body["run_kind"]),
            status=None if body.get("status") is None else RunStatus(body["status"]),
            at=datetime.fromisoformat(str(body["at"])),
            reason=body.get("reason"),
            details={str(k): str(v) for k, v in (body.get("details") or {}).items()},
            created_by_source=_optional_flag(body.get("created_by_source")),
            subscribers=_subscribers(body.get("subscribers")),
        )


def _subscribers(value: Any) -> Subscribers | None:
    if not isinstance(value, Mapping):
        return None
    notifications, dependents = value.get("notifications"), value.get("dependents")
    if isinstance(notifications, bool) and isinstance(dependents, bool):
        return Subscribers(notifications, dependents)
    return None


def _optional_flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def created_by_source(run: Run) -> bool:
    """Whether a repository's source created ``run`` (its creator ``source:<ingestion>``)."""
    return (run.created_by or "").startswith(f"{PrincipalKind.SOURCE.value}:")


def move_event_id(run_id: str, version: int) -> str:
    """A move's event is named by the run version it produced (one move per version)."""
    return f"{run_id}.{version:010d}"


def drift_event_id(run_id: str) -> str:
    """A run records at most one drift finding, so its run ID names the event."""
    return f"{run_id}.drift"


def move_event(
    run: Run,
    target: RunStatus,
    version: int,
    at: datetime,
    *,
    reason: str | None = None,
    approval_expires_at: datetime | None = None,
    workspace: Workspace | None = None,
) -> RunEvent | None:
    """The event of ``run``'s move (its snapshot before it) to ``target``, producing
    ``version`` at ``at``; None for a move inside the active path. ``workspace``: the
    run's workspace as the move read it (its subscribers go with the event)."""
    kind = event_for_move(run.status, target)
    if kind is None:
        return None
    details = {"from_status": run.status.value}
    if approval_expires_at is not None:
        details["approval_expires_at"] = approval_expires_at.isoformat()
    return RunEvent(
        id=move_event_id(run.id, version),
        type=kind,
        run_id=run.id,
        organization_id=run.organization_id,
        workspace_id=run.workspace_id,
        run_kind=run.kind,
        status=target,
        at=at,
        reason=reason,
        details=details,
        created_by_source=created_by_source(run),
        subscribers=Subscribers.of(
            workspace if workspace is not None and workspace.id == run.workspace_id else None
        ),
    )
