"""Connecting a GitHub App installation to an organization (docs/github.md, "Connecting
an installation").

An installation ID is a public number: whoever types it proves nothing. An
organization holds an installation only after a signed-in admin of the
organization started a connect flow in their browser, GitHub signed a person in
through the App's user authorization (authorization code with PKCE), and that
person administers the installation's account on GitHub: an owner of the GitHub
organization, or the user account itself.

As for dashboard sign-in, the flow starts with a secret in a short-lived cookie
scoped to the callback; ``state`` and the PKCE verifier are HMACs of it, so a
callback that arrives in another browser (a link sent to a victim) carries no
cookie or another one and is refused before any code is redeemed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from runplane.domain.errors import GitHubConnectRefused, InvalidInput
from runplane.domain.github import valid_installation_id

CONNECT_COOKIE = "runplane_github_connect"
# Sent only to the callback: the dashboard's pages never see it.
CONNECT_PATH = "/ui/github/callback"
CONNECT_COOKIE_PATH = "/ui/github/"
# Long enough to install the App or sign in to GitHub, short enough to be useless later.
CONNECT_LIFETIME = timedelta(minutes=10)
# An organization connects a handful of GitHub accounts; a cap keeps a runaway
# script from holding hundreds.
DEFAULT_MAX_CLAIMS = 25
_CONTEXT = b"runplane github connect v1 "


def _derive(secret: str, purpose: str) -> str:
    digest = hmac.new(secret.encode("utf-8"), _CONTEXT + purpose.encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class ConnectBinding:
    """What one connect secret binds the flow to (all derived from the secret)."""

    state: str = field(repr=False)
    verifier: str = field(repr=False)

    @classmethod
    def of(cls, secret: str) -> ConnectBinding:
        return cls(_derive(secret, "state"), _derive(secret, "verifier"))

    @property
    def challenge(self) -> str:
        digest = hashlib.sha256(self.verifier.encode("ascii")).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def state_matches(self, presented: str | None) -> bool:
        if not presented or not presented.isascii():
            return False
        return hmac.compare_digest(self.state.encode(), presented.encode())


def authorize_url(web_url: str, client_id: str, binding: ConnectBinding) -> str:
    """GitHub's user authorization for the App; the callback is the App's registered one."""
    query = urlencode(
        {
            "client_id": client_id,
            "state": binding.state,
            "code_challenge": binding.challenge,
            "code_challenge_method": "S256",
            "allow_signup": "false",
        }
    )
    return f"{web_url.rstrip('/')}/login/oauth/authorize?{query}"


def install_url(web_url: str, app_slug: str, binding: ConnectBinding) -> str:
    """Where a new installation is made; GitHub then calls the App's setup URL with
    ``installation_id`` and this ``state``."""
    query = urlencode({"state": binding.state})
    return f"{web_url.rstrip('/')}/apps/{quote(app_slug, safe='')}/installations/new?{query}"


def installation_from_query(value: str | None) -> int | None:
    """The setup callback's ``installation_id``: only a hint until GitHub confirms it."""
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 16:
        raise InvalidInput("installation_id must be a GitHub installation number")
    return valid_installation_id(int(value))


@dataclass(frozen=True)
class GitHubAccount:
    login: str
    kind: str  # "Organization" or "User"
    id: int


@dataclass(frozen=True)
class GitHubUser:
    login: str
    id: int


@dataclass(frozen=True)
class Installation:
    """An installation an organization holds, with who proved it and how many of the
    organization's workspaces are bound with it."""

    installation_id: int
    organization_id: str
    account: GitHubAccount
    verified_github_user: str
    claimed_by: str
    claimed_at: datetime
    bindings: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "installation_id": self.installation_id,
            "account": self.account.login,
            "account_type": self.account.kind,
            "verified_github_user": self.verified_github_user,
            "claimed_by": self.claimed_by,
            "claimed_at": self.claimed_at.isoformat(),
            "bindings": self.bindings,
        }


def account_of(
    installations: list[Mapping[str, Any]], installation_id: int
) -> GitHubAccount | None:
    """The account of ``installation_id`` among the installations GitHub lists for the
    signed-in user (``GET /user/installations``), or None when it is not one of them."""
    for entry in installations:
        if not isinstance(entry, Mapping) or entry.get("id") != installation_id:
            continue
        account = entry.get("account")
        if not isinstance(account, Mapping):
            return None
        login, kind, number = account.get("login"), account.get("type"), account.get("id")
        if isinstance(login, str) and isinstance(kind, str) and isinstance(number, int):
            return GitHubAccount(login, kind, number)
    return None


def require_administrator(
    user: GitHubUser, account: GitHubAccount, membership: Mapping[str, Any] | None
) -> None:
    """The GitHub user must administer the installation's account: be that user
    account, or an active admin (owner) of that GitHub organization."""
    if account.kind == "User":
        if account.id == user.id:
            return
        raise GitHubConnectRefused(
            "not_account_owner",
            f"the installation is on the GitHub account {account.login}, "
            f"and you are signed in to GitHub as {user.login}",
        )
    if account.kind == "Organization":
        if (
            membership is not None
            and membership.get("state") == "active"
            and membership.get("role") == "admin"
        ):
            return
        raise GitHubConnectRefused(
            "not_organization_owner",
            f"only an owner of the GitHub organization {account.login} can connect its "
            f"installation, and {user.login} is not one",
        )
    raise GitHubConnectRefused(
        "unsupported_account", f"installations on {account.kind} accounts cannot be connected"
    )


def connect_cookie(secret: str, *, secure: bool, max_age: int) -> str:
    # Lax, not Strict: the callback is a top-level navigation from GitHub's site, and a
    # Strict cookie would not be sent with it.
    flags = f"Path={CONNECT_COOKIE_PATH}; HttpOnly; SameSite=Lax; Max-Age={max_age}"
    return f"{CONNECT_COOKIE}={secret}; {flags}{'; Secure' if secure else ''}"


def cleared_connect_cookie(*, secure: bool) -> str:
    return connect_cookie("", secure=secure, max_age=0)


@dataclass(frozen=True)
class ConnectFlow:
    """A connect flow between its start and GitHub's callback: who started it, from which
    dashboard session, for which installation (if named), until when."""

    organization_id: str
    started_by: str
    session_hash: str
    installation_id: int | None
    valid_until: datetime


@dataclass(frozen=True)
class AuditNote:
    """The audit event an installation's change writes with it."""

    event_id: str
    type: str
    actor: str
    details: dict[str, str]
