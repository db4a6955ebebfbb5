"""``runplane login`` and ``runplane logout``: single sign-on for the CLI (docs/sso.md).

Cognito has no device-code grant, so the CLI uses the authorization code flow with
PKCE and a loopback redirect (RFC 8252): it asks the control plane how to sign in
(``GET /api/v1/sign-in/config``: the hosted UI's endpoints, the public CLI app client
and the loopback callbacks it allows), listens on 127.0.0.1 on the first of those
ports that is free, prints the sign-in URL (and opens a browser when it can), takes
the one callback whose ``state`` matches, redeems the code with its verifier, and
saves the tokens in the credentials file (mode 0600, runplane.cli_credentials).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import secrets
import sys
import threading
import urllib.parse
import urllib.request
import webbrowser
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from runplane import cli_credentials
from runplane.cli_input import InputError
from runplane.client import ApiError, Client, Connection

Add = Callable[..., argparse.ArgumentParser]
CONFIG_PATH = "/api/v1/sign-in/config"
DEFAULT_TIMEOUT_SECONDS = 300
_SIGNED_IN_PAGE = (
    b"<!doctype html><title>Runplane</title><p>Signed in. You can close this tab and "
    b"return to the terminal.</p>"
)
_REFUSED_PAGE = b"<!doctype html><title>Runplane</title><p>Sign-in failed; see the terminal.</p>"


def add_parser(commands: Any, add: Add, default_credentials: Path) -> None:
    login = add(
        commands,
        "login",
        "sign in through your identity provider (single sign-on) and save the credential",
        _login,
        connected=False,
    )
    login.add_argument("--url", required=True, help="the control plane URL")
    login.add_argument(
        "--organization",
        help="the organization you expect to sign in to (default: the one you belong to)",
    )
    login.add_argument(
        "--credentials",
        default=str(default_credentials),
        help="where to save the credential, mode 0600 (default: %(default)s)",
    )
    login.add_argument(
        "--no-browser", action="store_true", help="print the sign-in URL only; open it yourself"
    )
    login.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT_SECONDS,
        help="seconds to wait for the browser (default: %(default)s)",
    )
    logout = add(
        commands,
        "logout",
        "forget the saved sign-in (the credentials file)",
        _logout,
        connected=False,
    )
    logout.add_argument(
        "--credentials",
        default=str(default_credentials),
        help="the credentials file to delete (default: %(default)s)",
    )


def _login(args: argparse.Namespace) -> int:
    url = str(args.url).rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InputError(f"--url {url!r} is not an http(s) URL")
    config = _sign_in_config(url)
    listener = _listen(config["redirect_uris"])
    try:
        verifier = secrets.token_urlsafe(48)
        state = secrets.token_urlsafe(24)
        nonce = secrets.token_urlsafe(24)
        authorize = _authorize_url(config, listener.redirect_uri, state, nonce, verifier)
        print(f"Open this URL in a browser to sign in:\n  {authorize}", file=sys.stderr)
        if not args.no_browser:
            webbrowser.open(authorize)
        code = listener.wait(state, args.timeout)
    finally:
        listener.close()
    answer = cli_credentials.token_request(
        config["token_endpoint"],
        {
            "grant_type": "authorization_code",
            "client_id": config["client_id"],
            "code": code,
            "redirect_uri": listener.redirect_uri,
            "code_verifier": verifier,
        },
    )
    id_token, refresh_token = answer.get("id_token"), answer.get("refresh_token")
    if not isinstance(id_token, str) or not isinstance(refresh_token, str):
        raise InputError("the sign-in service did not return the tokens; try again")
    if _claims(id_token).get("nonce") != nonce:
        raise InputError("the ID token does not answer this sign-in; try again")
    organization = _organization(url, id_token, args.organization)
    saved = {
        "url": url,
        "organization": organization,
        "token": id_token,
        cli_credentials.REFRESH_TOKEN: refresh_token,
        cli_credentials.EXPIRES_AT: cli_credentials.expires_at(answer),
        cli_credentials.TOKEN_ENDPOINT: config["token_endpoint"],
        cli_credentials.CLIENT_ID: config["client_id"],
    }
    path = Path(args.credentials)
    cli_credentials.write_private(path, saved)
    print(f"signed in to {organization} at {url}; credential saved in {path} (mode 0600)")
    return 0


def _logout(args: argparse.Namespace) -> int:
    path = Path(args.credentials)
    if path.exists():
        path.unlink()
        print(f"signed out: {path} removed")
    else:
        print(f"not signed in ({path} does not exist)")
    return 0


def _sign_in_config(url: str) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - the control plane the user named
        f"{url}{CONFIG_PATH}", headers={"Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            config = json.loads(response.read(64 * 1024))
    except urllib.error.HTTPError as error:
        error.close()
        if error.code == 404:
            raise InputError(
                f"{url} has no single sign-on for the CLI; use an API token (--token)"
            ) from None
        raise InputError(f"{url} answered HTTP {error.code} to {CONFIG_PATH}") from None
    except ValueError:
        raise InputError(f"{url}{CONFIG_PATH} is not JSON: is this a Runplane URL?") from None
    keys = ("authorize_endpoint", "token_endpoint", "client_id", "redirect_uris")
    if not isinstance(config, dict) or not all(config.get(k) for k in keys):
        raise InputError(f"{url}{CONFIG_PATH} is incomplete")
    return config


def _authorize_url(
    config: dict[str, Any], redirect_uri: str, state: str, nonce: str, verifier: str
) -> str:
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest())
    query = urllib.parse.urlencode(
        {
            "response_type": "code",
            "client_id": config["client_id"],
            "redirect_uri": redirect_uri,
            "scope": " ".join(config.get("scopes") or ["openid"]),
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge.rstrip(b"=").decode("ascii"),
            "code_challenge_method": "S256",
        }
    )
    return f"{config['authorize_endpoint']}?{query}"


def _claims(token: str) -> dict[str, Any]:
    """An ID token's claims, unverified: only to match the nonce (the control plane
    verifies the token on every call)."""
    try:
        payload = token.split(".")[1]
        decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _organization(url: str, id_token: str, expected: str | None) -> str:
    """The organization the signed-in person belongs to (the control plane decides)."""
    client = Client(Connection(url, id_token))
    try:
        listed = client._call("GET", "/api/v2/organizations")
    except ApiError as error:
        raise InputError(
            f"the control plane refused the sign-in (HTTP {error.status}): {error.detail}"
        ) from None
    names = [str(org.get("id")) for org in listed.get("data", []) if isinstance(org, dict)]
    if not names:
        raise InputError("you belong to no organization of this control plane")
    if expected is not None and expected not in names:
        raise InputError(f"you signed in to {', '.join(names)}, not {expected}")
    return expected or names[0]


class _Listener:
    """One loopback HTTP listener, waiting for one callback."""

    def __init__(self, server: HTTPServer, redirect_uri: str) -> None:
        self._server = server
        self.redirect_uri = redirect_uri
        self._answer: dict[str, str] = {}
        self._done = threading.Event()
        self._serving: threading.Thread | None = None

    def wait(self, state: str, timeout: int) -> str:
        listener = self

        class Callback(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                if parts.path != urllib.parse.urlsplit(listener.redirect_uri).path:
                    self.send_error(404)
                    return
                query = dict(urllib.parse.parse_qsl(parts.query))
                # Only the answer to this sign-in counts: another page's request is
                # refused and the wait goes on.
                if not secrets.compare_digest(query.get("state", ""), state):
                    self.send_error(400, "not this sign-in")
                    return
                ok = "code" in query
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(_SIGNED_IN_PAGE if ok else _REFUSED_PAGE)
                listener._answer = query
                listener._done.set()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server.RequestHandlerClass = Callback
        self._serving = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._serving.start()
        if not self._done.wait(timeout):
            raise InputError(f"no sign-in arrived within {timeout} seconds")
        answer = self._answer
        if "code" not in answer:
            why = answer.get("error", "no code")
            raise InputError(f"the identity provider did not sign you in ({why[:60]})")
        return answer["code"]

    def close(self) -> None:
        if self._serving is not None:
            self._server.shutdown()
        self._server.server_close()


def _listen(redirect_uris: list[str]) -> _Listener:
    """Listen on the first allowed loopback callback whose port is free."""
    for uri in redirect_uris:
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme != "http" or parts.hostname != "127.0.0.1" or parts.port is None:
            continue
        try:
            server = HTTPServer(("127.0.0.1", parts.port), BaseHTTPRequestHandler)
        except OSError:
            continue
        return _Listener(server, uri)
    raise InputError(
        "none of the sign-in callback ports is free on 127.0.0.1: " + ", ".join(redirect_uris)
    )
