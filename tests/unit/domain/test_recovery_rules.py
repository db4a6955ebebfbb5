"""The recovery rules that need no database: the publication chain, the emergency
successor, the lease clock, the step-up window and the request's own checks."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.errors import InvalidInput, StateRejected
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.publications import ApplyIdentity, Publication
from runplane.domain.recovery import (
    MAX_CHAIN,
    RecoveryRefused,
    RecoveryRequest,
    Resolution,
    Snapshot,
    StepUpRequired,
    check_emergency_successor,
    check_request,
    lease_remaining_seconds,
    read_snapshot,
    require_recovery_rights,
    verify_chain,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
APPLY = ApplyIdentity("run-1", "att-1", "sbx-1", "lck-1", 7, predecessor_id="sv-0")


def chain(length: int, **tamper: object) -> dict[str, Publication]:
    """sv-1 ... sv-<length>, each published by APPLY on top of the previous one."""
    versions = {}
    for n in range(1, length + 1):
        versions[f"sv-{n}"] = Publication(
            id=f"sv-{n}",
            predecessor_id=f"sv-{n - 1}",
            finalized=True,
            run_id="run-1",
            attempt_id="att-1",
            sandbox_id="sbx-1",
            lock_id="lck-1",
            fence=7,
            serial=n,
            lineage="l",
        )
    if tamper:
        middle = f"sv-{max(1, length // 2)}"
        versions[middle] = replace(versions[middle], **tamper)  # type: ignore[arg-type]
    return versions


def test_an_unmoved_pointer_is_a_chain_of_zero() -> None:
    assert verify_chain("sv-0", APPLY, chain(0).__getitem__) == 0


def test_the_longest_allowed_chain_is_accepted_and_one_more_is_refused() -> None:
    longest = chain(MAX_CHAIN)
    assert verify_chain(f"sv-{MAX_CHAIN}", APPLY, longest.__getitem__) == MAX_CHAIN

    too_long = chain(MAX_CHAIN + 1)
    with pytest.raises(RecoveryRefused, match="more than 1024"):
        verify_chain(f"sv-{MAX_CHAIN + 1}", APPLY, too_long.__getitem__)


@pytest.mark.parametrize(
    "tamper",
    [
        {"run_id": "run-2"},
        {"attempt_id": "att-2"},
        {"sandbox_id": "sbx-2"},
        {"lock_id": "lck-2"},
        {"fence": 8},
        {"finalized": False},
    ],
    ids=lambda t: next(iter(t)),
)
def test_one_version_with_any_other_provenance_refuses_the_whole_chain(
    tamper: dict[str, object],
) -> None:
    versions = chain(6, **tamper)
    with pytest.raises(RecoveryRefused, match="sv-3"):
        verify_chain("sv-6", APPLY, versions.__getitem__)


def test_a_chain_that_does_not_reach_the_pinned_state_is_refused() -> None:
    versions = chain(3)
    versions["sv-1"] = replace(versions["sv-1"], predecessor_id=None)
    with pytest.raises(RecoveryRefused, match="does not descend"):
        verify_chain("sv-3", APPLY, versions.__getitem__)


def state(serial: int, lineage: str = "l") -> bytes:
    return json.dumps({"version": 4, "serial": serial, "lineage": lineage}).encode()


def test_the_emergency_snapshot_must_be_the_next_serial_of_the_same_lineage() -> None:
    pinned = chain(1)["sv-1"]
    check_emergency_successor(read_snapshot(state(2)), pinned)
    for wrong in (Snapshot(3, "l"), Snapshot(1, "l"), Snapshot(2, "other")):
        with pytest.raises(StateRejected):
            check_emergency_successor(wrong, pinned)
    # A workspace without state accepts any first snapshot
    check_emergency_successor(Snapshot(5, "x"), None)


@pytest.mark.parametrize("raw", [b"", b"[]", b'{"serial": "1", "lineage": "l"}', b"{"])
def test_what_is_not_a_state_is_no_snapshot(raw: bytes) -> None:
    with pytest.raises(StateRejected):
        read_snapshot(raw)


def test_the_lease_clock_is_clamped_to_0_through_900() -> None:
    assert lease_remaining_seconds(NOW + timedelta(hours=1), NOW) == 900
    assert lease_remaining_seconds(NOW + timedelta(seconds=42), NOW) == 42
    assert lease_remaining_seconds(NOW - timedelta(seconds=1), NOW) == 0


def person(signed_in: timedelta | None, permissions: frozenset[Permission]) -> Principal:
    return Principal(
        PrincipalKind.USER,
        "ada",
        "org-1",
        permissions,
        "User ada",
        auth_time=None if signed_in is None else NOW - signed_in,
    )


def test_step_up_is_a_sign_in_within_15_minutes_and_both_permissions() -> None:
    both = frozenset({Permission.RUN_RECOVER, Permission.STATE_RECOVER})
    require_recovery_rights(person(timedelta(minutes=15), both), "ws-1", NOW)
    for late in (timedelta(minutes=15, seconds=1), None):
        with pytest.raises(StepUpRequired):
            require_recovery_rights(person(late, both), "ws-1", NOW)
    for missing in both:
        with pytest.raises(Forbidden):
            require_recovery_rights(person(timedelta(0), both - {missing}), "ws-1", NOW)


def test_a_request_checks_itself_before_anything_is_read() -> None:
    good = RecoveryRequest(Resolution.CURRENT_STATE_VERIFIED, "why", True, "sv-1")
    check_request(good)
    raw = state(2)
    emergency = replace(good, resolution=Resolution.IMPORT_EMERGENCY_STATE, emergency_state=raw)
    bad = [
        replace(good, reason=""),
        replace(good, reason="x" * 1001),
        replace(good, confirm_authority_revocation=False),
        replace(good, emergency_state=raw),
        replace(emergency, emergency_state=None),
        replace(emergency, emergency_state_sha256="0" * 64),
    ]
    for request in bad:
        with pytest.raises(InvalidInput):
            check_request(request)
    # The fingerprint is the resolution and evidence, not the reason
    assert good.fingerprint() == replace(good, reason="other words").fingerprint()
    assert good.fingerprint() != replace(good, current_state_version_id="sv-2").fingerprint()
