"""POSTing a notification: one request to a checked address, no redirects, one deadline.

The host name is resolved once (through the ``Resolver`` seam), EVERY address it
resolves to must be allowed by the ``AddressPolicy``, and the connection is made to
that checked address itself, never by resolving the name again: a name that answers
a public address to the check and a private one to the connection (DNS rebinding)
reaches nothing. TLS still verifies the certificate for the name (SNI), and the
``Host`` header carries it. The whole exchange, lookup to status line, ends at one
deadline: every socket operation is non-blocking and waits only for what is left,
so an endpoint trickling a byte a second is cut off like a silent one. Only the
status line is read; a redirect is just its status (not followed).

The URL may itself be a credential (Slack's are): it never appears in a result,
an exception or a log line; failures are described by a coarse outcome only.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import re
import selectors
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, urlsplit

from runplane.domain.notifications import (
    DELIVERY_DEADLINE_SECONDS,
    AddressPolicy,
    DestinationNotAllowed,
    IPAddress,
    literal_address,
)

# (host, port) -> every address the name resolves to.
Resolver = Callable[[str, int], Sequence[IPAddress]]

NOT_ALLOWED: Final = "destination address not allowed"
NO_ANSWER: Final = "no answer"
_MAX_HEAD: Final = 16 * 1024
_STATUS_LINE: Final = re.compile(rb"HTTP/\d(?:\.\d)? (\d{3})")
# Lookups run here so that a hung resolver costs the deadline, not the worker.
_LOOKUPS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="webhook-dns")


@dataclass(frozen=True)
class PostResult:
    status: int | None
    error: str | None


class _Refused(Exception):
    """The destination resolved to an address the policy does not allow."""


def system_resolver(host: str, port: int) -> list[IPAddress]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


class WebhookClient:
    def __init__(
        self,
        policy: AddressPolicy | None = None,
        *,
        resolver: Resolver = system_resolver,
        deadline_seconds: float = DELIVERY_DEADLINE_SECONDS,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._policy = policy or AddressPolicy()
        self._resolve = resolver
        self._deadline = deadline_seconds
        self._tls = tls or ssl.create_default_context()

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> PostResult:
        deadline = time.monotonic() + self._deadline
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = self._checked_addresses(host, port, deadline)
            request = _request(url, body, headers)
            status = self._exchange(
                addresses, port, host, parts.scheme == "https", request, deadline
            )
        except _Refused:
            return PostResult(None, NOT_ALLOWED)
        except (OSError, ValueError, concurrent.futures.TimeoutError):
            return PostResult(None, NO_ANSWER)
        return PostResult(status, None if status is not None else NO_ANSWER)

    def _checked_addresses(self, host: str, port: int, deadline: float) -> list[IPAddress]:
        try:
            literal = literal_address(host)
        except DestinationNotAllowed:
            raise _Refused from None
        if literal is None and not self._policy.allows_name(host):
            raise _Refused
        if literal is not None:
            addresses = [literal]
        else:
            lookup = _LOOKUPS.submit(self._resolve, host, port)
            addresses = list(lookup.result(timeout=max(0.0, deadline - time.monotonic())))
        # One refused address refuses the name: which one a connection gets is not ours.
        if not addresses or not all(self._policy.allows(a, port) for a in addresses):
            raise _Refused
        return addresses

    def _exchange(
        self,
        addresses: list[IPAddress],
        port: int,
        host: str,
        https: bool,
        request: bytes,
        deadline: float,
    ) -> int | None:
        sock = _connect_first(addresses, port, deadline)
        try:
            if https:
                sock = _handshake(self._tls, sock, host, deadline)
            _send_all(sock, request, deadline)
            return _final_status(sock, deadline)
        finally:
            sock.close()


def _request(url: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    parts = urlsplit(url)
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        target += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    authority = parts.netloc.rpartition("@")[2]
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {authority}",
        "Content-Type: application/json",
        "User-Agent: Runplane",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    if any("\r" in line or "\n" in line for line in lines):
        raise ValueError("a header would split the request")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


def _wait(sock: socket.socket, events: int, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    with selectors.DefaultSelector() as selector:
        selector.register(sock, events)
        if not selector.select(remaining):
            raise TimeoutError


def _connect_first(addresses: list[IPAddress], port: int, deadline: float) -> socket.socket:
    failure: OSError = ConnectionError("no address")
    for address in addresses:
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect_ex((str(address), port))
            _wait(sock, selectors.EVENT_WRITE, deadline)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                raise ConnectionError(error)
            return sock
        except OSError as error:
            sock.close()
            failure = error
            if isinstance(error, TimeoutError):
                break
    raise failure


def _handshake(
    tls: ssl.SSLContext, sock: socket.socket, host: str, deadline: float
) -> ssl.SSLSocket:
    wrapped = tls.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    while True:
        try:
            wrapped.do_handshake()
            return wrapped
        except ssl.SSLWantReadError:
            _wait(wrapped, selectors.EVENT_READ, deadline)
        except ssl.SSLWantWriteError:
            _wait(wrapped, selectors.EVENT_WRITE, deadline)


def _send_all(sock: socket.socket, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view) :]
        except (BlockingIOError, ssl.SSLWantWriteError):
            _wait(sock, selectors.EVENT_WRITE, deadline)
        except ssl.SSLWantReadError:
            _wait(sock, selectors.EVENT_READ, deadline)


def _receive(sock: socket.socket, deadline: float) -> bytes:
    while True:
        try:
            return sock.recv(4096)
        except (BlockingIOError, ssl.SSLWantReadError):
            _wait(sock, selectors.EVENT_READ, deadline)
        except ssl.SSLWantWriteError:
            _wait(sock, selectors.EVENT_WRITE, deadline)


def _final_status(sock: socket.socket, deadline: float) -> int | None:
    """The status of the first final (non-1xx) response head, or None."""
    buffer = b""
    while len(buffer) <= _MAX_HEAD:
        head, found, rest = buffer.partition(b"\r\n\r\n")
        if found:
            matched = _STATUS_LINE.match(head)
            if matched is None:
                return None
            status = int(matched.group(1))
            if status >= 200:
                return status
            buffer = rest
            continue
        chunk = _receive(sock, deadline)
        if not chunk:
            return None
        buffer += chunk
    return None
