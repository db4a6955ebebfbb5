"""The seams of access: organization API tokens, capabilities and runner sessions,
dashboard login codes and sessions, hosted-UI sign-in pre-sessions, and the GitHub App
installations an organization holds with the connect flows that claim them.

Every key is the hash of a secret (``handle_hash``), never the secret itself, and
every type named here is a domain value. The DynamoDB implementations are in the store
modules of the same names; the in-memory ones in ``tests/fakes_access.py``; the
contract test that holds both to the same cases in
``tests/integration/test_access_store_contract.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from runplane.domain.audit import AuditRecord
from runplane.domain.capabilities import Binding, CapabilityKind, CapabilityRecord, RunnerSession
from runplane.domain.github_connect import AuditNote, ConnectFlow, Installation
from runplane.domain.identity import ApiTokenRecord
from runplane.domain.read_ahead import Read, ReadAhead
from runplane.domain.runner_reads import CapabilityRead, SessionRead
from runplane.domain.teams import Team, TeamAccess
from runplane.domain.web_session import Grant, WebSession


class ApiTokenStore(Protocol):
    """Organization API tokens, each under its secret's hash.

    - ``put_token`` writes a new token's record; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``token`` reads the record (revoked or not: the caller refuses a revoked one), or
      None for an unknown hash.
    - ``revoke_token`` marks the organization's token revoked; a token ID unknown to the
      organization (another organization's included) raises ``NotFound`` and writes
      nothing.
    - ``audit``, when given, is the security record written with the change (in the same
      transaction: a refused change writes neither).
    """

    def put_token(
        self, token_hash: str, record: ApiTokenRecord, audit: AuditRecord | None = None
    ) -> None: ...

    def token(self, token_hash: str) -> ApiTokenRecord | None: ...

    def token_read(
        self, token_hash: str, also: Sequence[Read]
    ) -> tuple[ApiTokenRecord | None, ReadAhead]:
        """``token``, with ``also`` (what the call reads next) in the same consistent
        request, found or absent."""
        ...

    def revoke_token(
        self, org_id: str, token_id: str, now: datetime, audit: AuditRecord | None = None
    ) -> None: ...


class RunnerSessionStore(Protocol):
    """Capabilities (under their handle's hash) and the runner sessions bootstrap handles
    open (under their secret's hash); every read consistent.

    - ``capability`` and ``session`` read the record, or None for an unknown hash
      (validity, expiry and revocation are the caller's to check).
    - ``capability_read`` and ``session_read`` read it together with the run's part
      ``part`` (the attempt it is for) and ``also``, the items its call reads next, in
      one request: each of ``also`` in the read-ahead, found or absent, for the call to
      be served; a session's read also gives the run and the state versions found.
    - ``redeem`` marks a capability redeemed iff it exists, is of ``kind``, is bound to
      exactly ``binding``, is unexpired and was never redeemed; otherwise, writing
      nothing, ``UnknownCapability`` (none, or of another kind), ``CapabilityExpired``,
      ``CapabilityWrongAttempt``, ``CapabilityWrongPhase``, ``CapabilityWrongSandbox``,
      or ``AlreadyRedeemed`` with its JTI, in that order.
    - ``open_session`` is the bootstrap handle's redemption (as ``redeem``), the claim of
      its JTI (``CapabilityConsumed`` if a session claimed it), the session and its note
      on its attempt, the run's part ``part`` (``SessionRefused`` unless the attempt is
      open), all in one write or none.
    - ``revoke_attempt_sessions`` revokes the attempt's sessions not yet revoked (a
      revoked one keeps its instant) and says how many.
    """

    def capability(self, handle_hash: str) -> CapabilityRecord | None: ...

    def capability_read(
        self, handle_hash: str, run_id: str, part: str, also: Sequence[Read] = ()
    ) -> CapabilityRead: ...

    def session(self, secret_hash: str) -> RunnerSession | None: ...

    def session_read(
        self, secret_hash: str, run_id: str, part: str, also: Sequence[Read] = ()
    ) -> SessionRead: ...

    def redeem(
        self, handle_hash: str, kind: CapabilityKind, binding: Binding, now: datetime
    ) -> None: ...

    def open_session(
        self, handle_hash: str, secret_hash: str, session: RunnerSession, part: str, now: datetime
    ) -> None: ...

    def revoke_attempt_sessions(self, attempt_id: str, now: datetime) -> int: ...


class WebSessionStore(Protocol):
    """Dashboard login codes and cookie sessions, each under its secret's hash.

    - ``put_login_code`` writes a new code; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``login_code`` and ``session`` read what was written, expired or not (validity is
      the caller's to check), or None for an unknown hash.
    - ``redeem`` consumes the code and opens the session in one write: of two
      redemptions of one code exactly one succeeds; the other, or a code no longer
      there, raises ``LoginLinkRefused`` and writes nothing (no session either).
    - ``put_session`` opens a session; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``delete_session`` ends a session; ending one that is not there is no error.
    """

    def put_login_code(self, code_hash: str, grant: Grant, created_by: str) -> None: ...

    def login_code(self, code_hash: str) -> Grant | None: ...

    def redeem(
        self,
        code_hash: str,
        secret_hash: str,
        session: WebSession,
        audit: AuditRecord | None = None,
    ) -> None: ...

    def put_session(
        self, secret_hash: str, session: WebSession, audit: AuditRecord | None = None
    ) -> None: ...

    def session(self, secret_hash: str) -> WebSession | None: ...

    def delete_session(self, secret_hash: str) -> None: ...


class PreSessionStore(Protocol):
    """Hosted-UI sign-in pre-sessions, each under its cookie secret's hash; a pre-session
    holds no secret, only when it was started and until when it may be finished.

    - ``put_pre_session`` writes a new one; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``pre_session_validity`` is the ``valid_until`` written, expired or not (validity
      is the caller's to check), or None for an unknown or consumed one.
    - ``consume_pre_session`` deletes it if it is still there: of two consumptions
      exactly one succeeds; the other, or one of an unknown hash, raises
      ``SignInRefused`` (``pre_session_used``).
    """

    def put_pre_session(
        self, secret_hash: str, created_at: datetime, valid_until: datetime
    ) -> None: ...

    def pre_session_validity(self, secret_hash: str) -> datetime | None: ...

    def consume_pre_session(self, secret_hash: str) -> None: ...


class GitHubInstallationStore(Protocol):
    """The GitHub App installations organizations hold, and the connect flows that claim
    them (a flow under its cookie secret's hash, holding no secret).

    Connect flows:

    - ``put_connect`` writes a new flow; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``connect_flow`` reads it, expired or not (validity is the caller's to check), or
      None for an unknown or consumed one.
    - ``choose_installation`` records the installation a flow names, once: a flow no
      longer there, or one that names an installation already, raises
      ``GitHubConnectRefused`` (``flow_used``) and writes nothing.
    - ``consume_connect`` deletes the flow if it is still there: of two consumptions
      exactly one succeeds; the other, or one of an unknown hash, raises
      ``GitHubConnectRefused`` (``flow_used``).

    Held installations (one holder per installation, a count per organization):

    - ``holder_of`` is the organization holding an installation, or None; ``held`` what
      an organization holds of it (with its binding count), or None; ``held_by`` all an
      organization holds, in installation ID order.
    - ``claim`` holds a new installation with its ``note`` in the organization's audit
      trail, all in one write, refused with ``GitHubInstallationTaken`` and nothing
      written if any organization holds it already (this one included) or this one
      holds ``cap`` already.
    - ``verify_again`` replaces the proof of an installation the organization holds
      (account, GitHub user, who claimed it, ``claimed_at`` = ``now``; the binding count
      stays) with its audit note, in one write; if the organization does not hold it,
      ``GitHubInstallationTaken`` and nothing written.
    - ``release`` stops holding an installation that no binding uses (holder, record
      and count) with its audit note, in one write; one not held by the organization
      or still bound raises ``Conflict`` and writes nothing.

    A workspace binding's own count moves in the binding's transaction, which stays on
    the store (``store.github_installations.binding_change``).
    """

    def put_connect(self, secret_hash: str, flow: ConnectFlow, now: datetime) -> None: ...

    def connect_flow(self, secret_hash: str) -> ConnectFlow | None: ...

    def choose_installation(self, secret_hash: str, installation_id: int) -> None: ...

    def consume_connect(self, secret_hash: str) -> None: ...

    def holder_of(self, installation_id: int) -> str | None: ...

    def held(self, org_id: str, installation_id: int) -> Installation | None: ...

    def held_by(self, org_id: str) -> list[Installation]: ...

    def claim(
        self, installation: Installation, *, cap: int, note: AuditNote, now: datetime
    ) -> None: ...

    def verify_again(
        self, installation: Installation, *, note: AuditNote, now: datetime
    ) -> None: ...

    def release(
        self, org_id: str, installation_id: int, *, note: AuditNote, now: datetime
    ) -> None: ...


class ServesReadAhead(Protocol):
    """Serves what a read brought ahead to the reads made inside ``serving``: each item
    once, none after a write (the request's identity map, ``store.request_reads``)."""

    def serving(self, ahead: ReadAhead) -> AbstractContextManager[None]: ...


class EngineStartReads(ServesReadAhead, Protocol):
    """What a runner's engine starts a phase by reading (its run, its workspace, the
    state version the run pinned and that version's artifact record), read in one
    request (``read_ahead``) and served to the reads made inside ``serving``: each item
    once, none after a write (the request's identity map)."""

    def read_ahead(self, run_id: str, workspace_id: str) -> ReadAhead: ...


class TeamStore(Protocol):
    """An organization's teams and their workspace access (``store/teams.py``).

    - ``teams`` lists the organization's teams by name; ``team`` reads one, or raises
      ``NotFound`` (another organization's included).
    - ``access_of`` lists a team's workspace grants; ``access_to`` the grants of the
      named teams on one workspace.
    - ``create`` writes a new team with its event, refusing a taken name
      (``TeamNameTaken``) or one past the organization's limit (``InvalidInput``).
    - ``update`` replaces ``current`` with ``updated`` while the team is still at
      ``current``'s version (else ``ConcurrentChange``, or ``NotFound`` once deleted).
    - ``delete`` removes it (same condition) and then its grants.
    - ``set_access`` replaces a team's grant on a workspace while the team exists
      (else ``NotFound``); ``remove_access`` deletes one (``NotFound`` if absent).
    - ``forget_workspace`` removes every grant on a deleted workspace.
    Every write that is refused writes nothing, its event included.
    """

    def teams(self, org_id: str) -> list[Team]: ...

    def team(self, org_id: str, team_id: str) -> Team: ...

    def access_of(self, org_id: str, team_id: str) -> list[TeamAccess]: ...

    def access_to(
        self, org_id: str, team_ids: list[str], workspace_id: str
    ) -> list[TeamAccess]: ...

    def create(self, team: Team, event: AuditRecord) -> None: ...

    def update(self, current: Team, updated: Team, event: AuditRecord) -> None: ...

    def delete(self, current: Team, event: AuditRecord) -> None: ...

    def set_access(self, org_id: str, access: TeamAccess, event: AuditRecord) -> None: ...

    def remove_access(
        self, org_id: str, team_id: str, workspace_id: str, event: AuditRecord
    ) -> None: ...

    def forget_workspace(self, org_id: str, workspace_id: str) -> None: ...
