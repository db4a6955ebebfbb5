"""Run triggers and notifications against moto: rules, idempotency, refusals, HMAC."""

from __future__ import annotations

import http.server
import ipaddress
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, cast

import boto3
import pytest
import requests

from runplane.adapters.event_queue import MAX_DELAY_SECONDS
from runplane.adapters.webhooks import PostResult, WebhookClient
from runplane.adapters.workflow import Workflow
from runplane.domain import notifications as rules
from runplane.domain.errors import InvalidInput, NotFound, RunTriggerRefused
from runplane.domain.github import Ingestion
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType, RunEvent
from runplane.services.github import commit_status_reports
from runplane.services.launch_controls import Controls, LaunchControls
from runplane.services.notifications import Notifications
from runplane.services.run_events import EventWorker, RunEvents
from runplane.services.run_triggers import RunTriggers
from runplane.store import audit, run_parts
from runplane.store.launch_controls import DynamoLaunchControls
from runplane.store.notification_store import DynamoNotificationStore
from runplane.store.outbox import DynamoEventOutbox
from runplane.store.prefetch import IdentityMap
from runplane.store.run_reader import DynamoRunReader
from runplane.store.run_trigger_store import DynamoRunTriggerStore, DynamoTriggerClaims
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from tests.integration.arena import Arena, FakeWorkflow, created
from tests.integration.drive import walk
from tests.integration.outbox import relay_outbox


@dataclass
class ListQueue:
    """Our EventQueue port, keeping what was sent."""

    sent: list[tuple[dict[str, Any], int]] = field(default_factory=list)

    def send(self, message: Any, delay_seconds: int = 0) -> None:
        self.sent.append((json.loads(json.dumps(dict(message))), delay_seconds))


def triggers_of(arena: Arena, queue: ListQueue | None = None) -> RunTriggers:
    stack = arena.stack
    return RunTriggers(
        stack.clock,
        stack.ids,
        stack.workspaces,
        arena.runs,
        DynamoRunReader(stack.records),
        FakeWorkflow(),
        queue if queue is not None else ListQueue(),
        triggers=DynamoRunTriggerStore(),
        directory=DynamoWorkspaceDirectory(),
        claims=DynamoTriggerClaims(),
    )


def applied_event(arena: Arena, workspace_id: str, run_id: str) -> RunEvent:
    return RunEvent(
        id=f"{run_id}.0000000009",
        type=EventType.APPLIED,
        run_id=run_id,
        organization_id=arena.org.id,
        workspace_id=workspace_id,
        run_kind=RunKind.PLAN_AND_APPLY,
        status=RunStatus.SUCCEEDED,
        at=arena.stack.clock.now(),
    )


# -- run triggers -----------------------------------------------------------------------


def test_twenty_sources_at_most_and_the_refusal_writes_nothing(arena: Arena) -> None:
    # Given a workspace with 20 sources
    stack = arena.stack
    dependent = stack.tenancy.create_workspace(arena.org.id, "dependent").id
    triggers = triggers_of(arena)
    for n in range(20):
        source = stack.tenancy.create_workspace(arena.org.id, f"source-{n}").id
        triggers.add(arena.admin, dependent, source)
    extra = stack.tenancy.create_workspace(arena.org.id, "source-20").id
    snapshot = stack.scan()
    # When a 21st is added
    with pytest.raises(RunTriggerRefused) as refused:
        triggers.add(arena.admin, dependent, extra)
    # Then it is a 422 and nothing was written
    assert refused.value.http_status == 422
    assert "at most 20" in refused.value.message
    assert stack.scan() == snapshot
    assert len(triggers.show(arena.admin, dependent)["sources"]) == 20


def test_self_and_cycles_are_refused_writing_nothing(arena: Arena) -> None:
    # Given A -> B -> C (A is a source of B, B of C)
    stack = arena.stack
    a, b, c = (stack.tenancy.create_workspace(arena.org.id, n).id for n in "abc")
    triggers = triggers_of(arena)
    triggers.add(arena.admin, b, a)
    triggers.add(arena.admin, c, b)
    snapshot = stack.scan()
    # When C is made a source of A (closing a cycle), or A a source of itself
    for dependent, source in ((a, c), (a, a)):
        with pytest.raises(RunTriggerRefused):
            triggers.add(arena.admin, dependent, source)
    # Then nothing was written
    assert stack.scan() == snapshot


def test_unknown_and_other_organizations_workspaces_are_not_found(arena: Arena) -> None:
    # Given a workspace in another organization
    stack = arena.stack
    mine = stack.tenancy.create_workspace(arena.org.id, "mine").id
    other_org = stack.tenancy.create_organization("other")
    theirs = stack.tenancy.create_workspace(other_org.id, "theirs").id
    snapshot = stack.scan()
    # When either is named as a source
    for source in (theirs, "ws-aaaaaaaaaaaaaaaaaaaaaaaaaa"):
        with pytest.raises(NotFound) as missing:
            triggers_of(arena).add(arena.admin, mine, source)
        # Then 404, and nothing was written
        assert missing.value.http_status == 404
    assert stack.scan() == snapshot


def test_a_trigger_refused_by_launch_controls_backs_off_then_records_the_skip(
    arena: Arena,
) -> None:
    # Given A is a source of B, B has run before, and launches are then switched off
    stack = arena.stack
    a, source_run = created(arena, "a")
    b, _ = created(arena, "b")
    queue = ListQueue()
    triggers = triggers_of(arena, queue)
    triggers.add(arena.admin, b, a)
    LaunchControls(
        stack.clock, DynamoLaunchControls(), region="us-east-1", policy_runtime="none"
    ).set(arena.admin, "organization", Controls(launches_enabled=False))
    before = {r.id for r in stack.lifecycle.runs.list_for_workspace(b)}
    event = applied_event(arena, a, source_run)

    # When A's applied event is handled, and every retry it queues is consumed
    triggers.on_event(event)
    delays = []
    while queue.sent:
        message, delay = queue.sent.pop(0)
        delays.append(delay)
        triggers.retry(message)

    # Then the launch was retried with growing delays a bounded number of times
    assert delays == [60, 120, 240, 480]
    # And no run exists in B; the source run's review and the audit trail say why
    assert {r.id for r in stack.lifecycle.runs.list_for_workspace(b)} == before
    review = arena.runs.review(arena.admin, source_run)
    [skipped] = review["triggered_runs"]
    assert (skipped["workspace_id"], skipped["run_id"]) == (b, None)
    assert skipped["skipped"].startswith("launch refused 5 times: launches are switched off")
    [audited] = [
        e
        for e in audit.organization_trail(arena.org.id)
        if (e.subject_id, e.type) == (source_run, "run_trigger.skipped")
    ]
    assert audited.details["dependent_workspace_id"] == b
    assert audited.details["reason"] == skipped["skipped"]

    # When launches are back and the event is redelivered
    LaunchControls(
        stack.clock, DynamoLaunchControls(), region="us-east-1", policy_runtime="none"
    ).set(arena.admin, "organization", Controls())
    snapshot = stack.scan()
    triggers.on_event(event)
    # Then the recorded skip stands: nothing is queued or written
    assert stack.scan() == snapshot
    assert queue.sent == []


# -- the hook ---------------------------------------------------------------------------


def test_committed_moves_publish_events_and_a_no_change_run_is_not_applied(arena: Arena) -> None:
    # Given a lifecycle that announces its moves (in the outbox), relayed to a queue
    stack = arena.stack
    queue = ListQueue()
    stack.lifecycle.events = RunEvents(stack.clock, lambda: queue, DynamoEventOutbox())
    _, changed = created(arena, "changes")
    _, unchanged = created(arena, "no-changes")
    # When one run applies and one finds nothing to change
    walk(stack.lifecycle, stack.lifecycle.runs.get(changed), RunStatus.SUCCEEDED)
    rest = walk(
        stack.lifecycle, stack.lifecycle.runs.get(unchanged), RunStatus.POLICY_PASSED, changes=False
    )
    stack.lifecycle.move(rest, RunStatus.SUCCEEDED, actor="workflow")
    relay_outbox(stack.scan(), queue)
    # Then the applied run published needs_attention then applied; the other only ended
    by_run: dict[str, list[str]] = {}
    for message, _ in queue.sent:
        event = message["event"]
        by_run.setdefault(event["run_id"], []).append(event["type"])
    assert by_run[changed] == ["needs_attention", "applied"]
    assert by_run[unchanged] == ["ended"]
    assert all(set(m) <= {"kind", "event"} for m, _ in queue.sent)


# -- notifications ----------------------------------------------------------------------


class Receiver:
    """A webhook receiver on 127.0.0.1 answering from a script of statuses."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.received: list[tuple[bytes, dict[str, str]]] = []
        receiver = self

        class Handle(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((body, dict(self.headers)))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None: ...

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/secret-path"

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver([500, 500])
    yield made
    made.close()


def test_deliveries_are_signed_retried_with_backoff_and_recorded(
    arena: Arena, receiver: Receiver
) -> None:
    # Given a destination for applied events whose receiver fails twice
    stack = arena.stack
    queue = ListQueue()
    notifications = Notifications(
        stack.clock,
        stack.ids,
        stack.workspaces,
        stack.keys,
        queue,
        allow_http=True,
        address_policy=rules.AddressPolicy(allow_loopback=True),
        retry_base_seconds=5,
        control_plane_url="http://127.0.0.1:1",
        destinations=DynamoNotificationStore(),
        directory=DynamoWorkspaceDirectory(),
    )
    a, run_id = created(arena, "a")
    made = notifications.create(
        arena.admin, a, name="ops", kind="webhook", url=receiver.url, events=["applied"]
    )
    event = applied_event(arena, a, run_id)
    # When the event is handled twice, and every queued delivery message is consumed
    notifications.on_event(event)
    notifications.on_event(event)
    delays = []
    while queue.sent:
        message, delay = queue.sent.pop(0)
        delays.append(delay)
        notifications.attempt(message)
    # Then the second handling re-queued the unsent delivery (crash recovery) and that
    # duplicate message lost its claim: three requests, one delivery, growing delays
    assert delays == [0, 0, 5, 10]
    assert len(receiver.received) == 3
    listed = notifications.deliveries(arena.admin, a, made.view["id"])
    assert len(listed) == 1
    assert listed[0]["status"] == "delivered"
    assert [(x["attempt"], x["response_code"]) for x in listed[0]["attempts"]] == [
        (1, 500),
        (2, 500),
        (3, 200),
    ]
    # And each body carries a valid HMAC under the destination's secret
    for body, headers in receiver.received:
        assert rules.verify(made.signing_secret.encode(), body, headers[rules.SIGNATURE_HEADER])
        assert json.loads(body)["run"]["id"] == run_id
    # And neither the secret nor the URL's path is stored or listed in the clear
    dump = json.dumps(stack.scan(), default=str)
    assert made.signing_secret not in dump
    assert "secret-path" not in dump
    assert (
        notifications.list_for(arena.admin, a)[0]["url"]
        == f"http://127.0.0.1:{receiver.server.server_address[1]}/…"
    )


def test_a_receiver_that_is_down_is_given_up_after_the_last_attempt(arena: Arena) -> None:
    # Given a destination nobody listens on
    stack = arena.stack
    queue = ListQueue()
    notifications = Notifications(
        stack.clock,
        stack.ids,
        stack.workspaces,
        stack.keys,
        queue,
        allow_http=True,
        address_policy=rules.AddressPolicy(allow_loopback=True),
        retry_base_seconds=1,
        control_plane_url="http://127.0.0.1:1",
        destinations=DynamoNotificationStore(),
        directory=DynamoWorkspaceDirectory(),
    )
    a, run_id = created(arena, "a")
    made = notifications.create(
        arena.admin, a, name="down", kind="slack", url="http://127.0.0.1:9/x", events=["applied"]
    )
    # When its deliveries are consumed
    notifications.on_event(applied_event(arena, a, run_id))
    while queue.sent:
        notifications.attempt(queue.sent.pop(0)[0])
    # Then it failed after MAX_ATTEMPTS attempts, each recorded with no response code
    [delivery] = notifications.deliveries(arena.admin, a, made.view["id"])
    assert delivery["status"] == "failed"
    assert len(delivery["attempts"]) == rules.MAX_ATTEMPTS
    assert all(x["response_code"] is None for x in delivery["attempts"])
    assert run_parts.get(run_id, "input", reads=IdentityMap()) is not None


class CrashingClient(WebhookClient):
    """A worker that stops mid-send (the process dies after claiming the attempt)."""

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> PostResult:
        raise KeyboardInterrupt


def test_an_attempt_abandoned_by_a_stopped_worker_is_reclaimed_after_its_lease(
    arena: Arena,
) -> None:
    # Given a delivery whose first attempt was claimed by a worker that then stopped
    stack = arena.stack
    queue = ListQueue()
    receiver = Receiver([])
    try:
        settings = dict(
            allow_http=True,
            retry_base_seconds=5,
            control_plane_url="http://x",
            address_policy=rules.AddressPolicy(allow_loopback=True),
            destinations=DynamoNotificationStore(),
            directory=DynamoWorkspaceDirectory(),
        )
        crashing = Notifications(
            stack.clock,
            stack.ids,
            stack.workspaces,
            stack.keys,
            queue,
            client=CrashingClient(),
            **settings,  # type: ignore[arg-type]
        )
        notifications = Notifications(
            stack.clock,
            stack.ids,
            stack.workspaces,
            stack.keys,
            queue,
            **settings,  # type: ignore[arg-type]
        )
        a, run_id = created(arena, "a")
        made = notifications.create(
            arena.admin, a, name="ops", kind="webhook", url=receiver.url, events=["applied"]
        )
        notifications.on_event(applied_event(arena, a, run_id))
        [(message, _)] = queue.sent
        queue.sent.clear()
        with pytest.raises(KeyboardInterrupt):
            crashing.attempt(message)
        [stuck] = notifications.deliveries(arena.admin, a, made.view["id"])
        assert (stuck["status"], stuck["attempts"]) == ("delivering", [])

        # When the message is redelivered while the lease still holds
        notifications.attempt(message)
        # Then nothing is sent; the message is put back until the lease runs out
        assert receiver.received == []
        [(again, delay)] = queue.sent
        queue.sent.clear()
        assert again == message
        assert 0 < delay <= rules.CLAIM_LEASE_SECONDS + 1

        # When it is handled again after the lease ran out
        stack.clock.advance(timedelta(seconds=rules.CLAIM_LEASE_SECONDS + 1))
        notifications.attempt(again)
        # Then the attempt is taken over and delivered; the lost one is on record
        [delivery] = notifications.deliveries(arena.admin, a, made.view["id"])
        assert delivery["status"] == "delivered"
        assert [(x["attempt"], x["outcome"], x["response_code"]) for x in delivery["attempts"]] == [
            (1, "lost", None),
            (2, "delivered", 200),
        ]
        assert len(receiver.received) == 1
        assert queue.sent == []
        # And a late copy of the message finds nothing left to do
        notifications.attempt(message)
        assert len(receiver.received) == 1
    finally:
        receiver.close()


def test_destination_urls_must_be_https_without_credentials(arena: Arena) -> None:
    stack = arena.stack
    notifications = Notifications(
        stack.clock,
        stack.ids,
        stack.workspaces,
        stack.keys,
        ListQueue(),
        allow_http=False,
        retry_base_seconds=1,
        control_plane_url="http://127.0.0.1:1",
        destinations=DynamoNotificationStore(),
        directory=DynamoWorkspaceDirectory(),
    )
    a = stack.tenancy.create_workspace(arena.org.id, "a").id
    snapshot = stack.scan()
    for url in ("http://example.com/hook", "https://user:pw@example.com/hook", "ftp://x/y"):
        with pytest.raises(InvalidInput) as refused:
            notifications.create(
                arena.admin, a, name="n", kind="webhook", url=url, events=["applied"]
            )
        assert refused.value.http_status == 422
        assert "pw" not in refused.value.message
    assert stack.scan() == snapshot


def test_a_public_name_that_resolves_to_loopback_at_delivery_is_not_delivered(
    arena: Arena, receiver: Receiver
) -> None:
    # Given a destination saved with a public-looking name (nothing internal to see on
    # save) whose DNS answers 127.0.0.1 when delivering, where a receiver listens
    stack = arena.stack
    queue = ListQueue()
    port = receiver.server.server_address[1]
    notifications = Notifications(
        stack.clock,
        stack.ids,
        stack.workspaces,
        stack.keys,
        queue,
        allow_http=True,
        retry_base_seconds=1,
        control_plane_url="http://127.0.0.1:1",
        client=WebhookClient(resolver=lambda host, port: [ipaddress.ip_address("127.0.0.1")]),
        destinations=DynamoNotificationStore(),
        directory=DynamoWorkspaceDirectory(),
    )
    a, run_id = created(arena, "a")
    made = notifications.create(
        arena.admin,
        a,
        name="rebound",
        kind="webhook",
        url=f"http://hooks.example.com:{port}/x",
        events=["applied"],
    )
    # When its delivery is attempted to the end, and it is tested
    notifications.on_event(applied_event(arena, a, run_id))
    while queue.sent:
        notifications.attempt(queue.sent.pop(0)[0])
    tested = notifications.test(arena.admin, a, made.view["id"])
    # Then nothing reached the receiver: every attempt was refused, and the test says
    # only that it was not delivered
    assert receiver.received == []
    [delivery] = notifications.deliveries(arena.admin, a, made.view["id"])
    assert delivery["status"] == "failed"
    assert {(x["response_code"], x["error"]) for x in delivery["attempts"]} == {
        (None, "destination address not allowed")
    }
    assert tested == {"destination_id": made.view["id"], "delivered": False}


# -- long waits -------------------------------------------------------------------------


@pytest.mark.parametrize("still_waiting", [True, False])
def test_approval_expiring_days_ahead_hops_through_the_queue_until_due(
    arena: Arena, still_waiting: bool
) -> None:
    # Given a worker warning a day before approval deadlines, and a run awaiting
    # approval whose deadline is three days away
    stack = arena.stack
    queue = ListQueue()
    events = RunEvents(stack.clock, lambda: queue, DynamoEventOutbox())
    seen: list[RunEvent] = []
    status = RunStatus.AWAITING_APPROVAL if still_waiting else RunStatus.REJECTED
    worker = EventWorker(
        stack.clock,
        queue,
        events,
        deliver=lambda message: None,
        approval_lead=timedelta(days=1),
        run_status=lambda run_id: status,
    )
    worker.subscribe(seen.append)
    a, run_id = created(arena, "a")
    deadline = stack.clock.now() + timedelta(days=3)
    waiting = RunEvent(
        **{
            **applied_event(arena, a, run_id).__dict__,
            "type": EventType.NEEDS_ATTENTION,
            "status": RunStatus.AWAITING_APPROVAL,
            "details": {"approval_expires_at": deadline.isoformat()},
        }
    )

    # When the needs_attention event is handled
    worker.handle({"kind": "run_event", "event": waiting.to_message()})
    [(expiring, _)] = queue.sent
    queue.sent.clear()
    # Then an approval_expiring message is queued for two days from now
    assert expiring["event"]["type"] == "approval_expiring"
    assert expiring["not_before"] == (deadline - timedelta(days=1)).isoformat()

    # When it is received early (SQS delays a message at most 15 minutes)
    stack.clock.advance(timedelta(days=1))
    worker.handle(expiring)
    # Then it is re-queued within SQS's limit and nobody is told yet
    [(hop, delay)] = queue.sent
    queue.sent.clear()
    assert (hop, delay) == (expiring, MAX_DELAY_SECONDS)
    assert [e.type for e in seen] == [EventType.NEEDS_ATTENTION]

    # When it is received once due
    stack.clock.advance(timedelta(days=1))
    worker.handle(hop)
    # Then handlers get approval_expiring only if the run still awaits approval
    told = [EventType.NEEDS_ATTENTION, EventType.APPROVAL_EXPIRING]
    assert [e.type for e in seen] == (told if still_waiting else told[:1])
    assert queue.sent == []


# -- commit statuses (a subscriber of the seam) ------------------------------------------


def run_by(arena: Arena, workspace_id: str, kind: RunKind, source: str | None = None) -> str:
    """A run created by a person, or (``source``) by that GitHub source ingestion."""
    principal = arena.admin
    if source is not None:
        principal = Principal(
            kind=PrincipalKind.SOURCE,
            id=source,
            organization_id=arena.org.id,
            permissions=frozenset(
                {Permission.RUN_CREATE, Permission.RUN_READ, Permission.WORKSPACE_READ}
            ),
            display=f"GitHub source {source}",
            workspace_id=workspace_id,
        )
    upload = arena.runs.new_configuration_upload(arena.admin, workspace_id)
    requests.put(upload.upload_url, data=b"config", timeout=30).raise_for_status()
    arena.runs.finalize_configuration(arena.admin, upload.id)
    return arena.runs.create(
        principal,
        workspace_id,
        kind=kind,
        configuration_version_id=upload.id,
        engine_version=None,
        variables={},
    ).id


def ending(
    arena: Arena, run_id: str, kind: RunKind, type_: EventType, status: RunStatus
) -> RunEvent:
    return RunEvent(
        id=f"{run_id}.0000000007",
        type=type_,
        run_id=run_id,
        organization_id=arena.org.id,
        workspace_id=arena.stack.lifecycle.runs.get(run_id).workspace_id,
        run_kind=kind,
        status=status,
        at=arena.stack.clock.now(),
    )


def test_a_pull_request_run_that_ended_starts_one_status_report_per_event(arena: Arena) -> None:
    # Given the source workflow (in moto) and a worker with the commit-status subscriber
    stack = arena.stack
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    machine = sfn.create_state_machine(
        name="runplane-source-test",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/runplane-source",
    )["stateMachineArn"]
    queue = ListQueue()
    worker = EventWorker(
        stack.clock,
        queue,
        RunEvents(stack.clock, lambda: queue, DynamoEventOutbox()),
        deliver=lambda message: None,
        approval_lead=timedelta(0),
        run_status=lambda run_id: stack.lifecycle.runs.get(run_id).status,
    )
    worker.subscribe(commit_status_reports(Workflow(sfn, machine), stack.records))
    # And speculative runs a source ingestion and a person created, and a source's push run
    ws = stack.tenancy.create_workspace(arena.org.id, "pr").id
    pull_request = run_by(arena, ws, RunKind.SPECULATIVE, source="src-1")
    manual = run_by(arena, ws, RunKind.SPECULATIVE)
    push = run_by(arena, ws, RunKind.PLAN_AND_APPLY, source="src-1")

    def handle(event: RunEvent) -> None:
        worker.handle({"kind": "run_event", "event": event.to_message()})

    # When the pull request's run ends (its event delivered twice), the others end, and
    # the pull request's run publishes a non-terminal event
    spec = RunKind.SPECULATIVE
    ended = ending(arena, pull_request, spec, EventType.ENDED, RunStatus.SUCCEEDED)
    handle(ended)
    handle(ended)
    handle(ending(arena, manual, spec, EventType.ERRORED, RunStatus.PLAN_FAILED))
    handle(ending(arena, push, RunKind.PLAN_AND_APPLY, EventType.APPLIED, RunStatus.SUCCEEDED))
    waiting = RunStatus.AWAITING_APPROVAL
    handle(ending(arena, pull_request, spec, EventType.NEEDS_ATTENTION, waiting))

    # Then exactly one report was started, named after the ending event, with IDs only
    executions = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert [e["name"] for e in executions] == [f"{ended.id}-status"]
    described = sfn.describe_execution(executionArn=executions[0]["executionArn"])
    assert json.loads(described["input"]) == {"action": "report_status", "run_id": pull_request}


@dataclass
class RecordingWorkflow:
    started: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def start_named(self, name: str, ids: Mapping[str, str]) -> None:
        self.started.append((name, dict(ids)))


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (EventType.APPLIED, RunStatus.SUCCEEDED),
        (EventType.ERRORED, RunStatus.PLAN_FAILED),
        (EventType.EXPIRED, RunStatus.EXPIRED),
        (EventType.NEEDS_RECOVERY, RunStatus.NEEDS_RECOVERY),
        (EventType.ENDED, RunStatus.CANCELED),
    ],
)
def test_every_ending_event_reports_a_pull_request_status(
    arena: Arena, kind: EventType, status: RunStatus
) -> None:
    # Given a pull request's run and the commit-status subscriber
    workflow = RecordingWorkflow()
    report = commit_status_reports(workflow, arena.stack.records)  # type: ignore[arg-type]
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "ending").id
    run_id = run_by(arena, ws, RunKind.SPECULATIVE, source="src-2")
    # When the run's ending event of this kind is handled
    event = ending(arena, run_id, RunKind.SPECULATIVE, kind, status)
    report(event)
    # Then its status report is started
    assert workflow.started == [
        (f"{event.id}-status", {"action": "report_status", "run_id": run_id})
    ]


class KnownIngestions:
    """The ingestions the status reports look up, by ID."""

    def __init__(self, events: dict[str, str]) -> None:
        self.events = events

    def ingestion(self, source_id: str) -> Ingestion | None:
        event = self.events.get(source_id)
        return None if event is None else cast(Ingestion, SimpleNamespace(event=event))


def test_a_preview_workspaces_run_reports_its_approval_wait_and_ending_a_pushs_nothing(
    arena: Arena,
) -> None:
    # Given a preview workspace's run a pull request's ingestion created, and a push's
    workflow = RecordingWorkflow()
    report = commit_status_reports(
        workflow,  # type: ignore[arg-type]
        arena.stack.records,
        KnownIngestions({"src-pr": "pull_request", "src-push": "push"}),
    )
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "preview").id
    preview = run_by(arena, ws, RunKind.PLAN_AND_APPLY, source="src-pr")
    push = run_by(arena, ws, RunKind.PLAN_AND_APPLY, source="src-push")
    apply = RunKind.PLAN_AND_APPLY
    # When each awaits approval, then is applied
    events = [
        ending(arena, run_id, apply, kind, status)
        for run_id in (preview, push)
        for kind, status in (
            (EventType.NEEDS_ATTENTION, RunStatus.AWAITING_APPROVAL),
            (EventType.APPLIED, RunStatus.SUCCEEDED),
        )
    ]
    for event in events:
        report(event)
    # Then the preview's run reports both, the push's run nothing
    assert workflow.started == [
        (f"{event.id}-status", {"action": "report_status", "run_id": preview})
        for event in events[:2]
    ]


def test_a_triggered_run_takes_its_workspaces_variables(arena: Arena) -> None:
    # Given A is a source of B, and B has a plain and a sensitive workspace variable
    a, source_run = created(arena, "vars-a")
    b, _ = created(arena, "vars-b")
    variables = arena.stack.services.workspace_variables
    variables.set(arena.admin, b, "region", "eu-west-3")
    variables.set(arena.admin, b, "token", "hidden-value", sensitive=True)
    triggers = triggers_of(arena)
    triggers.add(arena.admin, b, a)
    before = {r.id for r in arena.stack.lifecycle.runs.list_for_workspace(b)}

    # When A's run is applied
    triggers.on_event(applied_event(arena, a, source_run))

    # Then B's triggered run carries both, named as the workspace's, values unshown
    new = [r for r in arena.stack.lifecycle.runs.list_for_workspace(b) if r.id not in before]
    review = arena.runs.review(arena.admin, new[0].id)
    assert [(v["name"], v["source"]) for v in review["input"]["variables"]] == [
        ("region", "workspace"),
        ("token", "workspace"),
    ]
    assert "hidden-value" not in json.dumps(review, default=str)
