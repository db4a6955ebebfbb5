"""The embedded gateway's HTTP server, as clients (engines, runners) treat it."""

from __future__ import annotations

import socket
import struct
import sys
import time
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
