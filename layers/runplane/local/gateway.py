"""A loopback HTTP server that behaves like API Gateway in front of our Lambdas.

Each request becomes an API Gateway REST proxy event; protected routes first
go through the same REQUEST authorizer handler the real gateway calls, and
its context is passed on exactly as API Gateway does.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

# API Gateway refuses larger payloads before any Lambda runs.
MAX_PAYLOAD = 10 * 1024 * 1024
STAGE = "local"
_API_ARN = "arn:aws:execute-api:us-east-1:000000000000:runplane"
# Methods passed on to the handlers (HEAD as a GET without its body); OPTIONS is
# answered by the gateway (the API routes no OPTIONS: no CORS), anything else is 405.
_PASSED_ON = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
ALLOWED_METHODS = (*_PASSED_ON, "OPTIONS")
_ALLOW = ", ".join(ALLOWED_METHODS)
_DIGITS = re.compile(r"[0-9]+")
# After refusing a request whose body it will not read, the gateway reads (and drops)
# what the client is still sending for at most this long and this much before it
# closes: closing with unread bytes resets the connection, and the client could lose
# the refusal.
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 1024 * 1024
logger = logging.getLogger(__name__)


def _gateway_error(status: int, title: str, detail: str, code: str | None = None) -> dict[str, Any]:
    error = {"status": str(status), "title": title, "detail": detail}
    if code is not None:
        error["code"] = code
    body = {"errors": [error]}
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/vnd.api+json", "TFP-API-Version": "2.5"},
        "body": json.dumps(body),
    }


class Gateway:
    def __init__(
        self, api: Handler, authorizer: Handler, is_public: Callable[[str, str], bool]
    ) -> None:
        self._api = api
        self._authorizer = authorizer
        self._is_public = is_public

    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes, client: str
    ) -> dict[str, Any]:
        if len(body) > MAX_PAYLOAD:
            return _gateway_error(413, "payload too large", "request bodies are limited to 10 MB")
        url = urlsplit(target)
        path = url.path
        # As API Gateway does: handlers learn the scheme and client from these.
        headers = {**headers, "X-Forwarded-Proto": "http", "X-Forwarded-For": client}
        query = parse_qsl(url.query, keep_blank_values=True)
        event = self._event(method, path, query, headers, body, client)
        if not self._is_public(method, path):
            try:
                decision = self._authorizer(self._authorizer_event(event), None)
            except Exception as refused:
                if str(refused) == "Unauthorized":
                    return _gateway_error(401, "unauthorized", "missing or invalid credentials")
                logger.exception("authorizer failed")
                return _gateway_error(500, "internal error", "the authorizer failed")
            event["requestContext"]["authorizer"] = {
                **decision.get("context", {}),
                "principalId": decision["principalId"],
            }
        try:
            return self._api(event, None)
        except Exception:
            logger.exception("handler failed")
            return _gateway_error(500, "internal error", "the request could not be completed")

    @staticmethod
    def _event(
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: bytes,
        client: str,
    ) -> dict[str, Any]:
        multi_query: dict[str, list[str]] = {}
        for key, value in query:
            multi_query.setdefault(key, []).append(value)
        try:
            text, encoded = body.decode("utf-8"), False
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode("ascii"), True
        return {
            "resource": path,
            "path": path,
            "httpMethod": method,
            "headers": dict(headers),
            "multiValueHeaders": {k: [v] for k, v in headers.items()},
            "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
            "multiValueQueryStringParameters": multi_query or None,
            "pathParameters": None,
            "stageVariables": None,
            "requestContext": {
                "path": path,
                "stage": STAGE,
                "httpMethod": method,
                "requestId": str(uuid.uuid4()),
                "resourcePath": path,
                "identity": {"sourceIp": client},
            },
            "body": text if body else None,
            "isBase64Encoded": encoded,
        }

    @staticmethod
    def _authorizer_event(event: dict[str, Any]) -> dict[str, Any]:
        method, path = event["httpMethod"], event["path"]
        return {
            "type": "REQUEST",
            "methodArn": f"{_API_ARN}/{STAGE}/{method}{path}",
            "resource": path,
            "path": path,
            "httpMethod": method,
            "headers": event["headers"],
            "queryStringParameters": event["queryStringParameters"],
            "requestContext": event["requestContext"],
        }


class _RequestHandler(BaseHTTPRequestHandler):
    gateway: Gateway
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: with Nagle's algorithm on, the body
    # waits for the client's delayed ACK of the headers (about 40 ms a response).
    disable_nagle_algorithm = True

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.command in _PASSED_ON or self.command == "OPTIONS":
            return True
        # Any other method (TRACE, PROPFIND, CONNECT, unknown ones) is answered here,
        # rather than with the 501 the base class gives a method without ``do_``.
        self._serve()
        self.wfile.flush()
        return False

    def handle_expect_100(self) -> bool:
        # A request about to be refused must not be invited to send its body.
        if self._refusal() is not None:
            return True
        return super().handle_expect_100()

    def _body_length(self) -> int | dict[str, Any]:
        """The body's length from Content-Length, or the refusal for a body whose end
        cannot be known for sure; after a refusal the connection is closed.

        Transfer-Encoding (chunked) is refused with 411, not decoded: a body read with
        the wrong framing leaves bytes that would be taken for the next request on a
        kept-alive connection (request smuggling). With Content-Length as well, the
        request is ambiguous (RFC 9112, 6.3): 400.
        """
        if "Transfer-Encoding" in self.headers:
            if "Content-Length" in self.headers:
                return _gateway_error(
                    400,
                    "bad request",
                    "a request may not carry both Transfer-Encoding and Content-Length",
                    code="AMBIGUOUS_LENGTH",
                )
            return _gateway_error(
                411,
                "length required",
                "send the request body with a Content-Length; Transfer-Encoding "
                "(chunked) is not accepted",
                code="LENGTH_REQUIRED",
            )
        values = {value.strip() for value in self.headers.get_all("Content-Length") or []}
        if not values:
            return 0
        value = values.pop()
        # One value (repeated identically at most), digits only: int() would also take
        # "+5", " 5" or "1_0".
        if values or not _DIGITS.fullmatch(value):
            return _gateway_error(400, "bad request", "the Content-Length header is invalid")
        return int(value)

    def _refusal(self) -> tuple[dict[str, Any], bool] | None:
        """The answer to a request refused before its body is read, if it is, and
        whether the connection must then be closed (its body is left unread)."""
        length = self._body_length()
        if isinstance(length, dict):
            return length, True
        if self.command not in ALLOWED_METHODS:
            response = _gateway_error(
                405,
                "method not allowed",
                f"{self.command} is not served; the methods served are {_ALLOW}",
                code="METHOD_NOT_ALLOWED",
            )
            response["headers"]["Allow"] = _ALLOW
            return response, length > 0
        return None

    def _serve(self) -> None:
        refusal = self._refusal()
        if refusal is not None:
            self._reply(*refusal)
            return
        length = self._body_length()
        assert isinstance(length, int)
        if length > MAX_PAYLOAD:
            self._discard(length)
            response = _gateway_error(
                413, "payload too large", "request bodies are limited to 10 MB"
            )
        else:
            body = self.rfile.read(length) if length else b""
            if self.command == "OPTIONS":
                response = {"statusCode": 204, "headers": {"Allow": _ALLOW}}
            else:
                headers = {key: value for key, value in self.headers.items()}
                # HEAD is a GET whose body is not sent.
                method = "GET" if self.command == "HEAD" else self.command
                response = self.gateway.handle(
                    method, self.path, headers, body, self.client_address[0]
                )
        self._reply(response, close=False)

    def _discard(self, length: int) -> None:
        while length > 0:
            read = self.rfile.read(min(length, 64 * 1024))
            if not read:
                break
            length -= len(read)

    def _reply(self, response: dict[str, Any], close: bool) -> None:
        status = int(response["statusCode"])
        payload = response.get("body") or ""
        data = (
            base64.b64decode(payload)
            if response.get("isBase64Encoded")
            else payload.encode("utf-8")
        )
        self.send_response(status)
        sent = set()
        for key, value in (response.get("headers") or {}).items():
            self.send_header(key, str(value))
            sent.add(key.lower())
        for key, values in (response.get("multiValueHeaders") or {}).items():
            if key.lower() not in sent:
                for value in values:
                    self.send_header(key, str(value))
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")  # also sets close_connection
        self.end_headers()
        if self.command != "HEAD" and status != 204:
            self.wfile.write(data)
        if close:
            self._linger()

    def _linger(self) -> None:
        """Closes the sending side, then drops what the client still sends (bounded)."""
        self.wfile.flush()
        self.close_connection = True
        deadline = time.monotonic() + _LINGER_SECONDS
        try:
            self.connection.shutdown(socket.SHUT_WR)
            received = 0
            while received < _LINGER_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.connection.settimeout(left)
                chunk = self.connection.recv(64 * 1024)
                if not chunk:
                    break
                received += len(chunk)
        except OSError:
            pass

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _serve

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.client_address[0], *args)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops a kept-alive connection (an engine process exiting) is
        # not an error of the gateway's: say nothing rather than print a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            logger.debug("%s closed its connection", client_address[0])
            return
        super().handle_error(request, client_address)


class GatewayServer:
    """Serves a ``Gateway`` on ``host:port`` from a background thread until ``stop``."""

    def __init__(self, gateway: Gateway, host: str = "127.0.0.1", port: int = 0) -> None:
        handler = type("BoundHandler", (_RequestHandler,), {"gateway": gateway})
        self._server = _Server((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
