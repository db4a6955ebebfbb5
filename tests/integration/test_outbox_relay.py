"""The outbox and its relay against moto's server, streams and all (moto serves
DynamoDB Streams only in server mode): a committed move is announced even though
nothing was sent when it committed, exactly once; a refused move announces nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer

from runplane.domain.entities import Run
from runplane.domain.errors import TransitionRejected
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import move_event_id
from runplane.local.moto_serial import serialize_requests
from runplane.local.moto_streams import bound_streams
from runplane.local.stack import free_port
from runplane.local.stream_relay import StreamRelay
from runplane.services.event_relay import EventRelay
from runplane.services.lifecycle import RunLifecycle
from runplane.services.run_events import RunEvents
from runplane.services.tenancy import Tenancy
from runplane.store import models
from runplane.store.outbox import DynamoEventOutbox
from runplane.store.provision import create_table
from runplane.store.runs import RunRepository
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from runplane.wiring import run_lifecycle
from tests.builders import bare_run
from tests.fakes import FakeClock, SeededIds
from tests.integration.test_run_events import ListQueue

TABLE = "runplane-outbox-test"
REGION = "us-east-1"


class ProcessDied(Exception):
    """What any send from the moving process would meet: it is gone."""


def dead_queue() -> Any:
    raise ProcessDied


@dataclass
class Server:
    clock: FakeClock
    ids: SeededIds
    dynamodb: Any
    streams: Any
    lifecycle: RunLifecycle
    org_id: str
    workspace_id: str

    def new_run(self) -> Run:
        return bare_run(
            self.clock,
            self.ids,
            RunRepository(self.clock, self.ids),
            self.org_id,
            self.workspace_id,
            RunKind.PLAN_AND_APPLY,
            actor="tester",
        )

    def relay_process(self, queue: ListQueue) -> StreamRelay:
        """A fresh relay (another process) reading the table's stream into ``queue``."""
        return StreamRelay.for_table(
            self.dynamodb, self.streams, TABLE, EventRelay(lambda: queue, DynamoEventOutbox()).relay
        )

    def outbox_items(self) -> list[dict[str, Any]]:
        items = self.dynamodb.scan(TableName=TABLE, ConsistentRead=True)["Items"]
        return [item for item in items if item["SK"]["S"].startswith("EVENT#")]


@pytest.fixture
def server() -> Iterator[Server]:
    serialize_requests("dynamodb")
    serialize_requests("dynamodbstreams")
    bound_streams()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    moto.start()
    try:
        endpoint = f"http://127.0.0.1:{moto._port}"
        session = boto3.session.Session(region_name=REGION)
        dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        create_table(dynamodb, TABLE)
        models.bind(TABLE, REGION, endpoint)
        clock, ids = FakeClock(), SeededIds()
        # The moving process: it writes the outbox, and would fail on any send.
        lifecycle = run_lifecycle(clock, ids, RunEvents(clock, dead_queue, DynamoEventOutbox()))
        tenancy = Tenancy(clock, ids, DynamoWorkspaceDirectory())
        org = tenancy.create_organization("acme")
        workspace = tenancy.create_workspace(org.id, "network")
        yield Server(
            clock,
            ids,
            dynamodb,
            session.client("dynamodbstreams", endpoint_url=endpoint),
            lifecycle,
            org.id,
            workspace.id,
        )
    finally:
        # moto's backends are the process's: leave none of this test's tables behind.
        requests.post(f"http://127.0.0.1:{moto._port}/moto-api/reset", timeout=30)
        moto.stop()


def test_a_committed_move_is_announced_exactly_once_though_its_process_sent_nothing(
    server: Server,
) -> None:
    # Given a run, and a process that commits a move and "dies" before sending anything
    run = server.new_run()
    moved = server.lifecycle.move(run, RunStatus.CANCELED, actor="tester", reason="not needed")
    # Then the move committed with its outbox item, and nothing was sent by the mover
    assert server.lifecycle.runs.get(run.id).status is RunStatus.CANCELED
    [item] = server.outbox_items()
    event_id = move_event_id(run.id, moved.transition.version)
    assert item["SK"]["S"] == f"EVENT#{event_id}"
    # When a relay (another process) reads the table's stream, again and again
    queue = ListQueue()
    relay = server.relay_process(queue)
    for _ in range(3):
        relay.step()
    # Then the run event reached the queue exactly once, as the run's move made it
    assert [message for message, _ in queue.sent] == [
        {
            "kind": "run_event",
            "event": {
                "id": event_id,
                "type": "ended",
                "run_id": run.id,
                "organization_id": server.org_id,
                "workspace_id": server.workspace_id,
                "run_kind": "plan_and_apply",
                "status": "canceled",
                "at": moved.transition.at.isoformat(),
                "reason": "not needed",
                "details": {"from_status": "dispatch_pending"},
                "created_by_source": False,
                # The move read no workspace: its consumers look for subscribers.
                "subscribers": None,
            },
        }
    ]
    assert json.loads(item["message"]["S"]) == queue.sent[0][0]
    assert int(item["expires_at"]["N"]) > int(moved.transition.at.timestamp())


def test_a_refused_move_writes_no_outbox_item_and_its_stream_announces_nothing(
    server: Server,
) -> None:
    # Given a run that moved on (to queued: a move without an event) after a snapshot
    run = server.new_run()
    server.lifecycle.move(run, RunStatus.QUEUED, actor="workflow")
    # When the stale snapshot is moved to canceled
    with pytest.raises(TransitionRejected):
        server.lifecycle.move(run, RunStatus.CANCELED, actor="tester")
    # Then the run is still queued, no outbox item exists
    assert server.lifecycle.runs.get(run.id).status is RunStatus.QUEUED
    assert server.outbox_items() == []
    # And a relay reading the stream finds no event to queue
    queue = ListQueue()
    relay = server.relay_process(queue)
    assert relay.step() > 0  # it did read the run's records
    assert queue.sent == []


def test_a_relay_that_cannot_queue_keeps_the_event_until_it_can(server: Server) -> None:
    # Given a committed move, and a relay whose queue is down at first
    run = server.new_run()
    server.lifecycle.move(run, RunStatus.CANCELED, actor="tester")
    queue, down = ListQueue(), [True]

    def flaky() -> ListQueue:
        if down[0]:
            raise ConnectionError("queue unreachable")
        return queue

    relay = StreamRelay.for_table(
        server.dynamodb, server.streams, TABLE, EventRelay(flaky, DynamoEventOutbox()).relay
    )
    # When it reads the stream while the queue is down, then after it is back
    relay.step()
    assert queue.sent == []
    down[0] = False
    relay.step()
    relay.step()
    # Then the event was queued once
    assert [m["event"]["run_id"] for m, _ in queue.sent] == [run.id]


def test_the_stack_wakes_its_relay_on_every_write_and_only_on_writes(server: Server) -> None:
    # Given a listener of the stack's DynamoDB writes
    from runplane.local import moto_serial

    heard: list[str] = []

    def listener() -> None:
        heard.append("write")

    moto_serial.WRITE_LISTENERS.append(listener)
    try:
        # When a run is created (one transaction), read back, and its stream listed
        run = server.new_run()
        after_create = len(heard)
        server.lifecycle.runs.get(run.id)
        server.streams.list_streams()

        # Then the write woke the listener, and the reads did not
        assert after_create >= 1
        assert len(heard) == after_create
    finally:
        moto_serial.WRITE_LISTENERS.remove(listener)
