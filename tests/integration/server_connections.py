"""Counting the connections this process's HTTP servers accept (moto's, the gateway's)."""

from __future__ import annotations

import socketserver
from typing import Any

import pytest


def accepted_connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The client address of every connection accepted from now on, in order."""
    connections: list[object] = []
    accept = socketserver.ThreadingMixIn.process_request

    def counted(self: Any, request: Any, address: Any) -> None:
        connections.append(address)
        accept(self, request, address)

    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request", counted)
    return connections
