"""A fake GitHub served over real HTTP on 127.0.0.1: App token exchange (checking the
App JWT's RS256 signature and claims), commit tarballs and commit statuses."""

from __future__ import annotations

import base64
import gzip
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

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

TOKEN_PATH = re.compile(r"^/app/installations/(\d+)/access_tokens$")
TARBALL_PATH = re.compile(r"^/repos/([^/]+)/([^/]+)/tarball/([0-9a-f]{40})$")
STATUS_PATH = re.compile(r"^/repos/([^/]+)/([^/]+)/statuses/([0-9a-f]{40})$")


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

    def trust(self, app_id: str, public_key_pem: str) -> None:
        key = serialization.load_pem_public_key(public_key_pem.encode())
        assert isinstance(key, rsa.RSAPublicKey)
        self.app_id, self.public_key = app_id, key

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

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        auth = self.headers.get("Authorization", "")
        github = self.github
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

    def do_GET(self) -> None:
        github = self.github
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
