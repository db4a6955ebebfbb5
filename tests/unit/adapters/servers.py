"""Local HTTP endpoints for the webhook client's tests: one that answers, one that
trickles (or never answers), and a closed port."""

from __future__ import annotations

import http.server
import socket
import threading


class Receiver:
    """Answers every POST with ``status`` (and a ``Location``), recording requests."""

    def __init__(self, status: int = 200, location: str | None = None) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        receiver = self

        class Handle(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.path, dict(self.headers), body))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None: ...

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.port = int(self.server.server_address[1])
        # Polled for shutdown every 20 ms: at the default half second, closing the
        # receiver waited out most of it.
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def url(self, path: str = "/hooks/p") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Trickler:
    """Accepts, then sends a status line one byte every ``every`` seconds, forever
    (``None``: sends nothing at all)."""

    def __init__(self, every: float | None) -> None:
        self.every = every
        self.sent = 0
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        with connection:
            line = b"HTTP/1.1 200 OK" + b" " * 10_000
            while not self.stopped.is_set():
                if self.every is not None and self.sent < len(line):
                    try:
                        connection.sendall(line[self.sent : self.sent + 1])
                    except OSError:
                        return
                    self.sent += 1
                self.stopped.wait(self.every or 0.1)

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
