"""What a person's decision does to a run's approval, under the two-person rule
(domain/second_approval.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane.domain.errors import SameApprover
from runplane.domain.parts import ApprovalBody, ApprovalState


def approval_after(
    run_id: str,
    state: str,
    body: Mapping[str, Any],
    decision: str,
    by: str,
    now: datetime,
    comment: str | None,
) -> tuple[ApprovalState, dict[str, Any]]:
    """The approval's state and body once ``by`` decides ``decision`` on it: the first
    approval of a run that needs two keeps it waiting (for another person); any other
    approval, or a rejection, decides it. The first approver approving again is
    refused (``SameApprover``)."""
    said = {"by": by, "at": now.isoformat(), "comment": (comment or "")[:1000]}
    waiting = ApprovalBody.from_body(body)
    first = waiting.first_approval
    if decision == "approve" and first is not None and first.get("by") == by:
        raise SameApprover(
            f"run {run_id} needs a second approver: {by} approved it already; another "
            "person must approve (anyone may reject)"
        )
    if decision == "approve" and first is None and waiting.approvals_required > 1:
        return ApprovalState.WAITING_SECOND, {**body, "first_approval": said}
    decided = ApprovalState.APPROVED if decision == "approve" else ApprovalState.REJECTED
    return decided, {
        **body,
        "decision": decision,
        "decided_by": by,
        "decided_at": said["at"],
        "comment": said["comment"],
    }
