"""The CLI's saved sign-in (``runplane login``, docs/sso.md): a credentials file
holding the control plane's URL, the organization, the ID token, the refresh token
and when the ID token expires.

The file is created with mode 0600 (never wider, not for a moment) and replaced
atomically; a sign-in file that others can read is refused rather than used. The
refresh token renews the ID token when the API says it has expired; a refused
refresh means signing in again.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from runplane.cli_input import InputError

TIMEOUT_SECONDS = 30
MAX_RESPONSE_BYTES = 64 * 1024
# What a sign-in file holds beyond url, organization and token.
REFRESH_TOKEN = "refresh_token"
TOKEN_ENDPOINT = "token_endpoint"
CLIENT_ID = "client_id"
EXPIRES_AT = "expires_at"


def write_private(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON to ``path``, readable by its owner only, atomically."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp creates the file with mode 0600: the tokens are never readable by others.
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(dict(data), out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def check_private(path: Path) -> None:
    """Refuse a sign-in file that anyone but its owner may read or write."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise InputError(
            f"{path} holds a sign-in and others may read it (mode {mode:04o}): "
            f"run `chmod 600 {path}`, or `runplane logout` and sign in again"
        )


def is_sign_in(saved: Mapping[str, Any]) -> bool:
    return isinstance(saved.get(REFRESH_TOKEN), str)


def refresher(path: Path, saved: Mapping[str, Any]) -> Callable[[], str] | None:
    """For a sign-in file: check it is private, and return what renews its token
    (saving the new one). None for an API-token file."""
    if not is_sign_in(saved):
        return None
    check_private(path)

    def refresh() -> str:
        answer = _token_request(
            str(saved[TOKEN_ENDPOINT]),
            {
                "grant_type": "refresh_token",
                "client_id": str(saved[CLIENT_ID]),
                REFRESH_TOKEN: str(saved[REFRESH_TOKEN]),
            },
        )
        id_token = answer.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise InputError("the sign-in service's answer has no ID token: sign in again")
        renewed = {**saved, "token": id_token, EXPIRES_AT: expires_at(answer)}
        write_private(path, renewed)
        return id_token

    return refresh


def expires_at(answer: Mapping[str, Any]) -> int:
    lifetime = answer.get("expires_in")
    seconds = lifetime if isinstance(lifetime, int) and lifetime > 0 else 3600
    return int(time.time()) + seconds


def _token_request(endpoint: str, form: Mapping[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - the hosted UI the control plane names
        endpoint,
        data=urlencode(form).encode("ascii"),
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            raw = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as error:
        status = error.code
        error.close()
        if status in (400, 401):
            raise InputError(
                "your sign-in has expired or was revoked: sign in again with `runplane login`"
            ) from None
        raise InputError(f"the sign-in service answered HTTP {status}; try again") from None
    try:
        value = json.loads(raw[:MAX_RESPONSE_BYTES])
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise InputError("the sign-in service's answer is not JSON; try again")
    return value


def token_request(endpoint: str, form: Mapping[str, str]) -> dict[str, Any]:
    """POST a form to the hosted UI's token endpoint (a refusal is an InputError)."""
    return _token_request(endpoint, form)
