"""A fake GitHub served over real HTTP on 127.0.0.1: App token exchange (checking the
App JWT's RS256 signature and claims), commit tarballs and commit statuses; and, for
connecting installations, the App's web pages (installation and user authorization,
signed in as the GitHub user a test's browser names in ``X-Fake-GitHub-User``), the
code exchange (checking the client secret and the PKCE verifier) and the user reads
(``/user``, ``/user/installations``, ``/user/memberships/orgs/{org}``)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
import secrets
import tarfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.github_fake_reviews import ReviewApi

TOKEN_PATH = re.compile(r"^/app/installations/(\d+)/access_tokens$")
TARBALL_PATH = re.compile(r"^/repos/([^/]+)/([^/]+)/tarball/([0-9a-f]{40})$")
STATUS_PATH = re.compile(r"^/repos/([^/]+)/([^/]+)/statuses/([0-9a-f]{40})$")
MEMBERSHIP_PATH = re.compile(r"^/user/memberships/orgs/([^/?]+)$")
INSTALL_PATH = re.compile(r"^/apps/([^/]+)/installations/new$")
REVOKE_PATH = re.compile(r"^/applications/([^/]+)/token$")
PULL_FILES_PATH = re.compile(r"^/repos/([^/]+)/([^/]+)/pulls/(\d+)/files$")
COMPARE_PATH = re.compile(r"^/repos/([^/]+)/([^/]+)/compare/([0-9a-f]{40})\.\.\.([0-9a-f]{40})$")
# A browser's header naming who is signed in to the fake's web pages.
USER_HEADER = "X-Fake-GitHub-User"
# Which installation the fake's installation page makes (a test's choice).
INSTALL_HEADER = "X-Fake-GitHub-Install"


@dataclass
class Account:
    login: str
    type: str  # "Organization" or "User"
    id: int
    owners: set[str] = field(default_factory=set)
    members: set[str] = field(default_factory=set)


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def tarball(prefix: str, files: dict[str, str]) -> bytes:
    """A GitHub-style commit archive: everything under one ``prefix/`` directory."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        root = tarfile.TarInfo(prefix)
        root.type = tarfile.DIRTYPE
        root.mode = 0o755
        tar.addfile(root)
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{prefix}/{name}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class FakeGitHub:
    app_id: str | None = None
    public_key: rsa.RSAPublicKey | None = None
    archives: dict[tuple[str, str], bytes] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    refused_jwts: int = 0
    downloads: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    # The App's OAuth client and where GitHub sends browsers back to.
    client_id: str | None = None
    client_secret: str | None = None
    slug: str | None = None
    callback_url: str | None = None
    accounts: dict[str, Account] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)
    installations: dict[int, str] = field(default_factory=dict)
    codes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    user_tokens: dict[str, str] = field(default_factory=dict)
    revoked: list[str] = field(default_factory=list)
    authorizations: int = 0
    # The files pull requests change, and pushes' comparisons (base, head): path filters.
    pull_request_files: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    comparisons: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    reviews: ReviewApi = field(default_factory=ReviewApi)

    def trust(self, app_id: str, public_key_pem: str) -> None:
        key = serialization.load_pem_public_key(public_key_pem.encode())
        assert isinstance(key, rsa.RSAPublicKey)
        self.app_id, self.public_key = app_id, key

    def register_client(
        self, client_id: str, client_secret: str, slug: str, callback_url: str
    ) -> None:
        self.client_id, self.client_secret = client_id, client_secret
        self.slug, self.callback_url = slug, callback_url

    def user(self, login: str) -> int:
        with self.lock:
            return self.users.setdefault(login, 100_000 + len(self.users))

    def organization(
        self, login: str, *, owners: tuple[str, ...] = (), members: tuple[str, ...] = ()
    ) -> Account:
        """A GitHub organization with these owners (admins) and plain members."""
        for person in (*owners, *members):
            self.user(person)
        with self.lock:
            account = self.accounts.setdefault(
                login, Account(login, "Organization", 500_000 + len(self.accounts))
            )
            account.owners |= set(owners)
            account.members |= set(members)
            return account

    def install(self, installation_id: int, account: str) -> None:
        """The App installed on ``account`` (a user login, or an organization made first)."""
        with self.lock:
            known = account in self.accounts
        if not known:
            number = self.user(account)
            with self.lock:
                self.accounts[account] = Account(account, "User", number, owners={account})
        with self.lock:
            self.installations[installation_id] = account

    def reachable(self, login: str) -> list[dict[str, Any]]:
        """The installations ``login`` can reach: owners and members of the account."""
        with self.lock:
            found = []
            for number, name in sorted(self.installations.items()):
                account = self.accounts[name]
                if login in account.owners | account.members:
                    found.append(
                        {
                            "id": number,
                            "account": {"login": name, "type": account.type, "id": account.id},
                        }
                    )
            return found

    def add_commit(self, repository: str, sha: str, files: dict[str, str]) -> bytes:
        owner, name = repository.split("/")
        archive = tarball(f"{owner}-{name}-{sha[:7]}", files)
        self.archives[(repository.lower(), sha)] = archive
        return archive

    def statuses_for(self, sha: str) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.statuses if s["sha"] == sha]

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(_Handler):
            github = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    # -- checks --------------------------------------------------------------------------

    def app_jwt_valid(self, authorization: str) -> bool:
        if not authorization.startswith("Bearer ") or self.public_key is None:
            return False
        try:
            head, claims, signature = authorization[len("Bearer ") :].split(".")
            self.public_key.verify(
                _unb64(signature),
                f"{head}.{claims}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
            header: dict[str, Any] = json.loads(_unb64(head))
            body: dict[str, Any] = json.loads(_unb64(claims))
        except (ValueError, InvalidSignature):
            return False
        now = time.time()
        return bool(
            header.get("alg") == "RS256"
            and body.get("iss") == self.app_id
            and body["iat"] <= now + 60
            and now < body["exp"] <= body["iat"] + 600
        )

    def installation_of(self, authorization: str) -> int | None:
        token = authorization.removeprefix("token ").removeprefix("Bearer ")
        with self.lock:
            return self.tokens.get(token)

    def user_of(self, authorization: str) -> str | None:
        token = authorization.removeprefix("Bearer ").removeprefix("token ")
        with self.lock:
            return self.user_tokens.get(token)

    def issue_code(self, login: str, challenge: str | None) -> str:
        code = secrets.token_hex(10)
        with self.lock:
            self.codes[code] = (login, challenge)
            self.authorizations += 1
        return code

    def redeem(self, form: dict[str, str]) -> dict[str, Any]:
        if form.get("client_id") != self.client_id or form.get("client_secret") != (
            self.client_secret
        ):
            return {"error": "incorrect_client_credentials"}
        with self.lock:
            found = self.codes.pop(form.get("code", ""), None)
        if found is None:
            return {"error": "bad_verification_code"}
        login, challenge = found
        if challenge is not None:
            verifier = form.get("code_verifier", "")
            digest = hashlib.sha256(verifier.encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                return {"error": "bad_verification_code"}
        token = "ghu_" + secrets.token_urlsafe(24)
        with self.lock:
            self.user_tokens[token] = login
        return {"access_token": token, "token_type": "bearer", "scope": ""}


class _Handler(BaseHTTPRequestHandler):
    github: FakeGitHub

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        auth = self.headers.get("Authorization", "")
        github = self.github
        if self.path == "/login/oauth/access_token":
            form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            self._reply(200, github.redeem(form))
            return
        if match := TOKEN_PATH.match(self.path):
            if not github.app_jwt_valid(auth):
                with github.lock:
                    github.refused_jwts += 1
                self._reply(401, {"message": "A JSON web token could not be decoded"})
                return
            token = "ghs_" + secrets.token_urlsafe(24)
            with github.lock:
                github.tokens[token] = int(match.group(1))
            self._reply(201, {"token": token, "expires_at": "2099-01-01T00:00:00Z"})
            return
        if self._review(raw):
            return
        if match := STATUS_PATH.match(self.path):
            if github.installation_of(auth) is None:
                self._reply(401, {"message": "Bad credentials"})
                return
            body = json.loads(raw or b"{}")
            with github.lock:
                github.statuses.append(
                    {"repository": f"{match.group(1)}/{match.group(2)}", "sha": match.group(3)}
                    | body
                )
            self._reply(201, body)
            return
        self._reply(404, {"message": "Not Found"})

    def _review(self, raw: bytes) -> bool:
        """Comments and check runs (``github_fake_reviews``), for an installation token."""
        answer = self.github.reviews.handle(self.command, self.path, raw)
        if answer is None:
            return False
        if self.github.installation_of(self.headers.get("Authorization", "")) is None:
            self._reply(401, {"message": "Bad credentials"})
        else:
            self._reply(*answer)
        return True

    def do_PATCH(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._review(raw):
            self._reply(404, {"message": "Not Found"})

    def do_DELETE(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        github = self.github
        expected = base64.b64encode(f"{github.client_id}:{github.client_secret}".encode())
        if REVOKE_PATH.match(self.path) and self.headers.get("Authorization") == (
            f"Basic {expected.decode()}"
        ):
            token = json.loads(raw or b"{}").get("access_token", "")
            with github.lock:
                github.user_tokens.pop(token, None)
                github.revoked.append(token)
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._reply(404, {"message": "Not Found"})

    def _web(self, path: str, query: dict[str, str]) -> bool:
        """GitHub's web pages, for a browser signed in as ``X-Fake-GitHub-User``."""
        github = self.github
        login = self.headers.get(USER_HEADER)
        if path == "/login/oauth/authorize":
            if login is None or query.get("client_id") != github.client_id:
                self._reply(403, {"message": "not signed in, or an unknown client"})
                return True
            if query.get("code_challenge_method", "S256") != "S256":
                self._reply(400, {"message": "only S256"})
                return True
            code = github.issue_code(login, query.get("code_challenge"))
            answer = urlencode({"code": code, "state": query.get("state", "")})
            self._redirect(f"{github.callback_url}?{answer}")
            return True
        if match := INSTALL_PATH.match(path):
            chosen = self.headers.get(INSTALL_HEADER)
            if login is None or match.group(1) != github.slug or chosen is None:
                self._reply(404, {"message": "Not Found"})
                return True
            github.install(int(chosen), self.headers.get("X-Fake-GitHub-Account") or login)
            answer = urlencode(
                {"installation_id": chosen, "setup_action": "install", "state": query["state"]}
            )
            self._redirect(f"{github.callback_url}?{answer}")
            return True
        return False

    def _user_api(self, path: str, query: dict[str, str]) -> bool:
        github = self.github
        if path not in ("/user", "/user/installations") and not MEMBERSHIP_PATH.match(path):
            return False
        login = github.user_of(self.headers.get("Authorization", ""))
        if login is None:
            self._reply(401, {"message": "Bad credentials"})
            return True
        if path == "/user":
            self._reply(200, {"login": login, "id": github.user(login)})
        elif path == "/user/installations":
            listed = github.reachable(login)
            page, size = int(query.get("page", "1")), int(query.get("per_page", "30"))
            chunk = listed[(page - 1) * size : page * size]
            self._reply(200, {"total_count": len(listed), "installations": chunk})
        elif match := MEMBERSHIP_PATH.match(path):
            with github.lock:
                account = github.accounts.get(match.group(1))
            if account is None or login not in account.owners | account.members:
                self._reply(404, {"message": "Not Found"})
            else:
                role = "admin" if login in account.owners else "member"
                self._reply(200, {"state": "active", "role": role})
        return True

    def _changed_files(self, path: str, query: dict[str, str]) -> bool:
        """GitHub's lists of changed files: a pull request's (paged) and a comparison's
        (at most 300), as entries with ``filename``."""
        github = self.github
        pulled, compared = PULL_FILES_PATH.match(path), COMPARE_PATH.match(path)
        if pulled is None and compared is None:
            return False
        if github.installation_of(self.headers.get("Authorization", "")) is None:
            self._reply(401, {"message": "Bad credentials"})
            return True
        if pulled is not None:
            repository = f"{pulled.group(1)}/{pulled.group(2)}".lower()
            files = github.pull_request_files.get((repository, int(pulled.group(3))))
            if files is None:
                self._reply(404, {"message": "Not Found"})
                return True
            size = min(int(query.get("per_page", "30")), 100)
            page = int(query.get("page", "1"))
            listed = files[:3000][(page - 1) * size : page * size]
            self._reply(200, [{"filename": name, "status": "modified"} for name in listed])
            return True
        assert compared is not None
        repository = f"{compared.group(1)}/{compared.group(2)}".lower()
        found = github.comparisons.get((repository, compared.group(3), compared.group(4)))
        if found is None:
            self._reply(404, {"message": "Not Found"})
        else:
            self._reply(200, {"files": [{"filename": name} for name in found[:300]]})
        return True

    def do_GET(self) -> None:
        github = self.github
        split = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        if self._web(split.path, query) or self._user_api(split.path, query):
            return
        if self._changed_files(split.path, query):
            return
        if self._review(b""):
            return
        match = TARBALL_PATH.match(self.path)
        if match is None:
            self._reply(404, {"message": "Not Found"})
            return
        if github.installation_of(self.headers.get("Authorization", "")) is None:
            self._reply(401, {"message": "Bad credentials"})
            return
        key = (f"{match.group(1)}/{match.group(2)}".lower(), match.group(3))
        archive = github.archives.get(key)
        if archive is None:
            self._reply(404, {"message": "Not Found"})
            return
        with github.lock:
            github.downloads.append(match.group(3))
        self._reply(200, archive, "application/x-gzip")
