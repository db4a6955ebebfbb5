"""Authentication over the in-memory access stores: API tokens, and a runner session's
calls with what each reads ahead (its run, its workspace, the version its run pinned
and, once read, that version's artifact). That the read-ahead is one DynamoDB request
and is served to the call is on moto: tests/integration/test_prefetched_reads.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from runplane.domain.capabilities import (
    Binding,
    CapabilityKind,
    CapabilityRecord,
    Phase,
    handle_hash,
)
from runplane.domain.entities import Run
from runplane.domain.errors import CapabilityConsumed, SessionRefused
from runplane.domain.identity import Permission, PrincipalKind, Unauthenticated
from runplane.domain.parts import AttemptBody, AttemptState, RunPart
from runplane.domain.read_ahead import Read
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.state import FINALIZED, StateVersion
from runplane.services.capabilities import RunnerSessions, SessionGrant
from runplane.services.identity import Identity
from tests.fakes import FakeClock, InMemoryRuns, SeededIds
from tests.fakes_access import InMemoryApiTokens, InMemoryRunnerSessions

BINDING = Binding("run-1", "att-1", Phase.APPLY, "sbx-1")
PART = "attempt#apply"


class Tier:
    def __init__(self) -> None:
        self.clock, self.ids = FakeClock(), SeededIds()
        self.tokens, self.store = InMemoryApiTokens(), InMemoryRunnerSessions()
        self.runs = InMemoryRuns()
        self.sessions = RunnerSessions(self.clock, self.ids, self.store)
        self.identity = Identity(
            self.clock, self.ids, self.tokens, lambda: self.sessions, lambda: self.runs
        )

    def open_attempt(self, state: AttemptState = AttemptState.STARTED) -> None:
        now = self.clock.now()
        body = AttemptBody(BINDING.attempt_id, BINDING.sandbox_id, "apply", now.isoformat())
        held = self.store.parts.get(("run-1", PART))
        # The attempt keeps the sessions noted on it.
        noted = frozenset() if held is None else held.session_keys
        self.store.put_part(RunPart("run-1", PART, state, body.to_body(), None, now, now, noted))

    def bootstrap(self) -> str:
        handle = "rpc_bootstrap"
        self.store.mint(
            handle_hash(handle),
            CapabilityRecord(
                "jti-1",
                CapabilityKind.BOOTSTRAP,
                "org-acme",
                BINDING,
                (),
                self.clock.now() + timedelta(minutes=15),
            ),
        )
        return handle


@pytest.fixture
def tier() -> Tier:
    return Tier()


def _run(pinned: str | None = "sv-1") -> Run:
    return Run(
        id="run-1",
        organization_id="org-acme",
        workspace_id="ws-1",
        kind=RunKind.PLAN_AND_APPLY,
        status=RunStatus.APPLYING,
        version=3,
        created_at=FakeClock().now(),
        updated_at=FakeClock().now(),
        created_by="user:ada",
        predecessor_sv_id=pinned,
    )


def _version() -> StateVersion:
    at = FakeClock().now()
    return StateVersion(
        "sv-1", "ws-1", "org-acme", 1, "lin", "md5", FINALIZED, at, "run-0", artifact_id="art-9"
    )


def test_a_token_authenticates_until_it_is_revoked(tier: Tier) -> None:
    # Given a token issued for automation
    issued = tier.identity.issue_token(
        "org-acme", "ci", [Permission.RUN_READ], created_by="user:ada"
    )

    # When it authenticates
    principal, ahead = tier.identity.authenticate_request(f"Bearer {issued.token}")

    # Then it is the token's principal, with nothing read ahead
    assert (principal.kind, principal.id) == (PrincipalKind.API_TOKEN, issued.record.id)
    assert not ahead
    # And once revoked it authenticates no more
    admin = replace(principal, permissions=frozenset({Permission.TOKEN_MANAGE}))
    tier.identity.revoke_token(admin, issued.record.id)
    with pytest.raises(Unauthenticated):
        tier.identity.authenticate(f"Bearer {issued.token}")


def test_a_bootstrap_handle_opens_one_session_and_a_replay_recovers_it(tier: Tier) -> None:
    # Given a bootstrap handle for an open attempt
    tier.open_attempt()
    handle = tier.bootstrap()

    # When it is redeemed, then replayed
    first = tier.sessions.start(handle, BINDING)
    replay = tier.sessions.start(handle, BINDING)

    # Then the replay is the same session, noted on its attempt once
    assert replay == first
    assert tier.store.parts[("run-1", PART)].session_keys == {handle_hash(first.token)}


def test_a_session_is_not_opened_for_a_closed_attempt(tier: Tier) -> None:
    # Given a bootstrap handle whose attempt has closed
    tier.open_attempt(AttemptState.FAILED)
    handle = tier.bootstrap()

    # When it is redeemed
    with pytest.raises(SessionRefused):
        tier.sessions.start(handle, BINDING)

    # Then nothing was written
    assert tier.store.sessions == {}
    assert tier.store.redemptions == {}


def test_a_session_s_later_calls_read_ahead_its_pin_and_then_its_state_s_artifact(
    tier: Tier,
) -> None:
    # Given a session whose run pinned a finalized state version
    tier.open_attempt()
    grant: SessionGrant = tier.sessions.start(tier.bootstrap(), BINDING)
    tier.runs.runs["run-1"] = _run()
    tier.store.runs["run-1"] = _run()
    tier.store.versions["sv-1"] = _version()
    bearer = f"Bearer {grant.token}"

    # When it calls four times
    reads = [tier.identity.authenticate_request(bearer)[1].reads() for _ in range(4)]

    # Then each call reads its run, attempt and apply record ahead; the run the first
    # read names the workspace and the pinned version the next calls read ahead, and
    # that version, once read, the artifact holding its state
    common = {Read.run("run-1"), Read.run_part("run-1", PART), Read.run_part("run-1", "apply")}
    workspace, version = Read.workspace("ws-1"), Read.state_version("sv-1")
    assert reads[0] == common
    assert reads[1] == common | {workspace, version}
    assert reads[2] == common | {workspace, version, Read.artifact("art-9")}
    assert reads[3] == reads[2]


def test_a_session_of_a_closed_attempt_or_revoked_is_refused(tier: Tier) -> None:
    # Given a session on its open attempt, which has made a call
    tier.open_attempt()
    grant = tier.sessions.start(tier.bootstrap(), BINDING)
    tier.runs.runs["run-1"] = _run()
    bearer = f"Bearer {grant.token}"
    tier.identity.authenticate(bearer)

    # When its attempt closes
    tier.open_attempt(AttemptState.SUCCEEDED)
    # Then its calls are refused
    with pytest.raises(Unauthenticated):
        tier.identity.authenticate(bearer)
    # And a revoked one is refused even on an open attempt
    tier.open_attempt()
    assert tier.sessions.revoke_attempt(BINDING.attempt_id) == 1
    with pytest.raises(Unauthenticated):
        tier.identity.authenticate(bearer)


def test_a_handle_whose_session_was_claimed_otherwise_is_consumed(tier: Tier) -> None:
    # Given a bootstrap handle whose JTI a session claimed already
    tier.open_attempt()
    handle = tier.bootstrap()
    tier.store.claimed_jtis.add("jti-1")

    # When it is redeemed
    with pytest.raises(CapabilityConsumed):
        tier.sessions.start(handle, BINDING)

    # Then nothing was written
    assert tier.store.redemptions == {}
