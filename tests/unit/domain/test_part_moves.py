"""The run-part move tables: every allowed move passes, refused moves raise and say which."""

from __future__ import annotations

import pytest

from runplane.domain.errors import IllegalPartMove
from runplane.domain.parts import (
    MOVES,
    OPEN_APPLY_RECORD,
    OPEN_ATTEMPT,
    ApplyRecordState,
    ApprovalState,
    AttemptState,
    PartKind,
    PlanEvidenceState,
    check_move,
)

A, P, R = AttemptState, ApprovalState, ApplyRecordState

ALLOWED: dict[PartKind, set[tuple[str, str]]] = {
    PartKind.ATTEMPT: {
        (A.LAUNCHING, A.STARTED),
        *((s, t) for s in OPEN_ATTEMPT for t in (A.SUCCEEDED, A.FAILED, A.LOST, A.STOPPED)),
        *((s, A.RECOVERED) for s in OPEN_ATTEMPT),
        (A.LAUNCHING, A.ABANDONED),
    },
    PartKind.PLAN_EVIDENCE: set(),
    PartKind.APPROVAL: {(P.WAITING, P.WAITING_SECOND)}
    | {
        (s, t)
        for s in (P.WAITING, P.WAITING_SECOND)
        for t in (P.APPROVED, P.REJECTED, P.EXPIRED, P.CANCELED)
    },
    PartKind.APPLY_RECORD: {
        (R.PENDING, R.STARTING),
        (R.STARTING, R.STARTED),
        (R.STARTED, R.SUCCEEDED),
        *((s, t) for s in OPEN_APPLY_RECORD for t in (R.FAILED, R.UNCERTAIN, R.CLOSED)),
    },
}

REFUSED = [
    (PartKind.ATTEMPT, A.SUCCEEDED, A.FAILED),
    (PartKind.ATTEMPT, A.LOST, A.SUCCEEDED),
    (PartKind.ATTEMPT, A.STARTED, A.ABANDONED),
    (PartKind.ATTEMPT, A.STARTED, A.LAUNCHING),
    (PartKind.PLAN_EVIDENCE, PlanEvidenceState.COMMITTED, PlanEvidenceState.COMMITTED),
    (PartKind.APPROVAL, P.APPROVED, P.REJECTED),
    (PartKind.APPROVAL, P.EXPIRED, P.APPROVED),
    (PartKind.APPROVAL, P.REJECTED, P.WAITING),
    (PartKind.APPLY_RECORD, R.PENDING, R.STARTED),
    (PartKind.APPLY_RECORD, R.PENDING, R.SUCCEEDED),
    (PartKind.APPLY_RECORD, R.STARTING, R.SUCCEEDED),
    (PartKind.APPLY_RECORD, R.CLOSED, R.STARTING),
    (PartKind.APPLY_RECORD, R.SUCCEEDED, R.UNCERTAIN),
]


@pytest.mark.parametrize("kind", list(PartKind))
def test_each_table_holds_exactly_the_documented_moves(kind: PartKind) -> None:
    # Given the part's move table, when its rows are read, then they are exactly these moves.
    assert {(m.source, m.target) for m in MOVES[kind]} == ALLOWED[kind]


@pytest.mark.parametrize(
    ("kind", "source", "target"),
    [(kind, s, t) for kind, moves in ALLOWED.items() for s, t in sorted(moves)],
)
def test_every_allowed_move_passes(kind: PartKind, source: str, target: str) -> None:
    # Given an allowed move, when it is checked, then nothing is raised.
    check_move(kind, source, target)


@pytest.mark.parametrize(("kind", "source", "target"), REFUSED)
def test_a_move_outside_the_table_is_refused(kind: PartKind, source: str, target: str) -> None:
    # Given a move the table does not hold, when it is checked, then it is refused by name.
    with pytest.raises(IllegalPartMove) as refused:
        check_move(kind, source, target)
    assert refused.value.code == "ILLEGAL_PART_MOVE"
    assert refused.value.http_status == 409
    assert (refused.value.part, refused.value.source, refused.value.target) == (
        kind.value,
        source,
        target,
    )


def test_closed_states_never_move_again() -> None:
    # Given every table, when the closed states are looked up as sources, then none has a row.
    closed_attempts = set(AttemptState) - OPEN_ATTEMPT
    closed_records = set(ApplyRecordState) - OPEN_APPLY_RECORD
    assert not any(m.source in closed_attempts for m in MOVES[PartKind.ATTEMPT])
    assert not any(m.source in closed_records for m in MOVES[PartKind.APPLY_RECORD])
    assert {m.source for m in MOVES[PartKind.APPROVAL]} == {
        ApprovalState.WAITING,
        ApprovalState.WAITING_SECOND,
    }
