"""The embedded gateway's HTTP server, as clients (engines, runners) treat it."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import requests

from runplane.local.gateway import Gateway, GatewayServer


def _ok(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "headers": {}, "body": "ok"}


def test_a_client_dropping_its_connection_is_not_reported_as_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the gateway serving public routes
    server = GatewayServer(Gateway(_ok, _ok, lambda method, path: True))
    server.start()
    host, port = server.address
    try:
        # When a client resets its connection (as an engine exiting with a kept-alive
        # connection does), then another client asks
        dropped = socket.create_connection((host, port))
        dropped.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        dropped.send(b"GET /api/v2/ping HTTP/1.1\r\n")
        dropped.close()
        time.sleep(0.2)
        answered = requests.get(f"http://{host}:{port}/api/v2/ping", timeout=10)
    finally:
        server.stop()

    # Then the other client is answered and nothing was printed about the first
    assert answered.status_code == 200
    assert "Traceback" not in capsys.readouterr().err


def test_a_kept_alive_connection_sends_each_reply_without_waiting_for_an_ack() -> None:
    # Given the gateway, and a handler that reports how its own connection is set up
    seen: list[int] = []

    def report_nodelay(event: dict[str, Any], context: Any) -> dict[str, Any]:
        frame = sys._getframe()
        while frame is not None:
            handler = frame.f_locals.get("self")
            if isinstance(handler, BaseHTTPRequestHandler):
                seen.append(handler.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                break
            frame = frame.f_back  # type: ignore[assignment]
        return _ok(event, context)

    server = GatewayServer(Gateway(report_nodelay, report_nodelay, lambda method, path: True))
    server.start()
    host, port = server.address
    try:
        # When a client asks twice on one kept-alive connection (as an engine does)
        with requests.Session() as session:
            answers = [session.get(f"http://{host}:{port}/api/v2/ping", timeout=10) for _ in "ab"]
    finally:
        server.stop()

    # Then both are answered, and the reply's headers and body, written apart, leave
    # at once: with Nagle's algorithm on, the body would wait for the client's
    # delayed ACK of the headers, about 40 ms a reply
    assert [a.status_code for a in answers] == [200, 200]
    assert [bool(option) for option in seen] == [True, True]


class _Recorder:
    """Handlers (API and authorizer) that record each event they are given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def api(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.calls.append((event["httpMethod"], event["path"]))
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/json", "X-Seen": event["httpMethod"]},
            "body": json.dumps({"path": event["path"], "body": event["body"]}),
        }

    def authorizer(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.calls.append(("authorize", event["path"]))
        return {"principalId": "someone", "context": {}}


@pytest.fixture
def served() -> Iterator[tuple[_Recorder, str, int]]:
    """A started gateway whose routes all need the authorizer, and its recorder."""
    recorder = _Recorder()
    server = GatewayServer(Gateway(recorder.api, recorder.authorizer, lambda m, p: False))
    server.start()
    host, port = server.address
    try:
        yield recorder, host, port
    finally:
        server.stop()


def _exchange(host: str, port: int, raw: bytes) -> bytes:
    """Sends ``raw`` on a new connection and reads until the gateway closes it."""
    with socket.create_connection((host, port), timeout=5) as connection:
        connection.sendall(raw)
        received = b""
        while chunk := connection.recv(65536):  # a timeout here: left open
            received += chunk
    return received


def _responses(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The responses in ``raw``, one after another, framed by Content-Length."""
    found = []
    while raw:
        head, _, raw = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        found.append((int(status_line.split()[1]), headers, raw[:length]))
        raw = raw[length:]
    return found


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


SMUGGLED = b"GET /api/v2/smuggled HTTP/1.1\r\nHost: gateway\r\n\r\n"


def test_head_is_answered_as_get_without_the_body(served: tuple[_Recorder, str, int]) -> None:
    recorder, host, port = served
    # When a client asks GET, HEAD, then GET again on one kept-alive connection
    connection = http.client.HTTPConnection(host, port, timeout=5)
    answers = []
    for method in ("GET", "HEAD", "GET"):
        connection.request(method, "/api/v2/workspaces?x=1")
        response = connection.getresponse()
        answers.append((response.status, dict(response.getheaders()), response.read()))
    connection.close()

    # Then HEAD has GET's status and headers (its Content-Length too) and no body, and
    # the connection still frames the next request right
    (get_status, get_headers, get_body), (head_status, head_headers, head_body) = answers[:2]
    assert get_body
    assert head_body == b""
    assert head_status == get_status == 200
    get_headers.pop("Date"), head_headers.pop("Date")
    assert head_headers == get_headers
    assert head_headers["Content-Length"] == str(len(get_body))
    assert answers[2][0] == 200
    assert answers[2][2] == get_body
    # And the handlers saw a GET each time
    assert [method for method, _ in recorder.calls] == ["authorize", "GET"] * 3


def test_options_is_answered_with_the_methods_served(
    served: tuple[_Recorder, str, int],
) -> None:
    recorder, host, port = served
    # When a client asks OPTIONS, then GET on the same connection
    connection = http.client.HTTPConnection(host, port, timeout=5)
    connection.request("OPTIONS", "/api/v2/workspaces")
    options = connection.getresponse()
    options_body = options.read()
    connection.request("GET", "/api/v2/workspaces")
    after = connection.getresponse()
    after.read()
    connection.close()

    # Then OPTIONS is 204 with Allow, answered by the gateway itself (the API routes
    # no OPTIONS), and the connection goes on
    assert options.status == 204
    assert options_body == b""
    allowed = {m.strip() for m in (options.getheader("Allow") or "").split(",")}
    assert allowed == {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
    assert after.status == 200
    assert recorder.calls == [("authorize", "/api/v2/workspaces"), ("GET", "/api/v2/workspaces")]


@pytest.mark.parametrize("method", ["TRACE", "PROPFIND", "CONNECT", "BREW"])
def test_other_methods_are_405_and_reach_no_handler(
    served: tuple[_Recorder, str, int], method: str
) -> None:
    recorder, host, port = served
    # When a client asks with a method the gateway does not serve, then GET
    connection = http.client.HTTPConnection(host, port, timeout=5)
    connection.request(method, "/api/v2/workspaces")
    refused = connection.getresponse()
    refused_body = refused.read()
    connection.request("GET", "/api/v2/workspaces")
    after = connection.getresponse()
    after.read()
    connection.close()

    # Then it is 405 with Allow and the gateway's error shape, with a code and a
    # sentence; no handler (not even the authorizer) saw it; the connection goes on
    assert refused.status == 405
    assert "OPTIONS" in (refused.getheader("Allow") or "")
    assert refused.getheader("Content-Type") == "application/vnd.api+json"
    (error,) = json.loads(refused_body)["errors"]
    assert error["status"] == "405"
    assert error["code"] == "METHOD_NOT_ALLOWED"
    assert method in error["detail"]
    assert after.status == 200
    assert recorder.calls == [("authorize", "/api/v2/workspaces"), ("GET", "/api/v2/workspaces")]


def test_a_refused_method_with_a_body_closes_the_connection(
    served: tuple[_Recorder, str, int],
) -> None:
    recorder, host, port = served
    # When a PROPFIND carries a body made of another request, on a kept-alive connection
    raw = _exchange(
        host,
        port,
        b"PROPFIND /api/v2/workspaces HTTP/1.1\r\nHost: gateway\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(SMUGGLED), SMUGGLED),
    )

    # Then one 405 answers it, the connection is closed and the body was never a request
    ((status, headers, _),) = _responses(raw)
    assert status == 405
    assert headers["connection"] == "close"
    assert recorder.calls == []


def test_a_chunked_request_smuggling_another_is_refused_and_closed(
    served: tuple[_Recorder, str, int],
) -> None:
    recorder, host, port = served
    # When a chunked POST carries a whole request in its body, and another after it
    raw = _exchange(
        host,
        port,
        b"POST /api/v2/workspaces HTTP/1.1\r\nHost: gateway\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        + _chunked(SMUGGLED)
        + b"0\r\n\r\n"
        + SMUGGLED,
    )

    # Then exactly one response comes back, 411 in the gateway's error shape, the
    # connection is closed, and neither the POST nor a smuggled request reached a handler
    ((status, headers, body),) = _responses(raw)
    assert status == 411
    assert headers["connection"] == "close"
    assert json.loads(body)["errors"][0]["code"] == "LENGTH_REQUIRED"
    assert recorder.calls == []


@pytest.mark.parametrize(
    "framing",
    [
        b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(b"0\r\n\r\n"),
        b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(b"0\r\n\r\n"),
        b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(b"0\r\n\r\n"),
        b"Content-Length: +5\r\n",
    ],
    ids=["te-then-cl", "cl-then-te", "two-lengths", "signed-length"],
)
def test_an_ambiguous_length_is_refused_and_closed(
    served: tuple[_Recorder, str, int], framing: bytes
) -> None:
    recorder, host, port = served
    # When a POST's length is ambiguous (RFC 9112, 6.3) and a request follows its body
    raw = _exchange(
        host,
        port,
        b"POST /api/v2/workspaces HTTP/1.1\r\nHost: gateway\r\n"
        + framing
        + b"\r\n0\r\n\r\n"
        + SMUGGLED,
    )

    # Then one 400 answers it, the connection is closed, and no handler saw anything
    ((status, headers, body),) = _responses(raw)
    assert status == 400
    assert headers["connection"] == "close"
    assert json.loads(body)["errors"][0]["status"] == "400"
    assert recorder.calls == []


def test_a_client_streaming_a_chunked_body_reads_the_refusal(
    served: tuple[_Recorder, str, int],
) -> None:
    recorder, host, port = served

    # When a client sends a body of unknown length (requests sends it chunked, piece
    # by piece, after the headers)
    def pieces() -> Iterator[bytes]:
        for _ in range(20):
            time.sleep(0.01)
            yield b'{"data": "' + b"x" * 1024 + b'"}'

    answered = requests.post(f"http://{host}:{port}/api/v2/workspaces", data=pieces(), timeout=10)

    # Then it reads the 411 (the gateway did not reset the connection under it)
    assert answered.status_code == 411
    assert recorder.calls == []
