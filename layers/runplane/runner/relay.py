"""The engine's way to the Cloud API: a relay on the sandbox's loopback that answers a
repeated read from the phase's own memory.

The engine's ``remote`` backend reads the same things again and again in one phase
(``init``, ``plan`` and ``show`` each start it afresh: ping, entitlement set, workspace,
current state version, the state itself), and each read is a round trip through the
gateway, the authorizer and the Cloud API. The relay forwards every call unchanged
(method, path, body, the engine's own credentials) and keeps the answer of a read of
:data:`REPEATABLE_READS` that found its resource or found that it does not exist; the
same read is then answered from that copy until the engine sends anything but a GET,
which forgets every copy (a lock, a state upload, an unlock: what the engine reads after
a write comes from the control plane). So the sandbox gets no byte it had not already
been given in this phase, and every write, with its authority and fence, is checked by
the control plane as before.

A relay told to (``first_reads``) asks the Cloud API, when the engine first reads
anything but the ping, for the answers to all the reads a phase's engine starts with,
in one call made with the engine's own credentials, and keeps each as if the engine
had read it: one call instead of four or five, each answer the one its own route
gives. A relay whose call is refused relays the engine's reads one by one, as before.

One write changes no state: the lock of a phase whose run took the workspace's apply
lock before its sandbox started (an apply, ``lock_held``). The engine's lock call only
confirms that lock, so no state can be published between its first read of the state
and that call but its own: a lock the control plane grants keeps the copies of the
current state version and its download (the workspace's own answer, which names the
lock, is forgotten as after any write); one it refuses forgets everything.

In such a phase the engine's lock and unlock calls change nothing at all: the control
plane answers them by checking the session's apply authority. The first reads then
carry those answers too, for the run's own workspace, and only when they confirm it; the
relay answers the engine's first lock and first unlock of exactly those paths from them,
once each, as the writes they stand for (the kept reads are forgotten as the call would
have them forgotten). Any other write, a second lock, or a lock the first reads did not
confirm goes up as before. What guards the apply is not these calls: the apply's start,
redeemed before the engine ran, the fence on the state upload, and the check of the
result are all made by the control plane.

The Cloud API names its own URLs absolutely (a state version's download URL); a reply
naming the upstream API is rewritten to name the relay, so those reads come back here.

The engine never holds the runner's session: its CLI configuration carries only a
secret of this phase's relay (``local_secret``), worthless anywhere else. The relay
answers 401 to a call without it, relays only the Cloud API's own paths (so the
runner's routes, where results are reported, stay out of the engine's reach), and
adds the session's authorization itself (``authorization``: asked for on every call,
so a session the runner renews is the one used).
Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import base64
import hmac
import http.client
import json
import re
import sys
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

T = TypeVar("T")

# Paths below the API's ``/api/v2/`` whose successful GET is answered again from memory.
REPEATABLE_READS = re.compile(
    r"ping"
    r"|organizations/[^/?]+/entitlement-set"
    r"|organizations/[^/?]+/workspaces/[^/?]+"
    r"|workspaces/[^/?]+/current-state-version"
    r"|state-versions/[^/?]+/download"
    r"|workspaces/[^/?]+/vars"
)
# The Cloud API's answer to the reads a phase's engine starts with, all at once
# (``EngineRelay(first_reads=True)``); asked when the engine first reads one of them.
FIRST_READS_ROUTE = "runner/first-reads"
# What a lock the phase already holds leaves as it was (``EngineRelay(lock_held=True)``).
_LOCK_CALL = re.compile(r"workspaces/[^/?]+/actions/lock")
# The writes of such a phase the first reads may answer (``EngineRelay(lock_held=True)``):
# each only confirms the lock the run holds.
_CONFIRMING_WRITES = re.compile(r"workspaces/[^/?]+/actions/(?:lock|unlock)")
_PING = re.compile(r"ping")
_STATE_READS = re.compile(r"workspaces/[^/?]+/current-state-version|state-versions/[^/?]+/download")
# One answer above this size is relayed but not kept; all kept answers stay under the total.
MAX_KEPT_ANSWER = 8 * 1024 * 1024
MAX_KEPT_TOTAL = 32 * 1024 * 1024
# Found, the ping's empty answer, and not found (no state yet: the engine's next step is
# a write, which forgets it). A refusal or a failure is asked again.
_KEPT_STATUSES = frozenset({200, 204, 404})
_BODILESS_STATUSES = frozenset({204, 304})
_UPSTREAM_TIMEOUT = 120
# How soon ``stop`` returns: the serving loop looks for it this often.
_STOP_POLL_SECONDS = 0.02
_MAX_BODY = 64 * 1024 * 1024
# A path the relay forwards: below the API's /api/v2/, in plain characters, with no
# dot segment and no escaped dot, slash or backslash that a server could decode into one.
_FORWARDED_PATH = re.compile(r"/api/v2/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*(?:\?[^#\s]*)?")
_DOT_SEGMENT = re.compile(r"(?:^|/)\.{1,2}(?:/|$|\?)")
_ESCAPED_SEPARATOR = re.compile(r"%(?:2e|2f|5c|00)", re.IGNORECASE)
# Not relayed: they describe one connection, not the message (RFC 9110, 7.6.1), and the
# relay sets the length of what it sends itself.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
        # The relay asks for plain bodies so it can rewrite the API's own URLs.
        "accept-encoding",
    }
)


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class EngineRelay:
    """Relays ``/api/v2/`` calls from ``127.0.0.1:<port>`` to ``upstream`` (the Cloud
    API's base URL, a stage path allowed) until :meth:`stop`."""

    def __init__(
        self,
        upstream: str,
        *,
        local_secret: str,
        authorization: Callable[[], str],
        lock_held: bool = False,
        first_reads: bool = False,
        bind: Callable[[Callable[[], _Server]], _Server] | None = None,
    ) -> None:
        """``bind``: how the listening socket is made (by default here; the runner
        makes it inside the engine's network namespace)."""
        parts = urllib.parse.urlsplit(upstream.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {upstream!r}")
        self._scheme = parts.scheme
        self._netloc = parts.netloc
        self._prefix = parts.path
        self._upstream_base = f"{parts.scheme}://{parts.netloc}{parts.path}"
        self._local_secret = local_secret
        self._authorization = authorization
        self._kept: dict[tuple[str, str], _Answer] = {}
        self._kept_bytes = 0
        self._lock_held = lock_held
        # The first reads' answers to the phase's lock and unlock, each used once.
        self._confirmations: dict[tuple[str, str], _Answer] = {}
        # Asked once, by the first read it answers; the engine's reads wait for it.
        self._first_reads_due = first_reads
        self._first_reads_lock = threading.Lock()
        # Bumped before and after every write: a read that started before a write
        # finished is relayed but not kept.
        self._generation = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        self.forwarded = 0
        self.answered_from_memory = 0
        handler = type("BoundRelayHandler", (_RelayHandler,), {"relay": self})
        listen = bind or _here
        self._server = listen(lambda: _Server(("127.0.0.1", 0), handler))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(_STOP_POLL_SECONDS,), daemon=True
        )

    @property
    def base_url(self) -> str:
        """The relay's URL standing for ``upstream`` (same path below it)."""
        return f"http://127.0.0.1:{self._server.server_port}{self._prefix}"

    def start(self) -> EngineRelay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    # -- one call ---------------------------------------------------------------------

    def admit(self, method: str, path: str, headers: list[tuple[str, str]]) -> _Answer | None:
        """Refuse a call without this phase's secret (401) or to a path that is not the
        Cloud API's (404); ``None`` for a call to relay."""
        given = _authorization(headers).removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), self._local_secret.encode()):
            return _refusal(401, "unauthorized", "the relay takes only this phase's credentials")
        below = path[len(self._prefix) :] if path.startswith(self._prefix) else ""
        if (
            not _FORWARDED_PATH.fullmatch(below)
            or _DOT_SEGMENT.search(below.split("?", 1)[0])
            or _ESCAPED_SEPARATOR.search(below)
        ):
            return _refusal(404, "not found", "the relay forwards only the Cloud API's paths")
        return None

    def authorized(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``headers`` carrying the session's authorization instead of the engine's."""
        kept = [(k, v) for k, v in headers if k.lower() != "authorization"]
        return [*kept, ("Authorization", f"Bearer {self._authorization()}")]

    def answer(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> _Answer:
        if method != "GET":
            return self._write(method, path, headers, body)
        if not self._repeatable(path):
            return self._forward(method, path, headers, body)
        key = (path, _authorization(headers))
        if self._first_reads_due and not self._is(path, _PING):
            self._read_first(headers)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self.answered_from_memory += 1
                return kept
            generation = self._generation
        answer = self._forward(method, path, headers, body)
        if answer.status in _KEPT_STATUSES:
            with self._lock:
                if generation == self._generation and self._room_for(len(answer.body)):
                    self._kept[key] = answer
                    self._kept_bytes += len(answer.body)
        return answer

    def _write(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> _Answer:
        """Relay a write, forgetting the kept reads it may change; a lock or unlock the
        first reads confirmed is answered from them instead, once."""
        confirming = self._lock_held and method == "POST" and self._is(path, _LOCK_CALL)
        with self._lock:
            self._generation += 1
            self._forget(keep=_STATE_READS if confirming else None)
            key = (path, _authorization(headers))
            confirmed = self._confirmations.pop(key, None) if method == "POST" else None
            if confirmed is not None:
                self._generation += 1
                self.answered_from_memory += 1
                return confirmed
        try:
            answer = self._forward(method, path, headers, body)
            if confirming and answer.status != 200:
                with self._lock:
                    self._forget()
            return answer
        finally:
            with self._lock:
                self._generation += 1

    def _read_first(self, headers: list[tuple[str, str]]) -> None:
        """Keep the Cloud API's answers to the phase's first reads, asked once with the
        engine's ``headers``; a failed or refused ask keeps nothing."""
        with self._first_reads_lock:
            if not self._first_reads_due:
                return
            self._first_reads_due = False
            with self._lock:
                generation = self._generation
            path = f"{self._prefix}/api/v2/{FIRST_READS_ROUTE}"
            try:
                answer = self._forward("GET", path, headers, b"")
                entries = json.loads(answer.body)["answers"] if answer.status == 200 else []
                read = [self._first_read(entry) for entry in entries]
            except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
                return  # the engine's reads go up one by one
            authorization = _authorization(headers)
            with self._lock:
                if generation != self._generation:
                    return
                for method, route, kept in read:
                    key = (route, authorization)
                    if method == "POST":
                        if self._confirms(route, kept):
                            self._confirmations[key] = kept
                    elif (
                        method == "GET"
                        and self._repeatable(route)
                        and key not in self._kept
                        and kept.status in _KEPT_STATUSES
                        and self._room_for(len(kept.body))
                    ):
                        self._kept[key] = kept
                        self._kept_bytes += len(kept.body)

    def _first_read(self, entry: dict[str, Any]) -> tuple[str, str, _Answer]:
        """One answer of the first reads: the method and path it answers (a read unless
        it says otherwise), and the answer as relayed."""
        headers = [(str(k), str(v)) for k, v in entry["headers"] if k.lower() not in _HOP_BY_HOP]
        body = self._named_here(headers, base64.b64decode(entry["body"], validate=True))
        return (
            str(entry.get("method", "GET")),
            f"{self._prefix}/api/v2/{entry['path']}",
            _Answer(int(entry["status"]), headers, body),
        )

    def _confirms(self, route: str, answer: _Answer) -> bool:
        """Whether ``answer`` may stand for the engine's POST to ``route``: a lock or
        unlock of a phase whose run holds the lock, that the control plane confirmed."""
        return (
            self._lock_held
            and answer.status == 200
            and self._is(route, _CONFIRMING_WRITES)
            and len(answer.body) <= MAX_KEPT_ANSWER
        )

    def _repeatable(self, path: str) -> bool:
        return self._is(path, REPEATABLE_READS)

    def _is(self, path: str, routes: re.Pattern[str]) -> bool:
        """Whether ``path`` is one of ``routes`` (below the API's ``/api/v2/``)."""
        api = f"{self._prefix}/api/v2/"
        route = path.split("?", 1)[0]
        return route.startswith(api) and bool(routes.fullmatch(route[len(api) :]))

    def _room_for(self, size: int) -> bool:
        return size <= MAX_KEPT_ANSWER and self._kept_bytes + size <= MAX_KEPT_TOTAL

    def _forget(self, keep: re.Pattern[str] | None = None) -> None:
        """Forget every kept answer but those of ``keep``'s routes."""
        for key in [key for key in self._kept if keep is None or not self._is(key[0], keep)]:
            self._kept_bytes -= len(self._kept.pop(key).body)

    def _forward(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> _Answer:
        with self._lock:
            self.forwarded += 1
        sent = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP]
        reused = getattr(self._local, "connection", None) is not None
        try:
            response = self._send(method, path, sent, body)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self._drop_connection()
            if not reused:
                raise
            # The kept-alive connection was closed while idle, before the call reached
            # the control plane: the call is sent once more, on a fresh connection.
            response = self._send(method, path, sent, body)
        except BaseException:
            self._drop_connection()
            raise
        try:
            data = response.read()
        except BaseException:
            self._drop_connection()
            raise
        kept_headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
        if response.will_close:
            self._drop_connection()
        return _Answer(response.status, kept_headers, self._named_here(kept_headers, data))

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()

    def _send(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> http.client.HTTPResponse:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            if self._scheme == "https":
                connection = http.client.HTTPSConnection(self._netloc, timeout=_UPSTREAM_TIMEOUT)
            else:
                connection = http.client.HTTPConnection(self._netloc, timeout=_UPSTREAM_TIMEOUT)
            self._local.connection = connection
        connection.putrequest(method, path, skip_accept_encoding=True)
        for key, value in headers:
            connection.putheader(key, value)
        if body or method in ("POST", "PUT", "PATCH"):
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        return connection.getresponse()

    def _named_here(self, headers: list[tuple[str, str]], body: bytes) -> bytes:
        """``body`` with the upstream API's absolute URLs naming the relay instead."""
        content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        if "json" not in content_type:
            return body
        return body.replace(
            f"{self._upstream_base}/api/v2/".encode(), f"{self.base_url}/api/v2/".encode()
        )


def _authorization(headers: list[tuple[str, str]]) -> str:
    return next((v for k, v in headers if k.lower() == "authorization"), "")


def _refusal(status: int, title: str, detail: str) -> _Answer:
    body = json.dumps({"errors": [{"status": str(status), "title": title, "detail": detail}]})
    return _Answer(status, [("Content-Type", "application/vnd.api+json")], body.encode())


def _here(make: Callable[[], T]) -> T:
    return make()


class _RelayHandler(BaseHTTPRequestHandler):
    relay: EngineRelay
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: without this the body waits for the
    # engine's delayed ACK (about 40 ms a reply).
    disable_nagle_algorithm = True

    def _relay(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY:
            self.close_connection = True
            self._reply(_Answer(400, [], b"the relay cannot read this request's body\n"))
            return
        body = self.rfile.read(length) if length else b""
        headers = list(self.headers.items())
        refused = self.relay.admit(self.command, self.path, headers)
        if refused is not None:
            self._reply(refused)
            return
        try:
            answer = self.relay.answer(
                self.command, self.path, self.relay.authorized(headers), body
            )
        except (OSError, http.client.HTTPException) as error:
            message = f"the control plane could not be reached ({type(error).__name__})\n"
            answer = _Answer(502, [("Content-Type", "text/plain")], message.encode())
        self._reply(answer)

    def _reply(self, answer: _Answer) -> None:
        self.send_response(answer.status)
        for key, value in answer.headers:
            self.send_header(key, value)
        if answer.status in _BODILESS_STATUSES:
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the engine logs its own calls; the relay adds nothing worth the noise


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # An engine process that exits drops its kept-alive connection: not an error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
