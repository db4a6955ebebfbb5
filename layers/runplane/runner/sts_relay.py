"""The engine's way to a non-default STS (the embedded stack's), asking only who it is.

In AWS the engine reaches STS itself, over the sandbox's egress. On the embedded stack
its sandbox may have no network at all, and the STS that issued its credentials is the
stack's own AWS emulator, which serves every other service of the stack (its table,
its bucket) at the same address and checks no signature. So the runner relays exactly
one kind of call from the engine's loopback to it: an STS ``GetCallerIdentity``
(signed for ``sts``, action named in the form body), which is what a provider does to
learn which role it runs as. Anything else is refused there.
"""

from __future__ import annotations

import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RELAYED_ACTIONS = frozenset({"GetCallerIdentity"})
_MAX_BODY = 16 * 1024
_TIMEOUT = 30
# A SigV4 authorization's credential scope: KEY/DATE/REGION/SERVICE/aws4_request.
_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/[a-z0-9-]+/([a-z0-9-]+)/aws4_request")


def relayed(headers: Any, body: bytes) -> bool:
    """Whether a call is an STS call this relay forwards."""
    scope = _SCOPE.search(str(headers.get("Authorization") or ""))
    if scope is None or scope.group(1) != "sts":
        return False
    try:
        form = urllib.parse.parse_qs(body.decode("ascii"), strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        return False
    return form.get("Action") is not None and set(form["Action"]) <= RELAYED_ACTIONS


class StsRelay:
    """Relays ``GetCallerIdentity`` from ``127.0.0.1:<port>`` to ``upstream``."""

    def __init__(
        self,
        upstream: str,
        *,
        bind: Callable[[Callable[[], _Server]], _Server] | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {upstream!r}")
        self.upstream = upstream.rstrip("/") + "/"
        handler = type("BoundStsHandler", (_StsHandler,), {"relay": self})
        listen = bind or (lambda make: make())
        self._server = listen(lambda: _Server(("127.0.0.1", 0), handler))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/"

    def start(self) -> StsRelay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class _StsHandler(BaseHTTPRequestHandler):
    relay: StsRelay
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if self.path != "/" or not 0 <= length <= _MAX_BODY:
            self._reply(400, b"")
            return
        body = self.rfile.read(length)
        if not relayed(self.headers, body):
            self._reply(403, b"only sts:GetCallerIdentity is relayed\n")
            return
        kept = {
            key: value
            for key, value in self.headers.items()
            if key.lower()
            in {"authorization", "content-type", "x-amz-date", "x-amz-security-token"}
        }
        request = urllib.request.Request(  # noqa: S310 - the STS the control plane named
            self.relay.upstream, data=body, method="POST", headers=kept
        )
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT) as answer:  # noqa: S310
                self._reply(answer.status, answer.read(), answer.headers.get("Content-Type"))
        except urllib.error.HTTPError as refused:
            self._reply(refused.code, refused.read(), refused.headers.get("Content-Type"))
        except OSError:
            self._reply(502, b"STS could not be reached\n")

    def do_GET(self) -> None:
        self._reply(403, b"only sts:GetCallerIdentity is relayed\n")

    do_PUT = do_DELETE = do_PATCH = do_GET

    def _reply(self, status: int, body: bytes, content_type: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type or "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
