"""The one rule for "did this apply attempt publish that state version"."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runplane.domain.publications import ApplyIdentity, Publication, published_by

APPLY = ApplyIdentity("run-1", "att-1", "sbx-1", "lck-1", 7, predecessor_id="sv-0")
OURS = Publication(
    id="sv-1",
    predecessor_id="sv-0",
    finalized=True,
    run_id="run-1",
    attempt_id="att-1",
    sandbox_id="sbx-1",
    lock_id="lck-1",
    fence=7,
    serial=2,
    lineage="l",
)


def test_a_finalized_version_with_the_attempt_s_exact_stamp_is_its_own() -> None:
    # Given a finalized version carrying the attempt's run, attempt, sandbox, lock and fence
    # Then the attempt published it
    assert published_by(OURS, APPLY) is True


@pytest.mark.parametrize(
    "other",
    [
        {"finalized": False},
        {"run_id": "run-2"},
        {"attempt_id": "att-2"},
        {"sandbox_id": "sbx-2"},
        {"lock_id": "lck-2"},
        {"fence": 8},
        {"fence": None},
        {"run_id": None, "attempt_id": None, "sandbox_id": None, "fence": None},
    ],
    ids=[
        "pending",
        "other-run",
        "other-attempt",
        "other-sandbox",
        "other-lock",
        "other-fence",
        "no-fence",
        "a-person-s",
    ],
)
def test_any_other_stamp_or_a_pending_version_is_not_the_attempt_s(
    other: dict[str, object],
) -> None:
    # Given a version that differs from the attempt's own in one respect
    version = replace(OURS, **other)  # type: ignore[arg-type]

    # Then the attempt did not publish it
    assert published_by(version, APPLY) is False
