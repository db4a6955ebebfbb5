"""The contract of API tokens, capabilities and runner sessions: the same cases against
the DynamoDB store (on moto) and the in-memory fakes the service tier uses, so the
fakes cannot drift. Keys are hashes of secrets; here any distinct strings stand for
them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.audit import AuditAction, AuditOutcome, AuditQuery, AuditRecord
from runplane.domain.capabilities import (
    AlreadyRedeemed,
    Binding,
    CapabilityKind,
    CapabilityRecord,
    Phase,
    RunnerSession,
)
from runplane.domain.errors import (
    CapabilityExpired,
    CapabilityWrongAttempt,
    CapabilityWrongPhase,
    CapabilityWrongSandbox,
    ConcurrentChange,
    NotFound,
    SessionRefused,
    UnknownCapability,
)
from runplane.domain.identity import ApiTokenRecord, Permission
from runplane.domain.parts import AttemptBody, AttemptState, RunPart
from runplane.domain.read_ahead import Read
from runplane.services.repositories.access import ApiTokenStore, RunnerSessionStore
from runplane.store import capabilities as capabilities_on_table
from runplane.store import run_parts
from runplane.store.capabilities import DynamoRunnerSessions
from runplane.store.identity import DynamoApiTokens
from runplane.store.security_records import trail_page
from tests.fakes_access import InMemoryApiTokens, InMemoryRunnerSessions

AT = datetime(2026, 1, 1, tzinfo=UTC)
BINDING = Binding("run-1", "att-1", Phase.PLAN, "sbx-1")
PART = "attempt#plan"


def _token(record_id: str = "tok-1", org_id: str = "org-acme") -> ApiTokenRecord:
    return ApiTokenRecord(
        id=record_id,
        organization_id=org_id,
        name="ci",
        permissions=frozenset({Permission.RUN_READ}),
        created_at=AT,
        created_by="user:ada",
        revoked=False,
    )


# -- API tokens ----------------------------------------------------------------------------


@pytest.fixture(params=["dynamodb", "memory"])
def tokens(request: pytest.FixtureRequest) -> ApiTokenStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoApiTokens()
    return InMemoryApiTokens()


def test_a_token_reads_back_its_record_and_is_written_once(tokens: ApiTokenStore) -> None:
    # Given a token
    tokens.put_token("hash-1", _token())
    # Then it reads back whole, and an unknown hash is None
    assert tokens.token("hash-1") == _token()
    assert tokens.token("hash-none") is None
    # And the same hash is not written twice
    with pytest.raises(ConcurrentChange):
        tokens.put_token("hash-1", _token("tok-2"))
    assert tokens.token("hash-1") == _token()


def test_a_token_is_revoked_only_by_its_organization(tokens: ApiTokenStore) -> None:
    # Given a token of one organization
    tokens.put_token("hash-1", _token())
    # When another organization, or an unknown ID, revokes it
    # Then it is not found and stays valid
    with pytest.raises(NotFound):
        tokens.revoke_token("org-other", "tok-1", AT)
    with pytest.raises(NotFound):
        tokens.revoke_token("org-acme", "tok-none", AT)
    assert tokens.token("hash-1") == _token()
    # And its own organization's revocation reads back revoked
    tokens.revoke_token("org-acme", "tok-1", AT)
    assert tokens.token("hash-1") == replace(_token(), revoked=True)


def test_revoking_a_revoked_token_writes_no_second_record(tokens: ApiTokenStore) -> None:
    # Given a token revoked once, with its record
    tokens.put_token("hash-1", _token())
    tokens.revoke_token("org-acme", "tok-1", AT, _revoked("evt-first"))
    # When it is revoked again, with another record
    tokens.revoke_token("org-acme", "tok-1", AT + timedelta(minutes=1), _revoked("evt-again"))
    # Then it stays revoked and only the first record was written
    assert tokens.token("hash-1") == replace(_token(), revoked=True)
    if isinstance(tokens, InMemoryApiTokens):
        written = [r.id for r in tokens.security_trail]
    else:
        written = [r.id for r in trail_page("org-acme", AuditQuery(size=100)).records]
    assert written == ["evt-first"]


def _revoked(record_id: str) -> AuditRecord:
    return AuditRecord(
        id=record_id,
        organization_id="org-acme",
        at=AT,
        action=AuditAction.TOKEN_REVOKED,
        actor="user:ada",
        actor_display="User ada",
        source_address="127.0.0.1",
        object_kind="token",
        object_id="tok-1",
        outcome=AuditOutcome.SUCCEEDED,
    )


# -- capabilities and runner sessions --------------------------------------------------------


@dataclass
class Given:
    """The store under test and how the writes of other areas that it reads are made
    on it (a capability's minting, an attempt's launch and close)."""

    sessions: RunnerSessionStore
    on_table: bool

    def capability(
        self, handle_hash: str, kind: CapabilityKind = CapabilityKind.BOOTSTRAP
    ) -> CapabilityRecord:
        record = CapabilityRecord(
            f"jti-{handle_hash}", kind, "org-acme", BINDING, ("art-1",), AT + timedelta(minutes=15)
        )
        if self.on_table:
            capabilities_on_table.mint(
                handle_hash,
                jti=record.jti,
                organization_id=record.organization_id,
                kind=kind,
                binding=BINDING,
                inputs=record.inputs,
                now=AT,
                valid_until=record.valid_until,
            ).commit()
        else:
            assert isinstance(self.sessions, InMemoryRunnerSessions)
            self.sessions.mint(handle_hash, record)
        return record

    def attempt(self, state: AttemptState = AttemptState.STARTED) -> None:
        body = AttemptBody(BINDING.attempt_id, BINDING.sandbox_id, "plan", AT.isoformat())
        if self.on_table:
            run_parts.put(BINDING.run_id, PART, state=state, body=body.to_body(), now=AT).commit()
        else:
            assert isinstance(self.sessions, InMemoryRunnerSessions)
            self.sessions.put_part(
                RunPart(BINDING.run_id, PART, state, body.to_body(), None, AT, AT, frozenset())
            )


@pytest.fixture(params=["dynamodb", "memory"])
def given(request: pytest.FixtureRequest) -> Given:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return Given(DynamoRunnerSessions(), on_table=True)
    return Given(InMemoryRunnerSessions(), on_table=False)


def _session(jti: str = "jti-h1", session_id: str = "ses-1") -> RunnerSession:
    return RunnerSession(session_id, "org-acme", jti, BINDING, ("art-1",), AT + timedelta(hours=1))


def test_a_capability_is_redeemed_once_and_only_as_bound(given: Given) -> None:
    # Given a bootstrap capability
    record = given.capability("h1")
    store = given.sessions
    assert store.capability("h1") == record
    assert store.capability("h-none") is None

    # When it is redeemed by another kind, binding, or after it expired
    # Then each is refused with its reason
    late = AT + timedelta(hours=1)
    refusals = [
        (UnknownCapability, "h-none", CapabilityKind.BOOTSTRAP, BINDING, AT),
        (UnknownCapability, "h1", CapabilityKind.APPLY_START, BINDING, AT),
        (CapabilityExpired, "h1", CapabilityKind.BOOTSTRAP, BINDING, late),
        (
            CapabilityWrongAttempt,
            "h1",
            CapabilityKind.BOOTSTRAP,
            replace(BINDING, attempt_id="a2"),
            AT,
        ),
        (
            CapabilityWrongPhase,
            "h1",
            CapabilityKind.BOOTSTRAP,
            replace(BINDING, phase=Phase.APPLY),
            AT,
        ),
        (
            CapabilityWrongSandbox,
            "h1",
            CapabilityKind.BOOTSTRAP,
            replace(BINDING, sandbox_id="s2"),
            AT,
        ),
    ]
    for error, handle_hash, kind, binding, now in refusals:
        with pytest.raises(error):
            store.redeem(handle_hash, kind, binding, now)

    # And redeemed as bound, it is redeemed once: a second time names its JTI
    store.redeem("h1", CapabilityKind.BOOTSTRAP, BINDING, AT)
    with pytest.raises(AlreadyRedeemed) as again:
        store.redeem("h1", CapabilityKind.BOOTSTRAP, BINDING, AT)
    assert again.value.jti == record.jti


def test_a_bootstrap_handle_opens_one_session_on_its_open_attempt(given: Given) -> None:
    # Given a bootstrap capability for an open attempt
    given.capability("h1")
    given.attempt()
    store = given.sessions

    # When it opens a session
    store.open_session("h1", "secret-1", _session(), PART, AT)

    # Then the session reads back, and the handle opens no other
    assert store.session("secret-1") == _session()
    assert store.session("secret-none") is None
    with pytest.raises(AlreadyRedeemed):
        store.open_session("h1", "secret-2", _session(session_id="ses-2"), PART, AT)
    assert store.session("secret-2") is None


def test_a_session_is_not_opened_on_a_closed_attempt_and_nothing_is_written(
    given: Given,
) -> None:
    # Given a bootstrap capability whose attempt has closed
    given.capability("h1")
    given.attempt(AttemptState.FAILED)
    store = given.sessions

    # When it opens a session
    with pytest.raises(SessionRefused):
        store.open_session("h1", "secret-1", _session(), PART, AT)

    # Then there is no session and the handle is still unredeemed
    assert store.session("secret-1") is None
    store.redeem("h1", CapabilityKind.BOOTSTRAP, BINDING, AT)


def test_a_session_read_brings_its_attempt_and_what_the_call_reads_next(given: Given) -> None:
    # Given a session on its open attempt
    given.capability("h1")
    given.attempt()
    store = given.sessions
    store.open_session("h1", "secret-1", _session(), PART, AT)
    also = [Read.run("run-none"), Read.workspace("ws-none")]

    # When it is read with what its call reads next (none of which exists)
    read = store.session_read("secret-1", BINDING.run_id, PART, also)
    capability = store.capability_read("h1", BINDING.run_id, PART, also)

    # Then the session, capability and attempt come with them: the attempt read ahead
    # too, the others read ahead as absent
    assert read.session == _session()
    assert read.attempt is not None
    assert read.attempt.state == AttemptState.STARTED
    assert read.ahead.reads() == {Read.run_part(BINDING.run_id, PART), *also}
    assert set(read.ahead.found) == {Read.run_part(BINDING.run_id, PART)}
    assert read.run is None
    assert read.versions == ()
    assert capability.capability == store.capability("h1")
    assert capability.attempt == read.attempt
    assert capability.ahead.absent == set(also)
    # And an unknown session reads as none
    assert store.session_read("secret-none", BINDING.run_id, PART).session is None


def test_an_attempt_s_sessions_are_revoked_once(given: Given) -> None:
    # Given a session on its open attempt
    given.capability("h1")
    given.attempt()
    store = given.sessions
    store.open_session("h1", "secret-1", _session(), PART, AT)

    # When the attempt's sessions are revoked twice
    first = store.revoke_attempt_sessions(BINDING.attempt_id, AT)
    second = store.revoke_attempt_sessions(BINDING.attempt_id, AT)

    # Then the session was revoked by the first only
    assert (first, second) == (1, 0)
    session = store.session("secret-1")
    assert session is not None
    assert session.revoked
