"""Notification deliveries under load, as in AWS: webhook endpoints on loopback (some
trickling their answer), and invocations of the worker Lambda's entry point on threads,
each fed SQS-shaped events received from moto's queue, as the event source mapping does.

Used by tests/integration/test_delivery_slots.py and benchmarks/notification_fairness.py.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from functions.events import handler as worker_lambda
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType, RunEvent

# A webhook answer's head, trickled one byte at a time by a slow endpoint.
HEAD = b"HTTP/1.1 200 OK\r\n\r\n"


@dataclass
class Request:
    path: str
    arrived: float
    done: float | None = None
    # How many of the paths' organization's requests had been answered when this arrived.
    answered_before: Counter[str] = field(default_factory=Counter)


class Endpoints:
    """Webhook receivers on 127.0.0.1. A path ``/slow/<org>/<name>`` trickles its answer
    one byte every ``pace`` seconds (so one request takes ``len(HEAD) * pace``); any
    other path answers at once. Records every request, and the most requests of one
    organization, of one path, and of all, in flight at once."""

    def __init__(self, pace: float) -> None:
        self.pace = pace
        self.requests: list[Request] = []
        self._lock = threading.Condition()
        self._in_flight: Counter[str] = Counter()
        self.most_in_flight: Counter[str] = Counter()
        self._answered: Counter[str] = Counter()
        endpoints = self

        class Handle(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                endpoints._serve(self)

            def log_message(self, *args: object) -> None: ...

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @staticmethod
    def organization(path: str) -> str:
        parts = path.strip("/").split("/")
        return parts[1] if parts[0] == "slow" else parts[0]

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        path, organization = handler.path, self.organization(handler.path)
        with self._lock:
            request = Request(path, time.monotonic(), answered_before=Counter(self._answered))
            self.requests.append(request)
            for key in (organization, path, "*"):
                self._in_flight[key] += 1
                self.most_in_flight[key] = max(self.most_in_flight[key], self._in_flight[key])
            self._lock.notify_all()
        handler.close_connection = True
        pause = threading.Event()
        # The answer's last byte is sent only after the request is counted done: once it
        # is out, the client may finish, free its slot and start its next delivery
        # before this thread runs again, which would count one request too many.
        body, last = HEAD[:-1], HEAD[-1:]
        try:
            if path.startswith("/slow/"):
                for index in range(len(body)):
                    handler.wfile.write(body[index : index + 1])
                    handler.wfile.flush()
                    pause.wait(self.pace)
            else:
                handler.wfile.write(body)
            self._finish(request, organization, path)
            handler.wfile.write(last)
            handler.wfile.flush()
        except OSError:
            pass  # the client gave up: its attempt records no answer
        finally:
            self._finish(request, organization, path)

    def _finish(self, request: Request, organization: str, path: str) -> None:
        with self._lock:
            if request.done is not None:
                return
            request.done = time.monotonic()
            for key in (organization, path, "*"):
                self._in_flight[key] -= 1
            self._answered[organization] += 1
            self._lock.notify_all()

    def wait_for(self, predicate: Callable[[Endpoints], bool], patience: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout=patience)

    def in_flight(self, key: str) -> int:
        return self._in_flight[key]

    def to(self, prefix: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(prefix)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Invocations:
    """At most ``concurrency`` invocations of the worker Lambda at once (the event source
    mapping's maximum concurrency), each with up to ``batch`` records: received from
    the queue, handed to the entry point as an SQS event, the records it did not report
    as failed deleted, the failed ones left to come back after their visibility timeout."""

    queue_url: str
    concurrency: int
    batch: int = 1
    handled: int = 0
    failed: int = 0
    groups: Counter[str] = field(default_factory=Counter)
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        # A client is built once and shared (building one is not thread-safe).
        self._sqs = boto3.client("sqs", region_name="us-east-1")
        self._arn = self._sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                received = self._sqs.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=self.batch,
                    WaitTimeSeconds=0,
                    MessageSystemAttributeNames=["All"],
                ).get("Messages", [])
                if not received:
                    self._stop.wait(0.05)
                    continue
                self._invoke(received)
            except BaseException as error:  # surfaced by the test, never swallowed
                with self._lock:
                    self.errors.append(error)
                return

    def _invoke(self, received: list[dict[str, Any]]) -> None:
        records = [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": self._arn,
                "awsRegion": "us-east-1",
            }
            for message in received
        ]
        answer = worker_lambda.handler({"Records": records}, None)
        failed = {failure["itemIdentifier"] for failure in answer["batchItemFailures"]}
        for message in received:
            if message["MessageId"] not in failed:
                self._sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        with self._lock:
            self.handled += len(received)
            self.failed += len(failed)
            for message in received:
                self.groups[message.get("Attributes", {}).get("MessageGroupId", "")] += 1

    @contextmanager
    def running(self) -> Iterator[Invocations]:
        threads = [
            threading.Thread(target=self._poll, name=f"invocation-{n}", daemon=True)
            for n in range(self.concurrency)
        ]
        for thread in threads:
            thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            for thread in threads:
                thread.join(30)

    def queue_is_empty(self) -> bool:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return all(int(value) == 0 for value in attributes.values())


def admin_of(organization_id: str) -> Principal:
    return Principal(
        kind=PrincipalKind.USER,
        id=f"admin-{organization_id}",
        organization_id=organization_id,
        permissions=frozenset(Permission),
        display="admin",
    )


def errored(organization_id: str, workspace_id: str, run_id: str, at: Any) -> RunEvent:
    return RunEvent(
        id=f"{run_id}.0000000004",
        type=EventType.ERRORED,
        run_id=run_id,
        organization_id=organization_id,
        workspace_id=workspace_id,
        run_kind=RunKind.PLAN_AND_APPLY,
        status=RunStatus.PLAN_FAILED,
        at=at,
        reason="the plan failed",
    )
