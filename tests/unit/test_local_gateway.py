"""The embedded gateway's HTTP server, as clients (engines, runners) treat it."""

from __future__ import annotations

import socket
import struct
import time
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
