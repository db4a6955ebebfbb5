"""GitHub as the signed-in person sees it, for connecting an installation: the App's
user authorization (code → user access token) and the three reads that prove the
person administers an installation's account.

The user access token lives only in the memory of one callback; it is never
stored, logged or put in an error message, and it is revoked (best effort) once
the checks are done.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from runplane.adapters.github import NoRedirect, send_json
from runplane.domain.errors import GitHubConnectRefused, GitHubUnavailable
from runplane.domain.github_connect import GitHubUser

logger = logging.getLogger(__name__)

_ACCEPT = "application/vnd.github+json"
_API_VERSION = "2022-11-28"
_PAGE = 100
# A person administering more installations of one App than this is not expected.
_MAX_PAGES = 10


class GitHubUserAuthorization:
    def __init__(
        self,
        web_url: str,
        api_url: str,
        client_id: str,
        client_secret: str,
        *,
        timeout: float = 15.0,
    ) -> None:
        self._web = web_url.rstrip("/")
        self._api = api_url.rstrip("/")
        self._client_id = client_id
        self._client_secret = client_secret
        self._timeout = timeout
        self._opener = urllib.request.build_opener(NoRedirect)

    def exchange(self, code: str, verifier: str) -> str:
        """Redeem the authorization code (with its PKCE verifier) for a user token."""
        form = urllib.parse.urlencode(
            {
                "client_id": self._client_id,
                "client_secret": self._client_secret,
                "code": code,
                "code_verifier": verifier,
            }
        ).encode()
        request = urllib.request.Request(  # noqa: S310 - the configured GitHub
            f"{self._web}/login/oauth/access_token",
            data=form,
            method="POST",
            headers={
                "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded",
                "User-Agent": "runplane",
            },
        )
        reply = self._send(request, "the authorization code exchange")
        token = reply.get("access_token")
        if not isinstance(token, str) or not token:
            # GitHub answers 200 with an ``error`` for a bad, used or expired code.
            raise GitHubConnectRefused(
                "code_refused", "GitHub did not accept the authorization; start again"
            )
        return token

    def user(self, token: str) -> GitHubUser:
        reply = self._get(token, "/user")
        login, number = reply.get("login"), reply.get("id")
        if not isinstance(login, str) or not isinstance(number, int):
            raise GitHubUnavailable("GitHub did not say who is signed in")
        return GitHubUser(login, number)

    def installations(self, token: str) -> list[Mapping[str, Any]]:
        """The App's installations this person can access (``GET /user/installations``)."""
        found: list[Mapping[str, Any]] = []
        for page in range(1, _MAX_PAGES + 1):
            reply = self._get(token, f"/user/installations?per_page={_PAGE}&page={page}")
            listed = reply.get("installations")
            if not isinstance(listed, list):
                raise GitHubUnavailable("GitHub did not list the installations")
            found.extend(entry for entry in listed if isinstance(entry, Mapping))
            if len(listed) < _PAGE:
                break
        return found

    def membership(self, token: str, organization: str) -> Mapping[str, Any] | None:
        """This person's membership of a GitHub organization, or None if not a member."""
        path = f"/user/memberships/orgs/{urllib.parse.quote(organization, safe='')}"
        try:
            return self._get(token, path)
        except GitHubConnectRefused:
            return None

    def revoke(self, token: str) -> None:
        """Revoke the user token (``DELETE /applications/{client_id}/token``); a failure
        only leaves it to expire on its own."""
        basic = base64.b64encode(f"{self._client_id}:{self._client_secret}".encode()).decode()
        request = urllib.request.Request(  # noqa: S310 - the configured GitHub
            f"{self._api}/applications/{urllib.parse.quote(self._client_id, safe='')}/token",
            data=json.dumps({"access_token": token}).encode(),
            method="DELETE",
            headers=self._headers(f"Basic {basic}") | {"Content-Type": "application/json"},
        )
        try:
            with self._opener.open(request, timeout=self._timeout):
                pass
        except OSError as error:
            logger.info("revoking a GitHub user token failed (%s)", type(error).__name__)

    # -- internals --------------------------------------------------------------------------

    def _headers(self, authorization: str) -> dict[str, str]:
        return {
            "Accept": _ACCEPT,
            "X-GitHub-Api-Version": _API_VERSION,
            "User-Agent": "runplane",
            "Authorization": authorization,
        }

    def _get(self, token: str, path: str) -> dict[str, Any]:
        request = urllib.request.Request(  # noqa: S310 - the configured GitHub
            self._api + path, method="GET", headers=self._headers(f"Bearer {token}")
        )
        return self._send(request, f"GET {path.split('?')[0]}")

    def _send(self, request: urllib.request.Request, what: str) -> dict[str, Any]:
        def refused(failure: Exception) -> Exception:
            return GitHubConnectRefused("github_refused", f"GitHub refused {what}")

        return send_json(self._opener, request, self._timeout, what, refused)
