"""The attention inbox: across the caller's workspaces, the runs awaiting approval, the
runs needing recovery, the recent failures and the drifted workspaces
(``domain.attention`` holds the rules; docs/dashboard.md, "Attention").

What it costs the table: the caller's workspaces (one query), the organization's
attention index (one query) and the drift records (one batch read per 100 workspaces);
the full view adds the plan counts of the runs awaiting approval (one batch read per
100 of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from runplane.domain import attention as rules
from runplane.domain.clock import Clock
from runplane.domain.identity import Permission, Principal

if TYPE_CHECKING:
    from runplane.services.workspaces import Workspaces


class AttentionIndex(Protocol):
    """The store's attention index (``store.attention``)."""

    def notices(self, org_id: str) -> list[rules.Notice]:
        """The organization's notices, in any order."""
        ...

    def drifted(self, workspace_ids: Sequence[str]) -> set[str]:
        """Those of ``workspace_ids`` whose last drift check found drift."""
        ...

    def plan_summaries(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The plan counts of those of ``run_ids`` that committed a plan."""
        ...


class Attention:
    def __init__(self, clock: Clock, workspaces: Workspaces, index: AttentionIndex) -> None:
        self._clock = clock
        self._workspaces = workspaces
        self._index = index

    def inbox(self, principal: Principal) -> rules.Inbox:
        """What waits for a person in the workspaces the caller may see (runs need
        ``run:read`` too; the workspaces ``workspace:read``)."""
        principal.require_somewhere(Permission.RUN_READ)
        visible = [
            w
            for w in self._workspaces.list_own(principal)
            if principal.may(Permission.RUN_READ, w.id)
        ]
        return rules.inbox(
            self._index.notices(principal.organization_id),
            visible,
            self._index.drifted([w.id for w in visible]),
            self._clock.now(),
        )

    def count(self, principal: Principal) -> int:
        """How many items the inbox lists (the dashboard header's number)."""
        return self.inbox(principal).count

    def view(self, principal: Principal) -> dict[str, Any]:
        """The inbox as the API answers it (and the dashboard shows it)."""
        box = self.inbox(principal)
        now = self._clock.now()
        summaries = self._index.plan_summaries(
            [e.notice.run_id for e in box.approvals if e.notice is not None]
        )

        def entry(e: rules.Entry) -> dict[str, Any]:
            shown: dict[str, Any] = {
                "category": e.category.value,
                "workspace_id": e.workspace.id,
                "workspace_name": e.workspace.name,
            }
            notice = e.notice
            if notice is None:
                return shown
            shown.update(
                run_id=notice.run_id,
                kind=notice.kind.value,
                status=notice.status.value,
                created_by=notice.created_by,
                created_at=notice.created_at.isoformat(),
                since=notice.since.isoformat(),
            )
            if e.category is rules.Category.APPROVAL:
                shown["deadline"] = notice.deadline.isoformat() if notice.deadline else None
                shown["time_left"] = (
                    rules.time_left(notice.deadline, now) if notice.deadline else None
                )
                shown["expiring_soon"] = bool(
                    notice.deadline and rules.expiring_soon(notice.deadline, now)
                )
                shown["plan_summary"] = summaries.get(notice.run_id)
            return shown

        return {
            "count": box.count,
            "as_of": now.isoformat(),
            "awaiting_approval": [entry(e) for e in box.approvals],
            "needs_recovery": [entry(e) for e in box.recoveries],
            "failed": [entry(e) for e in box.failures],
            "drift": [entry(e) for e in box.drifted],
        }
