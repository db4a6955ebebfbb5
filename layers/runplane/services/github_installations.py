"""Which organization holds a GitHub App installation, and the verified flow that
claims one (docs/github.md, "Connecting an installation").

``start`` opens a connect flow for a signed-in admin's dashboard session and names
where the browser goes: the App's installation page (a new installation; GitHub
comes back through the App's setup URL) or the App's user authorization (an
existing installation). ``setup`` takes GitHub's setup callback and moves on to
the user authorization. ``finish`` takes the authorization's callback: the flow
must exist, be fresh, match ``state`` and the browser's cookie; it is consumed
before the code is redeemed; the dashboard session that started it must still be
open; GitHub must list the installation among the signed-in person's and that
person must administer its account. Only then is the installation held, in one
write with its audit event. Any refusal claims nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from runplane.adapters.github_user import GitHubUserAuthorization
from runplane.adapters.secrets import Secrets
from runplane.domain.capabilities import handle_hash
from runplane.domain.clock import Clock
from runplane.domain.errors import (
    GitHubConnectRefused,
    GitHubInstallationTaken,
    GitHubNotConfigured,
    NotFound,
)
from runplane.domain.github import valid_installation_id
from runplane.domain.github_connect import (
    CONNECT_LIFETIME,
    AuditNote,
    ConnectBinding,
    ConnectFlow,
    Installation,
    account_of,
    authorize_url,
    install_url,
    installation_from_query,
    require_administrator,
)
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.web_session import new_secret
from runplane.services.repositories.access import GitHubInstallationStore, WebSessionStore


@dataclass(frozen=True)
class ConnectConfig:
    web_url: str
    api_url: str
    app_slug: str | None
    client_id: str | None
    client_secret_arn: str | None
    max_installations: int


@dataclass(frozen=True)
class Started:
    """A connect flow begun: the secret for the cookie, where to send the browser."""

    secret: str = field(repr=False)
    location: str = field(repr=False)
    valid_until: datetime


UserApi = Callable[[str, str, str, str], GitHubUserAuthorization]


class GitHubInstallations:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        secrets: Secrets,
        config: ConnectConfig,
        store: GitHubInstallationStore,
        web_sessions: WebSessionStore,
        user_api: UserApi = GitHubUserAuthorization,
    ) -> None:
        self._clock = clock
        self._store = store
        self._web_sessions = web_sessions
        self._ids = ids
        self._secrets = secrets
        self._config = config
        self._user_api = user_api

    # -- the connect flow -------------------------------------------------------------------

    def start(
        self, principal: Principal, session_secret: str, installation_id: int | None
    ) -> Started:
        principal.require(Permission.GITHUB_CONNECT)
        config = self._configured()
        chosen = None if installation_id is None else valid_installation_id(installation_id)
        secret = new_secret()
        now = self._clock.now()
        valid_until = now + CONNECT_LIFETIME
        flow = ConnectFlow(
            principal.organization_id,
            principal.ref,
            handle_hash(session_secret),
            chosen,
            valid_until,
        )
        self._store.put_connect(handle_hash(secret), flow, now)
        binding = ConnectBinding.of(secret)
        if chosen is None:
            assert config.app_slug is not None
            location = install_url(config.web_url, config.app_slug, binding)
        else:
            assert config.client_id is not None
            location = authorize_url(config.web_url, config.client_id, binding)
        return Started(secret, location, valid_until)

    def setup(self, secret: str | None, state: str | None, installation: str | None) -> str:
        """GitHub's setup callback after a new installation: remember which one it names
        (only a hint: ``finish`` checks it with GitHub) and go on to the user's
        authorization."""
        secret_hash, _flow = self._open_flow(secret, state)
        chosen = installation_from_query(installation)
        if chosen is None:
            raise GitHubConnectRefused(
                "no_installation", "GitHub named no installation; install the App again"
            )
        self._store.choose_installation(secret_hash, chosen)
        config = self._configured()
        assert config.client_id is not None
        assert secret is not None
        return authorize_url(config.web_url, config.client_id, ConnectBinding.of(secret))

    def finish(
        self, secret: str | None, state: str | None, code: str | None, error: str | None
    ) -> Installation:
        secret_hash, flow = self._open_flow(secret, state)
        # Single use from here on, whatever the outcome: a second callback with the same
        # cookie, concurrent or later, is refused before its code is redeemed.
        self._store.consume_connect(secret_hash)
        if error is not None or not code:
            raise GitHubConnectRefused("github_refused", "GitHub did not authorize the App")
        if flow.installation_id is None:
            raise GitHubConnectRefused(
                "no_installation", "this connection named no installation; start again"
            )
        session = self._web_sessions.session(flow.session_hash)
        if session is None or session.grant.valid_until <= self._clock.now():
            raise GitHubConnectRefused(
                "session_ended", "the dashboard session that started this connection has ended"
            )
        assert secret is not None
        installation = self._verified(flow, ConnectBinding.of(secret).verifier, code)
        return self._hold(installation)

    def _open_flow(self, secret: str | None, state: str | None) -> tuple[str, ConnectFlow]:
        if not secret:
            raise GitHubConnectRefused(
                "no_flow", "this browser did not start the connection, or took too long"
            )
        secret_hash = handle_hash(secret)
        flow = self._store.connect_flow(secret_hash)
        if flow is None:
            raise GitHubConnectRefused(
                "flow_used", "this connection was already finished or abandoned"
            )
        if flow.valid_until <= self._clock.now():
            raise GitHubConnectRefused("flow_expired", "this connection took too long")
        if not ConnectBinding.of(secret).state_matches(state):
            raise GitHubConnectRefused(
                "state_mismatch", "GitHub's answer is not for this browser's connection"
            )
        return secret_hash, flow

    def _verified(self, flow: ConnectFlow, verifier: str, code: str) -> Installation:
        config = self._configured()
        assert config.client_id is not None
        assert flow.installation_id is not None
        client_secret = self._secrets.read(config.client_secret_arn, "GitHub App client secret")
        github = self._user_api(config.web_url, config.api_url, config.client_id, client_secret)
        token = github.exchange(code, verifier)
        try:
            user = github.user(token)
            account = account_of(github.installations(token), flow.installation_id)
            if account is None:
                raise GitHubConnectRefused(
                    "installation_not_yours",
                    f"GitHub does not list installation {flow.installation_id} of this App "
                    f"among those {user.login} can reach",
                )
            membership = (
                github.membership(token, account.login) if account.kind == "Organization" else None
            )
            require_administrator(user, account, membership)
        finally:
            github.revoke(token)
        return Installation(
            installation_id=flow.installation_id,
            organization_id=flow.organization_id,
            account=account,
            verified_github_user=user.login,
            claimed_by=flow.started_by,
            claimed_at=self._clock.now(),
            bindings=0,
        )

    def _hold(self, installation: Installation) -> Installation:
        now = self._clock.now()
        org, number = installation.organization_id, installation.installation_id
        note = AuditNote(
            self._ids.new(IdKind.AUDIT_EVENT),
            "github.installation.connected",
            installation.claimed_by,
            {
                "installation_id": str(number),
                "account": installation.account.login,
                "github_user": installation.verified_github_user,
            },
        )
        current = self._store.held(org, number)
        if current is None:
            try:
                self._store.claim(
                    installation, cap=self._config.max_installations, note=note, now=now
                )
                return installation
            except GitHubInstallationTaken:
                # Two connections of this organization finished at once: the other won.
                current = self._store.held(org, number)
                if current is None:
                    raise
        self._store.verify_again(installation, note=note, now=now)
        return replace(installation, bindings=current.bindings, claimed_at=now)

    # -- what an organization holds -----------------------------------------------------------

    def list(self, principal: Principal) -> list[Installation]:
        principal.require(Permission.ORGANIZATION_READ)
        return self._store.held_by(principal.organization_id)

    def release(self, principal: Principal, installation_id: int) -> None:
        principal.require(Permission.GITHUB_CONNECT)
        number = valid_installation_id(installation_id)
        current = self._store.held(principal.organization_id, number)
        if current is None:
            raise NotFound("GitHub App installation", str(number))
        note = self._note("github.installation.released", principal.ref, number, "released")
        self._store.release(principal.organization_id, number, note=note, now=self._clock.now())

    # -- the webhook's reach ---------------------------------------------------------------

    def holder_of(self, installation_id: int) -> str | None:
        return self._store.holder_of(installation_id)

    # -- internals ------------------------------------------------------------------------------

    def _note(self, type_: str, actor: str, number: int, why: str) -> AuditNote:
        return AuditNote(
            self._ids.new(IdKind.AUDIT_EVENT),
            type_,
            actor,
            {"installation_id": str(number), "reason": why},
        )

    def _configured(self) -> ConnectConfig:
        config = self._config
        if not (config.client_id and config.client_secret_arn and config.app_slug):
            raise GitHubNotConfigured(
                "connecting GitHub installations needs the App's slug, client ID and client "
                "secret in this deployment's settings"
            )
        return config
