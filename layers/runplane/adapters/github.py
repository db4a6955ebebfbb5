"""GitHub's REST API as a GitHub App: installation tokens, commit archives, commit statuses,
pull request comments and check runs.

The App authenticates with a short RS256 JWT signed by its private key; an
installation token is then exchanged for each task and lives only in that
task's memory. Neither ever reaches a log line, an error message or storage.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from runplane.domain.errors import GitHubUnavailable, SourceRefused
from runplane.domain.path_filters import (
    FALLBACK_TRUNCATED,
    MAX_COMPARE_FILES,
    MAX_PULL_REQUEST_FILES,
    ChangedFiles,
)

logger = logging.getLogger(__name__)

_CHUNK = 64 * 1024
# GitHub accepts App JWTs of at most ten minutes; issued a minute back for clock skew.
_JWT_SKEW_SECONDS = 60
_JWT_LIFETIME_SECONDS = 540
_ACCEPT = "application/vnd.github+json"
_API_VERSION = "2022-11-28"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Archive:
    sha256: str
    size: int


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are followed by hand so the token never travels to another host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class GitHubApp:
    def __init__(
        self, api_url: str, app_id: str, private_key_pem: str, *, timeout: float = 20.0
    ) -> None:
        self._api = api_url.rstrip("/")
        self._app_id = app_id
        key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("the GitHub App private key must be an RSA key")
        self._key = key
        self._timeout = timeout
        self._opener = urllib.request.build_opener(NoRedirect)

    def app_jwt(self, now: datetime) -> str:
        issued = int(now.timestamp()) - _JWT_SKEW_SECONDS
        header = {"alg": "RS256", "typ": "JWT"}
        claims = {"iat": issued, "exp": issued + _JWT_LIFETIME_SECONDS, "iss": self._app_id}
        signing_input = ".".join(
            _b64(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)
        )
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def installation_token(self, installation_id: int, now: datetime) -> str:
        reply = self._json(
            "POST",
            f"/app/installations/{int(installation_id)}/access_tokens",
            f"Bearer {self.app_jwt(now)}",
            {},
        )
        token = reply.get("token")
        if not isinstance(token, str) or not token:
            raise GitHubUnavailable("GitHub returned no installation token")
        return token

    def download_archive(
        self, token: str, repository: str, sha: str, sink: IO[bytes], max_bytes: int
    ) -> Archive:
        """Stream the commit's tarball into ``sink``, hashing it; refused past ``max_bytes``."""
        path = f"/repos/{_repo(repository)}/tarball/{urllib.parse.quote(sha, safe='')}"
        url = self._api + path
        for _ in range(3):
            request = self._request("GET", url, f"token {token}")
            try:
                response = self._opener.open(request, timeout=self._timeout)
            except urllib.error.HTTPError as error:
                location = error.headers.get("Location") if error.code in {301, 302, 307} else None
                if location is None:
                    raise github_failure(error, f"the archive of {repository}@{sha[:12]}") from None
                # GitHub redirects to a short-lived signed URL that needs no token.
                url = urllib.parse.urljoin(url, location)
                token = ""
                continue
            except OSError as error:
                raise GitHubUnavailable(f"GitHub is unreachable ({type(error).__name__})") from None
            return _stream(response, sink, max_bytes)
        raise GitHubUnavailable("GitHub redirected the archive download too many times")

    def post_status(self, token: str, repository: str, sha: str, status: Mapping[str, str]) -> None:
        path = f"/repos/{_repo(repository)}/statuses/{urllib.parse.quote(sha, safe='')}"
        self._json("POST", path, f"token {token}", dict(status))

    def pull_request_files(self, token: str, repository: str, number: int) -> ChangedFiles:
        """The files a pull request changes (``GET .../pulls/{n}/files``, 100 a page);
        truncated when GitHub's cap of 3,000 is reached."""
        paths: list[str] = []
        pages = MAX_PULL_REQUEST_FILES // _FILES_PAGE
        for page in range(1, pages + 1):
            path = (
                f"/repos/{_repo(repository)}/pulls/{int(number)}/files"
                f"?per_page={_FILES_PAGE}&page={page}"
            )
            listed = self._get_list(path, token)
            paths.extend(_file_paths(listed))
            if len(listed) < _FILES_PAGE:
                return ChangedFiles(tuple(paths))
        return ChangedFiles(tuple(paths), FALLBACK_TRUNCATED)

    def compare_files(self, token: str, repository: str, base: str, head: str) -> ChangedFiles:
        """The files changed between two commits (``GET .../compare/{base}...{head}``);
        truncated when GitHub's cap of 300 is reached."""
        spec = f"{urllib.parse.quote(base, safe='')}...{urllib.parse.quote(head, safe='')}"
        reply = self._json_get(f"/repos/{_repo(repository)}/compare/{spec}", token)
        files = reply.get("files") if isinstance(reply, dict) else None
        listed = files if isinstance(files, list) else []
        fallback = FALLBACK_TRUNCATED if len(listed) >= MAX_COMPARE_FILES else None
        return ChangedFiles(tuple(_file_paths(listed)), fallback)

    # -- pull request comments and check runs -------------------------------------------

    def create_comment(self, token: str, repository: str, number: int, body: str) -> int:
        path = f"/repos/{_repo(repository)}/issues/{int(number)}/comments"
        return _id(self._json("POST", path, f"token {token}", {"body": body}))

    def edit_comment(self, token: str, repository: str, comment_id: int, body: str) -> None:
        path = f"/repos/{_repo(repository)}/issues/comments/{int(comment_id)}"
        self._json("PATCH", path, f"token {token}", {"body": body})

    def find_comment(self, token: str, repository: str, number: int, marker: str) -> int | None:
        """The first comment (of the first 100) whose body starts with ``marker``."""
        path = f"/repos/{_repo(repository)}/issues/{int(number)}/comments?per_page=100"
        request = self._request("GET", self._api + path, f"token {token}")
        raw = send_list(self._opener, request, self._timeout, f"GET {path.split('?')[0]}")
        for comment in raw:
            body = comment.get("body") if isinstance(comment, dict) else None
            if isinstance(body, str) and body.startswith(marker):
                return _id(comment)
        return None

    def create_check_run(self, token: str, repository: str, check: Mapping[str, Any]) -> int:
        path = f"/repos/{_repo(repository)}/check-runs"
        return _id(self._json("POST", path, f"token {token}", dict(check)))

    def update_check_run(
        self, token: str, repository: str, check_run_id: int, check: Mapping[str, Any]
    ) -> None:
        path = f"/repos/{_repo(repository)}/check-runs/{int(check_run_id)}"
        self._json("PATCH", path, f"token {token}", dict(check))

    # -- internals --------------------------------------------------------------------------

    def _json_get(self, path: str, token: str) -> Any:
        """GitHub's JSON answer to a GET (at most 4 MiB), whatever its shape."""
        request = self._request("GET", self._api + path, f"token {token}")
        what = f"GET {path.split('?')[0]}"
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read(4 * 1024 * 1024)
        except urllib.error.HTTPError as error:
            raise github_failure(error, what) from None
        except OSError as error:
            raise GitHubUnavailable(f"GitHub is unreachable ({type(error).__name__})") from None
        try:
            return json.loads(raw or b"null")
        except ValueError:
            raise GitHubUnavailable("GitHub answered with something other than JSON") from None

    def _get_list(self, path: str, token: str) -> list[Any]:
        listed = self._json_get(path, token)
        return listed if isinstance(listed, list) else []

    def _request(
        self, method: str, url: str, authorization: str, body: bytes | None = None
    ) -> urllib.request.Request:
        headers = {
            "Accept": _ACCEPT,
            "X-GitHub-Api-Version": _API_VERSION,
            "User-Agent": "runplane",
        }
        if authorization.split(" ", 1)[-1]:
            headers["Authorization"] = authorization
        if body is not None:
            headers["Content-Type"] = "application/json"
        return urllib.request.Request(url, data=body, method=method, headers=headers)  # noqa: S310

    def _json(
        self, method: str, path: str, authorization: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        request = self._request(method, self._api + path, authorization, json.dumps(body).encode())
        return send_json(
            self._opener, request, self._timeout, f"{method} {path.split('?')[0]}", lambda e: e
        )


def send_json(
    opener: urllib.request.OpenerDirector,
    request: urllib.request.Request,
    timeout: float,
    what: str,
    refused: Callable[[Exception], Exception],
) -> dict[str, Any]:
    """GitHub's JSON answer to ``request`` (at most 1 MiB; not an object reads as {}).
    Worth-retrying failures are ``GitHubUnavailable``; ``refused`` maps the others."""
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = response.read(1024 * 1024)
    except urllib.error.HTTPError as error:
        failure = github_failure(error, what)
        raise (failure if isinstance(failure, GitHubUnavailable) else refused(failure)) from None
    except OSError as error:
        raise GitHubUnavailable(f"GitHub is unreachable ({type(error).__name__})") from None
    try:
        parsed = json.loads(raw or b"{}")
    except ValueError:
        raise GitHubUnavailable("GitHub answered with something other than JSON") from None
    return parsed if isinstance(parsed, dict) else {}


_FILES_PAGE = 100


def _file_paths(listed: list[Any]) -> list[str]:
    """The paths of GitHub's file entries; a rename counts its old name too."""
    paths: list[str] = []
    for entry in listed:
        if not isinstance(entry, dict):
            continue
        for key in ("filename", "previous_filename"):
            value = entry.get(key)
            if isinstance(value, str) and value:
                paths.append(value)
    return paths


def send_list(
    opener: urllib.request.OpenerDirector,
    request: urllib.request.Request,
    timeout: float,
    what: str,
) -> list[Any]:
    """GitHub's JSON array answer to ``request`` (at most 1 MiB; anything else reads as [])."""
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = response.read(1024 * 1024)
    except urllib.error.HTTPError as error:
        raise github_failure(error, what) from None
    except OSError as error:
        raise GitHubUnavailable(f"GitHub is unreachable ({type(error).__name__})") from None
    try:
        parsed = json.loads(raw or b"[]")
    except ValueError:
        raise GitHubUnavailable("GitHub answered with something other than JSON") from None
    return parsed if isinstance(parsed, list) else []


def _id(reply: Mapping[str, Any]) -> int:
    found = reply.get("id")
    if not isinstance(found, int) or isinstance(found, bool):
        raise GitHubUnavailable("GitHub answered without the ID of what it created")
    return found


def _repo(repository: str) -> str:
    owner, name = repository.split("/", 1)
    return f"{urllib.parse.quote(owner, safe='')}/{urllib.parse.quote(name, safe='')}"


def github_failure(error: urllib.error.HTTPError, what: str) -> Exception:
    # The body may echo the request; only the status is reported.
    if error.code in {429, 500, 502, 503, 504} or (
        error.code == 403 and error.headers.get("X-RateLimit-Remaining") == "0"
    ):
        return GitHubUnavailable(f"GitHub answered {error.code} for {what}; retrying later")
    return SourceRefused(f"GitHub refused {what} ({error.code})")


def _stream(response: Any, sink: IO[bytes], max_bytes: int) -> Archive:
    digest = hashlib.sha256()
    size = 0
    with response:
        while chunk := response.read(_CHUNK):
            size += len(chunk)
            if size > max_bytes:
                raise SourceRefused(f"the commit archive is larger than {max_bytes} bytes")
            digest.update(chunk)
            sink.write(chunk)
    sink.flush()
    return Archive(digest.hexdigest(), size)
