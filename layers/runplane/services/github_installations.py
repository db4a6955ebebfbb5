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
from runplane.domain.github import Binding, valid_installation_id
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
from runplane.store import github_installations as store
from runplane.store import web_sessions
from runplane.store.transaction import Transaction


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
        user_api: UserApi = GitHubUserAuthorization,
    ) -> None:
        self._clock = clock
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
        store.put_connect(handle_hash(secret), flow, now).commit()
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
        store.choose_installation(secret_hash, chosen).commit()
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
        store.consume_connect(secret_hash).commit()
        if error is not None or not code:
            raise GitHubConnectRefused("github_refused", "GitHub did not authorize the App")
        if flow.installation_id is None:
            raise GitHubConnectRefused(
                "no_installation", "this connection named no installation; start again"
            )
        session = web_sessions.get_session(flow.session_hash)
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
        flow = store.get_connect(secret_hash)
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
        current = store.held(org, number)
        if current is None:
            try:
                store.claim(
                    installation, cap=self._config.max_installations, note=note, now=now
                ).commit()
                return installation
            except GitHubInstallationTaken:
                # Two connections of this organization finished at once: the other won.
                current = store.held(org, number)
                if current is None:
                    raise
        store.verify_again(installation, note=note, now=now).commit()
        return replace(installation, bindings=current.bindings, claimed_at=now)

    # -- what an organization holds -----------------------------------------------------------

    def list(self, principal: Principal) -> list[Installation]:
        principal.require(Permission.ORGANIZATION_READ)
        held = store.held_by(principal.organization_id)
        return sorted(held, key=lambda i: i.installation_id)

    def release(self, principal: Principal, installation_id: int) -> None:
        principal.require(Permission.GITHUB_CONNECT)
        number = valid_installation_id(installation_id)
        current = store.held(principal.organization_id, number)
        if current is None:
            raise NotFound("GitHub App installation", str(number))
        note = self._note("github.installation.released", principal.ref, number, "released")
        store.release(
            principal.organization_id, number, bindings=0, note=note, now=self._clock.now()
        ).commit()

    # -- bindings' bookkeeping --------------------------------------------------------------

    def binding_change(
        self, binding: Binding | None, previous: Binding | None, actor: str
    ) -> Transaction:
        """The installation side of a binding replacing ``previous`` (either may be None):
        the new installation must be held by the organization and counts one more
        binding; the previous one counts one fewer and is released with its last."""
        write = Transaction()
        before = None if previous is None else previous.installation_id
        after = None if binding is None else binding.installation_id
        if binding is not None:
            org = binding.organization_id
            if before == after:
                write.extend([store.still_held(org, binding.installation_id)])
            else:
                write.extend([store.use(org, binding.installation_id)])
        if previous is not None and before != after:
            org = previous.organization_id
            held = store.held(org, previous.installation_id)
            if held is not None:
                note = self._note(
                    "github.installation.released",
                    actor,
                    previous.installation_id,
                    "its last binding was removed",
                )
                write.extend([store.stop_using(org, held, note, self._clock.now())])
        return write

    def holder_of(self, installation_id: int) -> str | None:
        return store.holder_of(installation_id)

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
