"""Why a workspace listing marks a workspace for attention."""

from __future__ import annotations

import pytest

from runplane.domain.run import RunStatus
from runplane.domain.workspace_overview import Attention, attention_of


@pytest.mark.parametrize(
    ("latest", "held", "drifted", "expected"),
    [
        (None, False, False, ()),
        (RunStatus.SUCCEEDED, False, False, ()),
        (RunStatus.PLANNING, False, False, ()),
        (RunStatus.AWAITING_APPROVAL, False, False, (Attention.AWAITING_APPROVAL,)),
        (RunStatus.NEEDS_RECOVERY, True, False, (Attention.NEEDS_RECOVERY,)),
        (RunStatus.APPLY_INTERRUPTED, False, False, (Attention.NEEDS_RECOVERY,)),
        (RunStatus.PLAN_FAILED, False, False, (Attention.FAILED,)),
        (RunStatus.APPLY_FAILED, True, False, (Attention.NEEDS_RECOVERY, Attention.FAILED)),
        (RunStatus.SUCCEEDED, False, True, (Attention.DRIFTED,)),
        (RunStatus.REJECTED, False, False, ()),
    ],
)
def test_a_workspace_needs_attention_for_each_named_reason(
    latest: RunStatus | None, held: bool, drifted: bool, expected: tuple[Attention, ...]
) -> None:
    # Given its latest run, whether a run holds it for recovery and its drift
    # When its attention is worked out, then it names each reason, most pressing first
    assert attention_of(latest, held_for_recovery=held, drifted=drifted) == expected
    # And each reason reads as words
    assert all(reason.label for reason in expected)
