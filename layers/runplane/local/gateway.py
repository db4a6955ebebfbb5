"""A loopback HTTP server that behaves like API Gateway in front of our Lambdas.

Each request becomes an API Gateway REST proxy event; protected routes first
go through the same REQUEST authorizer handler the real gateway calls, and
its context is passed on exactly as API Gateway does.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import threading
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
logger = logging.getLogger(__name__)


def _gateway_error(status: int, title: str, detail: str) -> dict[str, Any]:
    body = {"errors": [{"status": str(status), "title": title, "detail": detail}]}
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

    def _serve(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            # Nothing can be read reliably after a bad length: answer and close.
            self.close_connection = True
            response = _gateway_error(400, "bad request", "the Content-Length header is invalid")
        elif length > MAX_PAYLOAD:
            self.rfile.read(length)
            response = _gateway_error(
                413, "payload too large", "request bodies are limited to 10 MB"
            )
        else:
            body = self.rfile.read(length) if length else b""
            headers = {key: value for key, value in self.headers.items()}
            response = self.gateway.handle(
                self.command, self.path, headers, body, self.client_address[0]
            )
        payload = response.get("body") or ""
        data = (
            base64.b64decode(payload)
            if response.get("isBase64Encoded")
            else payload.encode("utf-8")
        )
        self.send_response(int(response["statusCode"]))
        sent = set()
        for key, value in (response.get("headers") or {}).items():
            self.send_header(key, str(value))
            sent.add(key.lower())
        for key, values in (response.get("multiValueHeaders") or {}).items():
            if key.lower() not in sent:
                for value in values:
                    self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

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
