"""Authentication over the in-memory access stores: API tokens, and a runner session's
calls with what each reads ahead (its run, its workspace, the version its run pinned
and, once read, that version's artifact). That the read-ahead is one DynamoDB request
and is served to the call is on moto: tests/integration/test_prefetched_reads.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from runplane.domain.capabilities import (
    Binding,
    CapabilityKind,
    CapabilityRecord,
    Phase,
    RunnerSession,
    handle_hash,
)
from runplane.domain.entities import Run
from runplane.domain.errors import CapabilityConsumed, SessionRefused
from runplane.domain.identity import Permission, PrincipalKind, Unauthenticated
from runplane.domain.parts import AttemptBody, AttemptState, RunPart
from runplane.domain.read_ahead import Read
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.session_tokens import SessionHints
from runplane.domain.state import FINALIZED, StateVersion
from runplane.services.capabilities import RunnerSessions, SessionGrant, session_secret
from runplane.services.identity import Identity
from tests.fakes import FakeClock, InMemoryRuns, SeededIds
from tests.fakes_access import InMemoryApiTokens, InMemoryRunnerSessions, Redemption

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


# -- what a session's token names -----------------------------------------------------------

NAMED = SessionHints(
    "run-1",
    "att-1",
    Phase.APPLY,
    workspace_id="ws-1",
    pinned_sv_id="sv-1",
    state_artifact_id="art-9",
)


def _pinned_state(tier: Tier) -> None:
    tier.runs.runs["run-1"] = _run()
    tier.store.runs["run-1"] = _run()
    tier.store.versions["sv-1"] = _version()


def _elsewhere(tier: Tier) -> Identity:
    """Another process's authentication over the same store: it never saw a session."""
    sessions = RunnerSessions(tier.clock, tier.ids, tier.store)
    return Identity(tier.clock, tier.ids, tier.tokens, lambda: sessions, lambda: tier.runs)


def test_a_session_s_first_call_anywhere_reads_what_its_token_names(tier: Tier) -> None:
    # Given a session whose token names its run's workspace, pinned version and its artifact
    tier.open_attempt()
    grant = tier.sessions.start(tier.bootstrap(), BINDING, hints=NAMED)
    _pinned_state(tier)

    # When its first call is authenticated in a process that never saw it
    principal, ahead = _elsewhere(tier).authenticate_request(f"Bearer {grant.token}")

    # Then that one read brought its run, attempt and apply record, and its workspace,
    # pinned version and that version's artifact
    assert (principal.run_id, principal.workspace_id) == ("run-1", "ws-1")
    assert ahead.reads() == {
        Read.run("run-1"),
        Read.run_part("run-1", PART),
        Read.run_part("run-1", "apply"),
        Read.workspace("ws-1"),
        Read.state_version("sv-1"),
        Read.artifact("art-9"),
    }


@pytest.mark.parametrize(
    "altered",
    [
        lambda token: token.replace(".ws-1.", ".ws-2."),
        lambda token: token.replace(".art-9.", ".art-8."),
        lambda token: token.replace(".apply.", ".plan."),
        lambda token: token.replace("rps_2.run-1.", "rps_2.run-2."),
    ],
)
def test_a_token_whose_names_were_altered_is_an_unknown_session(
    tier: Tier, altered: Callable[[str], str]
) -> None:
    # Given a session's token, its names altered (another workspace, artifact, phase or run)
    tier.open_attempt()
    grant = tier.sessions.start(tier.bootstrap(), BINDING, hints=NAMED)
    _pinned_state(tier)
    forged = altered(grant.token)
    assert forged != grant.token

    # When it authenticates, here or in a process that never saw the session
    # Then it is refused: no session is stored under it
    for identity in (tier.identity, _elsewhere(tier)):
        with pytest.raises(Unauthenticated):
            identity.authenticate_request(f"Bearer {forged}")
    # And the true token still authenticates
    assert tier.identity.authenticate(f"Bearer {grant.token}").run_id == "run-1"


def test_a_token_of_the_first_form_still_authenticates_reading_as_before(tier: Tier) -> None:
    # Given a session issued before tokens named their reads (stored under its secret)
    tier.open_attempt()
    plain = session_secret("rpc_old", "jti-0")
    tier.store.sessions[handle_hash(plain)] = RunnerSession(
        "ses-0", "org-acme", "jti-0", BINDING, (), tier.clock.now() + timedelta(hours=1)
    )
    _pinned_state(tier)
    bearer = f"Bearer {plain}"

    # When it calls three times in a process that never saw it
    identity = _elsewhere(tier)
    first, second, third = (identity.authenticate_request(bearer) for _ in range(3))

    # Then all are its session's calls, read as before: the first on its own, nothing
    # ahead; the next with its run, attempt and workspace; then its pinned version too
    assert first[0].run_id == second[0].run_id == third[0].run_id == "run-1"
    assert not first[1]
    assert Read.workspace("ws-1") in second[1].reads()
    assert Read.state_version("sv-1") not in second[1].reads()
    assert Read.state_version("sv-1") in third[1].reads()


def test_a_replay_recovers_a_session_whose_token_was_of_the_first_form(tier: Tier) -> None:
    # Given a bootstrap handle redeemed, before tokens named their reads, for a session
    # of the first form
    tier.open_attempt()
    handle = tier.bootstrap()
    tier.store.redemptions[handle_hash(handle)] = Redemption("jti-1")
    plain = session_secret(handle, "jti-1")
    session = RunnerSession(
        "ses-0", "org-acme", "jti-1", BINDING, (), tier.clock.now() + timedelta(hours=1)
    )
    tier.store.sessions[handle_hash(plain)] = session

    # When its sandbox replays the start
    replay = tier.sessions.start(handle, BINDING, hints=NAMED)

    # Then it gets that session and its token back
    assert (replay.session, replay.token) == (session, plain)
