"""Authentication: API tokens, JWTs (Cognito-compatible) and runner sessions become principals.

Every principal belongs to exactly one organization; every lookup a service
makes on a principal's behalf is scoped to it, and another organization's
object is reported exactly like a missing one.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runplane.adapters.jwt import JwtRejected, JwtVerifier, VerifiedClaims
from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.capabilities import SESSION_PREFIX, Phase, handle_hash
from runplane.domain.clock import Clock
from runplane.domain.errors import (
    InvalidInput,
    NotFound,
    SessionAttemptEnded,
    SessionRefused,
)
from runplane.domain.federation import (
    GROUPS_CLAIM,
    NO_FEDERATION,
    Federation,
    NotFederated,
    idp_groups,
)
from runplane.domain.identity import (
    ROLES,
    RUNNER_PERMISSIONS,
    ApiTokenRecord,
    Forbidden,
    Permission,
    Principal,
    PrincipalKind,
    Unauthenticated,
    permissions_for_roles,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.read_ahead import NOTHING_READ, Read, ReadAhead
from runplane.domain.session_tokens import SessionHints
from runplane.domain.state import FINALIZED

if TYPE_CHECKING:
    from runplane.domain.runner_reads import SessionRead
    from runplane.services.capabilities import RunnerSessions
    from runplane.services.repositories import RunReader
    from runplane.services.repositories.access import ApiTokenStore

TOKEN_PREFIX = "rpt_"
# Runs whose workspace an Identity remembers (oldest forgotten first).
_REMEMBERED_RUNS = 10_000
# The JWT claim that names the caller's organization (a Cognito custom attribute).
ORGANIZATION_CLAIM = "custom:organization"


@dataclass(frozen=True)
class IssuedToken:
    record: ApiTokenRecord
    token: str = field(repr=False)


class Identity:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        tokens: ApiTokenStore,
        sessions: Callable[[], RunnerSessions],
        runs: Callable[[], RunReader],
        verifier: JwtVerifier | None = None,
        *,
        federation: Federation = NO_FEDERATION,
    ) -> None:
        self._clock = clock
        self._federation = federation
        self._ids = ids
        self._tokens = tokens
        self._sessions = sessions
        self._runs = runs
        self._verifier = verifier
        self._workspace_by_run: dict[str, str] = {}
        self._pin_by_attempt: dict[str, str] = {}
        # The artifact holding a finalized version's state (a version never changes).
        self._artifact_by_version: dict[str, str] = {}
        self._workspaces_lock = threading.Lock()

    # -- API tokens ---------------------------------------------------------------------

    def issue_token(
        self,
        organization_id: str,
        name: str,
        permissions: Iterable[Permission],
        *,
        created_by: str,
        team_id: str | None = None,
        recorded_for: Principal | None = None,
        recorded_as: AuditAction = AuditAction.TOKEN_CREATED,
    ) -> IssuedToken:
        """A new organization token; its secret is returned here and never again. A team
        token (``team_id``) holds no permission of its own: its team's, per request. With
        ``recorded_for``, the security trail records its creation in the same write (as
        ``recorded_as``), naming the token's ID and name, never its secret."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = ApiTokenRecord(
            id=self._ids.new(IdKind.API_TOKEN),
            organization_id=organization_id,
            name=name,
            permissions=frozenset(permissions),
            created_at=self._clock.now(),
            created_by=created_by,
            revoked=False,
            team_id=team_id,
        )
        audit = None
        if recorded_for is not None:
            audit = AuditRecord.of(
                recorded_for,
                recorded_as,
                "token",
                record.id,
                at=record.created_at,
                id=self._ids.new(IdKind.AUDIT_EVENT),
                details={
                    "name": name,
                    "permissions": str(len(record.permissions)),
                    # A team token's record names the team it acts for.
                    **({"team_id": team_id} if team_id else {}),
                },
            )
        self._tokens.put_token(handle_hash(token), record, audit)
        return IssuedToken(record, token)

    def create_token(self, principal: Principal, name: str, role: str) -> IssuedToken:
        """A token for automation (CI, scripts) with a role's permissions; nobody can
        grant permissions they do not hold themselves."""
        principal.require(Permission.TOKEN_MANAGE)
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(sorted(ROLES))}", "/role")
        missing = ROLES[role] - principal.permissions
        if missing:
            raise Forbidden(sorted(missing)[0])
        return self.issue_token(
            principal.organization_id,
            name,
            ROLES[role],
            created_by=principal.ref,
            recorded_for=principal,
        )

    def revoke_token(self, principal: Principal, token_id: str) -> None:
        principal.require(Permission.TOKEN_MANAGE)
        now = self._clock.now()
        revoked = AuditRecord.of(
            principal,
            AuditAction.TOKEN_REVOKED,
            "token",
            token_id,
            at=now,
            id=self._ids.new(IdKind.AUDIT_EVENT),
        )
        self._tokens.revoke_token(principal.organization_id, token_id, now, revoked)

    # -- authentication -------------------------------------------------------------------

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal behind an ``Authorization: Bearer ...`` header, or ``Unauthenticated``."""
        return self.authenticate_request(authorization)[0]

    def authenticate_request(
        self, authorization: str | None, route: str = ""
    ) -> tuple[Principal, ReadAhead]:
        """``authenticate``, with what its read read ahead for the request to read next
        (a runner's run, attempt and workspace, and what its ``route``,
        ``"<METHOD> <path>"``, reads first), to serve the request's first reads."""
        if not authorization or not authorization.startswith("Bearer "):
            raise Unauthenticated()
        credential = authorization.removeprefix("Bearer ").strip()
        if credential.startswith(TOKEN_PREFIX):
            return self._token_principal(credential, token_call_reads(route))
        if credential.startswith(SESSION_PREFIX):
            return self._runner_principal(credential, route)
        if credential.count(".") == 2 and self._verifier is not None:
            return self._user_principal(credential), NOTHING_READ
        raise Unauthenticated()

    def _token_principal(
        self, token: str, also: list[Read] | None = None
    ) -> tuple[Principal, ReadAhead]:
        """The token's principal; with ``also``, what the call reads next comes in the
        same consistent request as the token (read on every call: a revoked token is
        refused at once)."""
        if also:
            record, ahead = self._tokens.token_read(handle_hash(token), also)
        else:
            record, ahead = self._tokens.token(handle_hash(token)), NOTHING_READ
        if record is None or record.revoked:
            raise Unauthenticated()
        return Principal(
            kind=PrincipalKind.API_TOKEN,
            id=record.id,
            organization_id=record.organization_id,
            permissions=record.permissions,
            display=f"User {record.name}",
            # A token's creation is its sign-in: only a fresh token counts as a step-up.
            auth_time=record.created_at,
            team_id=record.team_id,
        ), ahead

    def _runner_principal(self, secret: str, route: str) -> tuple[Principal, ReadAhead]:
        # The session and its attempt are read on every call (one request), so a
        # closed attempt's sandbox is refused at once even if the listing that
        # revokes its sessions missed one. The run and its workspace, which most
        # calls read next, come in the same request.
        try:
            sessions = self._sessions()
            read = sessions.authenticate_open(secret, lambda hints: self._call_reads(hints, route))
            self._remember_pin(read)
        except SessionAttemptEnded:
            raise Unauthenticated("the runner session's attempt has ended") from None
        except SessionRefused:
            raise Unauthenticated("the runner session is not valid") from None
        assert read.session is not None
        session = read.session
        run_id = session.binding.run_id
        try:
            workspace_id = self._workspace_of_run(run_id, read)
        except NotFound:
            raise Unauthenticated("the runner session's run is gone") from None
        return Principal(
            kind=PrincipalKind.RUNNER,
            id=session.id,
            organization_id=session.organization_id,
            permissions=RUNNER_PERMISSIONS,
            display=f"Run {run_id}",
            run_id=run_id,
            workspace_id=workspace_id,
            attempt_id=session.binding.attempt_id,
            sandbox_id=session.binding.sandbox_id,
            phase=session.binding.phase.value,
            inputs=session.inputs,
        ), read.ahead

    def _call_reads(self, hints: SessionHints, route: str = "") -> list[Read]:
        """What a runner's call reads next: its run (an apply's with its apply record),
        its workspace, the state version its run pinned and that version's artifact
        record, as its token names them (else as this process learnt them from an
        earlier call); and what an apply's start and result read first."""
        with self._workspaces_lock:
            workspace_id = hints.workspace_id or self._workspace_by_run.get(hints.run_id)
            pinned = hints.pinned_sv_id or self._pin_by_attempt.get(hints.attempt_id)
            artifact_id = hints.state_artifact_id or (
                None if pinned is None else self._artifact_by_version.get(pinned)
            )
        reads = [Read.run(hints.run_id)]
        if hints.phase is Phase.APPLY:
            # Its result reads the apply record with its run and attempt.
            reads.append(Read.run_part(hints.run_id, "apply"))
            if route.endswith(_APPLY_START):
                # Deciding the start reads the plan it presents and the approval.
                reads += [Read.run_part(hints.run_id, name) for name in ("plan", "approval")]
            elif route.endswith(_RESULT) and workspace_id is not None:
                # A success clears the workspace's drift record, if it has one.
                reads.append(Read.drift(workspace_id))
        if workspace_id is not None:
            reads.append(Read.workspace(workspace_id))
        if pinned is not None:
            # The engine's backend asks for its current state (and downloads it)
            # on most calls: the version its run pinned, and the artifact record
            # its download opens (known from the call that read that version).
            reads.append(Read.state_version(pinned))
            if artifact_id is not None:
                reads.append(Read.artifact(artifact_id))
        return reads

    def _remember_pin(self, read: SessionRead) -> None:
        """The state version the run pinned, as the run read says: only a new plan
        attempt moves it, so it names what this attempt's next calls read; and the
        artifact holding that version's state, once the version is read. They only
        choose what to read ahead; each call still checks what it is served."""
        if read.session is None or read.run is None:
            return
        pinned = read.run.predecessor_sv_id
        if pinned is None:
            return
        with self._workspaces_lock:
            _remember(self._pin_by_attempt, read.session.binding.attempt_id, pinned)
            for version in read.versions:
                if version.status == FINALIZED and version.artifact_id is not None:
                    _remember(self._artifact_by_version, version.id, version.artifact_id)

    def _workspace_of_run(self, run_id: str, read: SessionRead) -> str:
        """A run's workspace never changes: read once per run and process, not per call
        (every runner and Cloud API call of a sandbox authenticates), and not at all
        when the authentication's read brought the run."""
        with self._workspaces_lock:
            known = self._workspace_by_run.get(run_id)
        if known is not None:
            return known
        if read.run is not None:
            workspace_id = read.run.workspace_id
        else:
            workspace_id = self._runs().get_run(run_id).workspace_id
        with self._workspaces_lock:
            _remember(self._workspace_by_run, run_id, workspace_id)
        return workspace_id

    def _user_principal(self, token: str) -> Principal:
        assert self._verifier is not None
        try:
            claims = self._verifier.verify(token, self._clock.now())
        except JwtRejected:
            raise Unauthenticated() from None
        return user_principal(claims, self._federation)


# The runner routes whose first reads an apply session's authentication brings.
_APPLY_START = "POST /api/v1/runner/apply-start"
# A person's calls whose first reads the path names: read with their token.
_CALL_FIRST_READS = (
    (re.compile(r"POST /api/v1/workspaces/(ws-[a-z0-9]{1,40})/configuration-versions"), "ws"),
    (re.compile(r"POST /api/v1/configuration-versions/(cv-[a-z0-9]{1,40})/actions/finalize"), "cv"),
    (
        re.compile(r"POST /api/v1/runs/(run-[a-z0-9]{1,40})/actions/(?:approve|reject)"),
        "decision",
    ),
)


def token_call_reads(route: str) -> list[Read]:
    """What a person's call ``route`` (``"<METHOD> <path>"``) reads first: its workspace,
    its configuration version, or the run it decides with the approval and policy check
    the decision reads. Only chooses what to read ahead: the call checks all it is
    served, permissions first."""
    for pattern, kind in _CALL_FIRST_READS:
        matched = pattern.fullmatch(route)
        if matched is None:
            continue
        found = matched.group(1)
        if kind == "ws":
            return [Read.workspace(found)]
        if kind == "cv":
            return [Read.configuration_version(found)]
        return [Read.run(found), Read.run_part(found, "approval"), Read.run_part(found, "policy")]
    return []


_RESULT = "POST /api/v1/runner/result"


def _remember(facts: dict[str, str], key: str, value: str) -> None:
    """Keep an immutable fact, forgetting the oldest once ``_REMEMBERED_RUNS`` are kept."""
    if key not in facts and len(facts) >= _REMEMBERED_RUNS:
        facts.pop(next(iter(facts)))
    facts[key] = value


def user_name(claims: VerifiedClaims) -> str:
    """Who a person is, by a name they cannot change: Cognito's username (never the
    email, which a user pool may let its users edit), else the subject."""
    return claims.username or claims.subject


def user_principal(claims: VerifiedClaims, federation: Federation = NO_FEDERATION) -> Principal:
    """The principal of a verified user token. API bearer tokens and dashboard sign-in
    map people through this one function.

    A person of the user pool itself belongs to the organization its
    ``custom:organization`` claim names. A person who signed in through an external
    identity provider (Cognito's ``identities`` claim names it) belongs to the
    organization the deployment bound that provider to, whatever any attribute says.
    Permissions are those of the roles named in ``cognito:groups`` and, for a
    federated person, of the roles the provider's groups are mapped to; ``groups``
    holds both kinds of group (team mappings read them)."""
    try:
        provider = federation.provider_of(claims.claims)
    except NotFederated as refused:
        raise Unauthenticated(str(refused)) from None
    roles = list(claims.groups)
    groups = list(claims.groups)
    if provider is None:
        organization_id = claims.claims.get(ORGANIZATION_CLAIM)
    else:
        organization_id = provider.organization_id
        from_provider = idp_groups(claims.claims.get(GROUPS_CLAIM))
        groups += from_provider
        roles += provider.roles_of(from_provider)
    if not isinstance(organization_id, str) or not organization_id:
        raise Unauthenticated("the token names no organization")
    return Principal(
        kind=PrincipalKind.USER,
        # The person, as a dashboard session names them too: the same ``user:`` ref
        # whichever way they call (separation of duties and two-person rules compare it).
        id=user_name(claims),
        organization_id=organization_id,
        permissions=permissions_for_roles(roles),
        display=f"User {user_name(claims)}",
        auth_time=claims.auth_time,
        user=user_name(claims),
        groups=tuple(dict.fromkeys(groups)),
    )
