"""In-memory seams of access (runplane.services.repositories.access): plain dicts
keeping the DynamoDB store's promises, the same cases holding both
(tests/integration/test_access_store_contract.py). A refused write changes nothing
and raises the store's typed error."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime

from runplane.domain.audit import AuditRecord
from runplane.domain.capabilities import (
    AlreadyRedeemed,
    Binding,
    CapabilityKind,
    CapabilityRecord,
    RunnerSession,
)
from runplane.domain.entities import AuditEvent, Run
from runplane.domain.errors import (
    CapabilityConsumed,
    CapabilityExpired,
    CapabilityWrongAttempt,
    CapabilityWrongPhase,
    CapabilityWrongSandbox,
    ConcurrentChange,
    Conflict,
    GitHubConnectRefused,
    GitHubInstallationTaken,
    LoginLinkRefused,
    NotFound,
    SessionRefused,
    SignInRefused,
    UnknownCapability,
)
from runplane.domain.github_connect import AuditNote, ConnectFlow, Installation
from runplane.domain.identity import ApiTokenRecord
from runplane.domain.parts import OPEN_ATTEMPT, RunPart
from runplane.domain.read_ahead import NOTHING_READ, Read, ReadAhead, ReadKind, Recorded
from runplane.domain.runner_reads import CapabilityRead, SessionRead
from runplane.domain.state import StateVersion
from runplane.domain.web_session import Grant, WebSession


class InMemoryApiTokens:
    """``ApiTokenStore``: token records by the hash of their secret."""

    def __init__(self) -> None:
        self.tokens: dict[str, ApiTokenRecord] = {}
        self.security_trail: list[AuditRecord] = []

    def put_token(
        self, token_hash: str, record: ApiTokenRecord, audit: AuditRecord | None = None
    ) -> None:
        if token_hash in self.tokens:
            raise ConcurrentChange("the token changed concurrently; nothing was written")
        self.tokens[token_hash] = record
        if audit is not None:
            self.security_trail.append(audit)

    def token_read(
        self, token_hash: str, also: Sequence[Read]
    ) -> tuple[ApiTokenRecord | None, ReadAhead]:
        # Nothing is read ahead here: the services read each item when they need it.
        return self.token(token_hash), NOTHING_READ

    def token(self, token_hash: str) -> ApiTokenRecord | None:
        return self.tokens.get(token_hash)

    def revoke_token(
        self, org_id: str, token_id: str, now: datetime, audit: AuditRecord | None = None
    ) -> None:
        for token_hash, record in self.tokens.items():
            if record.id == token_id and record.organization_id == org_id:
                if record.revoked:
                    return  # as the table: revoked once, nothing written again
                self.tokens[token_hash] = replace(record, revoked=True)
                if audit is not None:
                    self.security_trail.append(audit)
                return
        raise NotFound("token", token_id)


@dataclass(frozen=True)
class Redemption:
    jti: str
    request_digest: str | None = None
    result: tuple[tuple[str, str], ...] = ()


class InMemoryRunnerSessions:
    """``RunnerSessionStore``: capabilities by handle hash with their redemption,
    sessions by secret hash, the JTIs sessions claimed, and the runs' attempts (the
    run parts a session is noted on). ``mint`` and ``put_part`` stand for the writes
    that create them, which other areas' transactions make on the table; ``runs``,
    ``versions`` and ``recorded`` are what a read ahead finds."""

    def __init__(self) -> None:
        self.capabilities: dict[str, CapabilityRecord] = {}
        self.redemptions: dict[str, Redemption] = {}
        self.sessions: dict[str, RunnerSession] = {}
        self.claimed_jtis: set[str] = set()
        self.parts: dict[tuple[str, str], RunPart] = {}
        self.runs: dict[str, Run] = {}
        self.versions: dict[str, StateVersion] = {}
        self.recorded: dict[Read, Recorded] = {}

    # -- what other writes create --------------------------------------------------------

    def mint(self, handle_hash: str, record: CapabilityRecord) -> None:
        self.capabilities[handle_hash] = record

    def put_part(self, part: RunPart) -> None:
        self.parts[(part.run_id, part.name)] = part

    # -- the seam --------------------------------------------------------------------------

    def capability(self, handle_hash: str) -> CapabilityRecord | None:
        return self.capabilities.get(handle_hash)

    def capability_read(
        self, handle_hash: str, run_id: str, part: str, also: Sequence[Read] = ()
    ) -> CapabilityRead:
        ahead = self._ahead([Read.run_part(run_id, part), *also])
        return CapabilityRead(
            self.capabilities.get(handle_hash),
            self.parts.get((run_id, part)),
            ahead,
            *self._run_and_versions(ahead, run_id),
        )

    def session(self, secret_hash: str) -> RunnerSession | None:
        return self.sessions.get(secret_hash)

    def session_read(
        self, secret_hash: str, run_id: str, part: str, also: Sequence[Read] = ()
    ) -> SessionRead:
        ahead = self._ahead([Read.run_part(run_id, part), *also])
        return SessionRead(
            self.sessions.get(secret_hash),
            self.parts.get((run_id, part)),
            ahead,
            *self._run_and_versions(ahead, run_id),
        )

    def _run_and_versions(
        self, ahead: ReadAhead, run_id: str
    ) -> tuple[Run | None, tuple[StateVersion, ...]]:
        return (
            self.runs.get(run_id) if Read.run(run_id) in ahead.found else None,
            tuple(
                self.versions[read.id]
                for read in sorted(ahead.found)
                if read.kind is ReadKind.STATE_VERSION
            ),
        )

    def redeem(
        self, handle_hash: str, kind: CapabilityKind, binding: Binding, now: datetime
    ) -> None:
        self._refuse_redemption(handle_hash, kind, binding, now)
        self.redemptions[handle_hash] = Redemption(self.capabilities[handle_hash].jti)

    def open_session(
        self, handle_hash: str, secret_hash: str, session: RunnerSession, part: str, now: datetime
    ) -> None:
        binding = session.binding
        self._refuse_redemption(handle_hash, CapabilityKind.BOOTSTRAP, binding, now)
        if session.jti in self.claimed_jtis:
            raise CapabilityConsumed(session.jti, "its runner session was already created")
        if secret_hash in self.sessions:
            raise ConcurrentChange("the runner session changed concurrently; nothing was written")
        attempt = self.parts.get((binding.run_id, part))
        if attempt is None or attempt.state not in OPEN_ATTEMPT:
            raise SessionRefused("its attempt has ended")
        self.redemptions[handle_hash] = Redemption(self.capabilities[handle_hash].jti)
        self.claimed_jtis.add(session.jti)
        self.sessions[secret_hash] = session
        self.parts[(binding.run_id, part)] = replace(
            attempt, session_keys=attempt.session_keys | {secret_hash}, updated_at=now
        )

    def revoke_attempt_sessions(self, attempt_id: str, now: datetime) -> int:
        revoked = 0
        for secret_hash, session in self.sessions.items():
            if session.binding.attempt_id == attempt_id and not session.revoked:
                self.sessions[secret_hash] = replace(session, revoked=True)
                revoked += 1
        return revoked

    def _refuse_redemption(
        self, handle_hash: str, kind: CapabilityKind, binding: Binding, now: datetime
    ) -> None:
        """Raise what the table's conditional redemption raises, in its order."""
        record = self.capabilities.get(handle_hash)
        if record is None or record.kind is not kind:
            raise UnknownCapability()
        if record.valid_until <= now:
            raise CapabilityExpired(record.jti)
        bound = record.binding
        if (bound.attempt_id, bound.run_id) != (binding.attempt_id, binding.run_id):
            raise CapabilityWrongAttempt(record.jti)
        if bound.phase is not binding.phase:
            raise CapabilityWrongPhase(record.jti)
        if bound.sandbox_id != binding.sandbox_id:
            raise CapabilityWrongSandbox(record.jti)
        redeemed = self.redemptions.get(handle_hash)
        if redeemed is not None:
            raise AlreadyRedeemed(redeemed.jti, redeemed.request_digest, dict(redeemed.result))

    def _ahead(self, asked: Sequence[Read]) -> ReadAhead:
        found: dict[Read, Recorded] = {}
        for read in asked:
            if read in self.recorded:
                found[read] = self.recorded[read]
            elif read.kind is ReadKind.RUN and read.id in self.runs:
                found[read] = {"run": read.id}
            elif read.kind is ReadKind.STATE_VERSION and read.id in self.versions:
                found[read] = {"state_version": read.id}
            elif read.kind is ReadKind.RUN_PART and (read.id, read.name) in self.parts:
                found[read] = {"part": f"{read.id}/{read.name}"}
        return ReadAhead.of(found, asked)


@dataclass(frozen=True)
class StoredLoginCode:
    grant: Grant
    created_by: str


class InMemoryWebSessions:
    """``WebSessionStore``: login codes and sessions by the hash of their secret."""

    def __init__(self) -> None:
        self.login_codes: dict[str, StoredLoginCode] = {}
        self.sessions: dict[str, WebSession] = {}
        self.security_trail: list[AuditRecord] = []

    def put_login_code(self, code_hash: str, grant: Grant, created_by: str) -> None:
        if code_hash in self.login_codes:
            raise ConcurrentChange("the login code changed concurrently; nothing was written")
        self.login_codes[code_hash] = StoredLoginCode(grant, created_by)

    def login_code(self, code_hash: str) -> Grant | None:
        stored = self.login_codes.get(code_hash)
        return None if stored is None else stored.grant

    def redeem(
        self,
        code_hash: str,
        secret_hash: str,
        session: WebSession,
        audit: AuditRecord | None = None,
    ) -> None:
        if code_hash not in self.login_codes:
            raise LoginLinkRefused()
        self._refuse_taken_session(secret_hash)
        del self.login_codes[code_hash]
        self.sessions[secret_hash] = session
        if audit is not None:
            self.security_trail.append(audit)

    def put_session(
        self, secret_hash: str, session: WebSession, audit: AuditRecord | None = None
    ) -> None:
        self._refuse_taken_session(secret_hash)
        self.sessions[secret_hash] = session
        if audit is not None:
            self.security_trail.append(audit)

    def session(self, secret_hash: str) -> WebSession | None:
        return self.sessions.get(secret_hash)

    def delete_session(self, secret_hash: str) -> None:
        self.sessions.pop(secret_hash, None)

    def _refuse_taken_session(self, secret_hash: str) -> None:
        if secret_hash in self.sessions:
            raise ConcurrentChange("the web session changed concurrently; nothing was written")


class InMemoryPreSessions:
    """``PreSessionStore``: hosted-UI pre-sessions (started, valid until) by hash."""

    def __init__(self) -> None:
        self.pre_sessions: dict[str, tuple[datetime, datetime]] = {}

    def put_pre_session(
        self, secret_hash: str, created_at: datetime, valid_until: datetime
    ) -> None:
        if secret_hash in self.pre_sessions:
            raise ConcurrentChange("the sign-in changed concurrently; nothing was written")
        self.pre_sessions[secret_hash] = (created_at, valid_until)

    def pre_session_validity(self, secret_hash: str) -> datetime | None:
        stored = self.pre_sessions.get(secret_hash)
        return None if stored is None else stored[1]

    def consume_pre_session(self, secret_hash: str) -> None:
        if self.pre_sessions.pop(secret_hash, None) is None:
            raise SignInRefused(
                "pre_session_used", "this sign-in was already finished or abandoned"
            )


class InMemoryGitHubInstallations:
    """``GitHubInstallationStore``: connect flows by hash, each installation's holder,
    what each organization holds with its binding count, how many, and the audit
    events written with them."""

    def __init__(self) -> None:
        self.flows: dict[str, ConnectFlow] = {}
        self.holders: dict[int, str] = {}
        self.installations: dict[tuple[str, int], Installation] = {}
        self.counts: dict[str, int] = {}
        self.audit_events: list[AuditEvent] = []

    # -- connect flows -------------------------------------------------------------------

    def put_connect(self, secret_hash: str, flow: ConnectFlow, now: datetime) -> None:
        if secret_hash in self.flows:
            raise ConcurrentChange("the connection changed concurrently; nothing was written")
        self.flows[secret_hash] = flow

    def connect_flow(self, secret_hash: str) -> ConnectFlow | None:
        return self.flows.get(secret_hash)

    def choose_installation(self, secret_hash: str, installation_id: int) -> None:
        flow = self.flows.get(secret_hash)
        if flow is None or flow.installation_id is not None:
            raise _flow_used()
        self.flows[secret_hash] = replace(flow, installation_id=installation_id)

    def consume_connect(self, secret_hash: str) -> None:
        if self.flows.pop(secret_hash, None) is None:
            raise _flow_used()

    # -- held installations ------------------------------------------------------------

    def holder_of(self, installation_id: int) -> str | None:
        return self.holders.get(installation_id)

    def held(self, org_id: str, installation_id: int) -> Installation | None:
        return self.installations.get((org_id, installation_id))

    def held_by(self, org_id: str) -> list[Installation]:
        return sorted(
            (i for (org, _), i in self.installations.items() if org == org_id),
            key=lambda i: i.installation_id,
        )

    def claim(
        self, installation: Installation, *, cap: int, note: AuditNote, now: datetime
    ) -> None:
        org, number = installation.organization_id, installation.installation_id
        if number in self.holders:
            raise _taken(number)
        if (org, number) in self.installations:
            raise ConcurrentChange("the installation changed concurrently; nothing was written")
        if self.counts.get(org, 0) >= cap:
            raise GitHubInstallationTaken(
                f"this organization already holds {cap} GitHub App installations; "
                "release one it no longer uses first"
            )
        self.holders[number] = org
        self.installations[(org, number)] = replace(installation, bindings=0)
        self.counts[org] = self.counts.get(org, 0) + 1
        self._audit(org, number, note, now)

    def verify_again(self, installation: Installation, *, note: AuditNote, now: datetime) -> None:
        org, number = installation.organization_id, installation.installation_id
        current = self.installations.get((org, number))
        if current is None or self.holders.get(number) != org:
            raise _taken(number)
        self.installations[(org, number)] = replace(
            installation, claimed_at=now, bindings=current.bindings
        )
        self._audit(org, number, note, now)

    def release(self, org_id: str, installation_id: int, *, note: AuditNote, now: datetime) -> None:
        current = self.installations.get((org_id, installation_id))
        if current is None:
            raise Conflict(
                f"GitHub App installation {installation_id} is not held by this organization"
            )
        if current.bindings != 0:
            raise Conflict(
                f"GitHub App installation {installation_id} is still used by "
                f"{current.bindings} workspace binding(s); unbind them first"
            )
        if self.holders.get(installation_id) != org_id or self.counts.get(org_id, 0) <= 0:
            raise ConcurrentChange("the installation changed concurrently; nothing was written")
        del self.installations[(org_id, installation_id)]
        del self.holders[installation_id]
        self.counts[org_id] -= 1
        self._audit(org_id, installation_id, note, now)

    def use(self, org_id: str, installation_id: int) -> None:
        """One more workspace binding uses a held installation: on the table this is a
        write of the binding's own transaction (``store.github_installations.use``)."""
        current = self.installations[(org_id, installation_id)]
        self.installations[(org_id, installation_id)] = replace(
            current, bindings=current.bindings + 1
        )

    def _audit(self, org_id: str, installation_id: int, note: AuditNote, now: datetime) -> None:
        self.audit_events.append(
            AuditEvent(
                id=note.event_id,
                organization_id=org_id,
                subject_id=f"github-installation-{installation_id}",
                type=note.type,
                actor=note.actor,
                at=now,
                details=dict(note.details),
            )
        )


def _flow_used() -> GitHubConnectRefused:
    return GitHubConnectRefused("flow_used", "this connection was already finished or abandoned")


def _taken(installation_id: int) -> GitHubInstallationTaken:
    return GitHubInstallationTaken(
        f"GitHub App installation {installation_id} is connected to another organization; "
        "an admin of that organization must release it first"
    )


class NothingReadAhead:
    """An ``EngineStartReads`` over fakes: nothing to read ahead, each read asks the fake."""

    def read_ahead(self, run_id: str, workspace_id: str) -> ReadAhead:
        return ReadAhead()

    def serving(self, ahead: ReadAhead) -> AbstractContextManager[None]:
        return nullcontext()
