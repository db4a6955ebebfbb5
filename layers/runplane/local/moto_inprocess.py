"""The stack's own JSON-protocol AWS requests reach moto without a socket.

The embedded stack serves AWS with moto's HTTP server because its sandboxes (other
processes) fetch artifacts from S3 by presigned URL. The stack's own requests to
DynamoDB, DynamoDB Streams and KMS, a few hundred per run, do not need the network:
moto's server (werkzeug) closes the connection after every reply, so each of them
paid for a TCP connection, a server thread and HTTP parsing on both sides, about
two thirds of a request's CPU. Those requests are handed to the same WSGI
application the server runs, on the calling thread: the same routing, handlers,
serialization of requests per service (``moto_serial``) and replies, minus the
socket. Step Functions' requests (the workflow's starts and task results), the
interpreter's Lambda invocations (a run's seven tasks) and the stack's own S3
requests (each artifact it stores: one put, or a multipart upload's requests) are
served the same way: moto's interpreter then runs each task's
handler on its own execution thread instead of a server thread. What the sandboxes
send (their presigned S3 transfers, their API calls) comes from other processes and
still goes over HTTP, as does anything not aimed at this stack's endpoint.

A reply's body is read from moto whole, as moto builds it (moto holds every object
in memory anyway), and handed out in the pieces botocore asks for.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from typing import Any, cast
from urllib.parse import urlsplit

# X-Amz-Target prefixes of the JSON-protocol services served in process.
_TARGETS = (
    "DynamoDB_20120810.",
    "DynamoDBStreams_20120810.",
    "TrentService.",
    "AWSStepFunctions.",
)
# Lambda's Invoke (REST-JSON): POST /2015-03-31/functions/{name}/invocations.
_LAMBDA_INVOKE = ("/2015-03-31/functions/", "/invocations")
_APPS: dict[str, Callable[..., Any]] = {}
_GUARD = threading.Lock()


class _Body:
    """The part of urllib3's response botocore reads: ``read(amt)`` and ``stream``."""

    def __init__(self, content: bytes) -> None:
        self._content = io.BytesIO(content)

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        while piece := self.read(amt):
            yield piece

    def read(self, amt: int | None = None) -> bytes:
        return self._content.read(amt)

    def close(self) -> None:
        self._content.close()


def serve_in_process(endpoint: str, app: Callable[..., Any]) -> None:
    """Serve the JSON-protocol requests aimed at ``endpoint`` by calling ``app``."""
    with _GUARD:
        _APPS[endpoint.rstrip("/")] = app
        _patch_endpoint_send()


def stop_serving(endpoint: str) -> None:
    with _GUARD:
        _APPS.pop(endpoint.rstrip("/"), None)


def _patch_endpoint_send() -> None:
    from botocore.endpoint import Endpoint

    original: Callable[[Any, Any], Any] = getattr(Endpoint, "_send")  # noqa: B009
    if getattr(original, "runplane_in_process", False):
        return

    def send(self: Any, request: Any) -> Any:
        app = _app_for(getattr(self, "_endpoint_prefix", ""), request)
        if app is None:
            return original(self, request)
        return _call(app, request)

    send.runplane_in_process = True  # type: ignore[attr-defined]
    setattr(Endpoint, "_send", send)  # noqa: B010 (botocore's private send)


def _app_for(service: str, request: Any) -> Callable[..., Any] | None:
    if not _APPS:
        return None
    target = request.headers.get("X-Amz-Target")
    if isinstance(target, bytes):
        target = target.decode("ascii")
    parts = urlsplit(request.url)
    served = (
        service == "s3"
        or (target is not None and target.startswith(_TARGETS))
        or _is_lambda_invoke(request.method, parts.path)
    )
    return _APPS.get(f"{parts.scheme}://{parts.netloc}") if served else None


def _is_lambda_invoke(method: str, path: str) -> bool:
    prefix, suffix = _LAMBDA_INVOKE
    return method == "POST" and path.startswith(prefix) and path.endswith(suffix)


def _call(app: Callable[..., Any], request: Any) -> Any:
    from botocore.awsrequest import AWSResponse, HeadersDict
    from werkzeug.test import EnvironBuilder

    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode("utf-8")
    parts = urlsplit(request.url)
    headers = {
        key: value.decode("ascii") if isinstance(value, bytes) else value
        for key, value in request.headers.items()
    }
    environ = EnvironBuilder(
        method=request.method,
        base_url=f"{parts.scheme}://{parts.netloc}",
        path=parts.path or "/",
        query_string=parts.query,
        headers=headers,
        data=body or b"",
    ).get_environ()
    environ["REMOTE_ADDR"] = "127.0.0.1"
    reply: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], *_: Any) -> None:
        reply["status"] = int(status.split(" ", 1)[0])
        reply["headers"] = response_headers

    chunks = app(environ, start_response)
    try:
        content = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    # botocore reads headers by name only (urllib3 gives it a dict-like too).
    headers_read = cast(Any, HeadersDict(reply["headers"]))
    return AWSResponse(request.url, reply["status"], headers_read, _Body(content))
