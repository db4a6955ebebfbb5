"""Schedules on moto: registration with EventBridge Scheduler, tenancy, drift records,
and a scheduled run's workspace variables. Fires (once, duplicates, skips while the
previous scheduled run is active) are the service tier's (tests/service/test_run_creation.py),
what they write held by tests/integration/test_run_creations_contract.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
import requests

from runplane.adapters.scheduler import SCHEDULED_TIME, EventBridgeSchedules
from runplane.domain import notifications as rules
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.identity import Permission
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.run import RunKind, RunStatus
from runplane.services import drift
from runplane.services.notifications import Notifications
from runplane.services.run_events import EventWorker, RunEvents
from runplane.services.schedules import Schedules
from runplane.store import run_parts
from runplane.store.notification_store import DynamoNotificationStore
from runplane.store.outbox import DynamoEventOutbox
from runplane.store.prefetch import IdentityMap
from runplane.store.run_reader import DynamoRunReader
from runplane.store.schedule_store import DynamoScheduleStore
from runplane.store.schedules import get_drift
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from tests.integration.arena import Arena, planned, planning, report_planned, show_json
from tests.integration.outbox import relay_outbox
from tests.integration.test_run_events import ListQueue, Receiver

GROUP = "runplane-schedules-test"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:runplane-fire"
ROLE = "arn:aws:iam::123456789012:role/runplane-scheduler"
FIRE_AT = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


@pytest.fixture
def scheduler(arena: Arena) -> object:
    client = boto3.client("scheduler", region_name="us-east-1")
    client.create_schedule_group(Name=GROUP)
    return client


@pytest.fixture
def schedules(arena: Arena, scheduler: object) -> Schedules:
    registry = EventBridgeSchedules(scheduler, group=GROUP, target_arn=TARGET, role_arn=ROLE)
    stack = arena.stack
    return Schedules(
        stack.clock,
        stack.ids,
        stack.workspaces,
        arena.runs,
        DynamoRunReader(stack.records),
        registry,
        DynamoScheduleStore(),
    )


def _uploaded_workspace(arena: Arena, name: str) -> str:
    ws = arena.stack.tenancy.create_workspace(arena.org.id, name)
    upload = arena.runs.new_configuration_upload(arena.admin, ws.id)
    requests.put(upload.upload_url, data=b"terraform config", timeout=30).raise_for_status()
    arena.runs.finalize_configuration(arena.admin, upload.id)
    return ws.id


def test_a_schedule_is_registered_with_ids_only_and_the_aws_expression(
    arena: Arena, schedules: Schedules, scheduler: object
) -> None:
    # Given a workspace
    ws_id = _uploaded_workspace(arena, "registered")

    # When a schedule is created for weekdays at 03:00 UTC
    schedule = schedules.create(arena.admin, ws_id, "0 3 * * 1-5", "plan_only")

    # Then EventBridge Scheduler holds it, targeting the fire Lambda with IDs only
    held = scheduler.get_schedule(Name=schedule.id, GroupName=GROUP)  # type: ignore[attr-defined]
    assert held["ScheduleExpression"] == "cron(0 3 ? * 2,3,4,5,6 *)"
    assert held["ScheduleExpressionTimezone"] == "UTC"
    assert held["State"] == "ENABLED"
    assert held["Target"]["Arn"] == TARGET
    assert json.loads(held["Target"]["Input"]) == {
        "schedule_id": schedule.id,
        "workspace_id": ws_id,
        "scheduled_time": SCHEDULED_TIME,
    }


def test_pause_disables_and_delete_unregisters(
    arena: Arena, schedules: Schedules, scheduler: object
) -> None:
    # Given a schedule
    ws_id = _uploaded_workspace(arena, "paused")
    schedule = schedules.create(arena.admin, ws_id, "rate(1 hour)", "plan_only")

    # When it is paused
    paused = schedules.set_paused(arena.admin, schedule.id, True)

    # Then it is disabled in Scheduler and a fire creates nothing
    held = scheduler.get_schedule(Name=schedule.id, GroupName=GROUP)  # type: ignore[attr-defined]
    assert (paused.state, held["State"]) == ("paused", "DISABLED")
    assert schedules.fire(schedule.id, FIRE_AT) == {"outcome": "paused"}
    assert arena.runs.list(arena.admin, ws_id) == []

    # When it is deleted, Then Scheduler no longer has it and reads are 404
    schedules.delete(arena.admin, schedule.id)
    listed = scheduler.list_schedules(GroupName=GROUP)["Schedules"]  # type: ignore[attr-defined]
    assert listed == []
    with pytest.raises(NotFound):
        schedules.get(arena.admin, schedule.id)


def test_a_too_frequent_or_malformed_expression_is_refused_and_writes_nothing(
    arena: Arena, schedules: Schedules, scheduler: object
) -> None:
    # Given a workspace
    ws_id = _uploaded_workspace(arena, "refused")
    before = arena.stack.scan()

    # When schedules fire every 5 minutes, or are not cron at all
    for expression in ("*/5 * * * *", "rate(10 minutes)", "0 25 * * *", "daily"):
        with pytest.raises(InvalidInput) as refused:
            schedules.create(arena.admin, ws_id, expression, "plan_only")
        # Then each is a 422 naming the field
        assert refused.value.pointer == "/expression"

    # And nothing was written or registered
    assert arena.stack.scan() == before
    assert scheduler.list_schedules(GroupName=GROUP)["Schedules"] == []  # type: ignore[attr-defined]


def test_another_organizations_workspace_is_not_found_and_nothing_is_written(
    arena: Arena, schedules: Schedules, scheduler: object
) -> None:
    # Given a workspace of another organization, and one of its schedules
    stack = arena.stack
    other = stack.tenancy.create_organization("globex")
    theirs = stack.tenancy.create_workspace(other.id, "theirs")
    token = stack.identity.issue_token(other.id, "admin", list(Permission), created_by="t").token
    their_admin = stack.identity.authenticate(f"Bearer {token}")
    their_schedule = schedules.create(their_admin, theirs.id, "0 4 * * *", "plan_only")
    before = stack.scan()

    # When our admin creates a schedule on it, or reads, pauses or deletes theirs
    # Then each is 404 and nothing changes
    with pytest.raises(NotFound):
        schedules.create(arena.admin, theirs.id, "0 3 * * *", "plan_only")
    with pytest.raises(NotFound):
        schedules.of_workspace(arena.admin, theirs.id)
    with pytest.raises(NotFound):
        schedules.set_paused(arena.admin, their_schedule.id, True)
    with pytest.raises(NotFound):
        schedules.delete(arena.admin, their_schedule.id)
    assert stack.scan() == before
    held = scheduler.get_schedule(Name=their_schedule.id, GroupName=GROUP)  # type: ignore[attr-defined]
    assert held["State"] == "ENABLED"


def _finish_scheduled_plan(arena: Arena, run_id: str, *, changes: bool) -> None:
    o = arena.orchestration
    o.queue(run_id)
    o.start_runner(run_id, "plan", "token-plan")
    if changes:
        report_planned(arena, run_id)
    else:
        attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]
        o.report_plan(run_id, attempt, planned(arena, run_id, PlanSummary(), show_json()))
    assert o.evaluate_policy(run_id) == {"next": "finish", "approval_timeout_seconds": None}
    o.finish_plan(run_id)


def test_drift_is_recorded_by_a_scheduled_plan_with_changes_and_cleared_by_one_without(
    arena: Arena, schedules: Schedules
) -> None:
    # Given a scheduled plan-only run
    ws_id = _uploaded_workspace(arena, "drifting")
    schedule = schedules.create(arena.admin, ws_id, "0 * * * *", "plan_only")
    first = schedules.fire(schedule.id, FIRE_AT)["run_id"]

    # When its plan finishes with changes
    _finish_scheduled_plan(arena, first, changes=True)

    # Then drift is recorded on the workspace with the run and the counts
    found = drift.view(get_drift(ws_id, reads=IdentityMap()))
    assert found is not None
    assert (found["drifted"], found["run_id"], found["schedule_id"]) == (True, first, schedule.id)
    assert found["summary"] == {"adds": 1, "changes": 0, "destroys": 0, "replaces": 0, "drifted": 0}
    assert arena.runs.review(arena.admin, first)["drift"] == {"detected": True}

    # When the next scheduled plan finds no changes
    arena.stack.clock.advance(timedelta(hours=1))
    second = schedules.fire(schedule.id, FIRE_AT.replace(hour=4))["run_id"]
    _finish_scheduled_plan(arena, second, changes=False)

    # Then drift is cleared by that run
    cleared = drift.view(get_drift(ws_id, reads=IdentityMap()))
    assert cleared is not None
    assert (cleared["drifted"], cleared["run_id"], cleared["cleared_by"]) == (
        False,
        second,
        "scheduled_plan",
    )


def test_a_plan_only_run_nobody_scheduled_records_no_drift(arena: Arena) -> None:
    # Given a plan-only run created by a person
    ws_id, run_id = planning(arena, "manual", kind=RunKind.PLAN_ONLY)

    # When its plan finishes with changes
    report_planned(arena, run_id)
    arena.orchestration.evaluate_policy(run_id)
    arena.orchestration.finish_plan(run_id)

    # Then the workspace has no drift record
    assert drift.view(get_drift(ws_id, reads=IdentityMap())) is None


def test_an_older_scheduled_run_finishing_later_does_not_overwrite_a_newer_finding(
    arena: Arena, schedules: Schedules
) -> None:
    # Given two schedules on a workspace, whose runs were created one after the other
    ws_id = _uploaded_workspace(arena, "ordering")
    early = schedules.create(arena.admin, ws_id, "0 * * * *", "plan_only")
    late = schedules.create(arena.admin, ws_id, "30 * * * *", "plan_only")
    older = schedules.fire(early.id, FIRE_AT)["run_id"]
    arena.stack.clock.advance(timedelta(minutes=30))
    newer = schedules.fire(late.id, FIRE_AT.replace(minute=30))["run_id"]

    # When the newer run finds no changes first, and the older one then finds changes
    _finish_scheduled_plan(arena, newer, changes=False)
    _finish_scheduled_plan(arena, older, changes=True)

    # Then the older run still succeeded, but the workspace keeps the newer finding
    assert arena.stack.lifecycle.runs.get(older).status is RunStatus.SUCCEEDED
    found = drift.view(get_drift(ws_id, reads=IdentityMap()))
    assert found is not None
    assert (found["drifted"], found["run_id"]) == (False, newer)


def test_a_drift_finding_reaches_a_destination_subscribed_to_drift_detected(
    arena: Arena, schedules: Schedules
) -> None:
    # Given a lifecycle announcing through the run-event seam (the outbox, relayed to a
    # queue) to a worker that delivers
    # notifications, and a workspace with one destination for drift_detected and one
    # for applied only
    stack = arena.stack
    queue = ListQueue()
    stack.lifecycle.events = RunEvents(stack.clock, lambda: queue, DynamoEventOutbox())
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
    worker = EventWorker(
        stack.clock,
        queue,
        stack.lifecycle.events,
        deliver=notifications.attempt,
        approval_lead=timedelta(0),
        run_status=lambda run_id: stack.lifecycle.runs.get(run_id).status,
    )
    worker.subscribe(notifications.on_event)
    ws_id = _uploaded_workspace(arena, "drift-notified")
    drifting, applied_only = Receiver([]), Receiver([])
    try:
        made = notifications.create(
            arena.admin,
            ws_id,
            name="drift",
            kind="webhook",
            url=drifting.url,
            events=["drift_detected"],
        )
        notifications.create(
            arena.admin,
            ws_id,
            name="applies",
            kind="webhook",
            url=applied_only.url,
            events=["applied"],
        )
        schedule = schedules.create(arena.admin, ws_id, "0 * * * *", "plan_only")
        run_id = schedules.fire(schedule.id, FIRE_AT)["run_id"]

        # When its scheduled plan finds changes, and the worker consumes the queue
        _finish_scheduled_plan(arena, run_id, changes=True)
        relay_outbox(stack.scan(), queue)
        while queue.sent:
            worker.handle(queue.sent.pop(0)[0])

        # Then the drift destination got one signed drift_detected delivery with the counts
        [(body, headers)] = drifting.received
        assert rules.verify(made.signing_secret.encode(), body, headers[rules.SIGNATURE_HEADER])
        sent = json.loads(body)
        assert (sent["event"], sent["event_id"]) == ("drift_detected", f"{run_id}.drift")
        assert sent["run"]["id"] == run_id
        assert sent["details"] == {
            "adds": "1",
            "changes": "0",
            "destroys": "0",
            "replaces": "0",
            "drifted": "0",
            "schedule_id": schedule.id,
        }
        [delivery] = notifications.deliveries(arena.admin, ws_id, made.view["id"])
        assert delivery["status"] == "delivered"
        # And the destination for applied runs heard nothing
        assert applied_only.received == []
    finally:
        drifting.close()
        applied_only.close()


def test_a_scheduled_run_takes_its_workspaces_variables(arena: Arena, schedules: Schedules) -> None:
    # Given a scheduled workspace with a workspace variable
    ws_id = _uploaded_workspace(arena, "scheduled-vars")
    arena.stack.services.workspace_variables.set(arena.admin, ws_id, "region", "eu-west-3")
    schedule = schedules.create(arena.admin, ws_id, "0 3 * * *", "plan_only")

    # When the schedule fires
    fired = schedules.fire(schedule.id, FIRE_AT)

    # Then the scheduled run's pinned input holds the workspace's variable
    snapshot = run_parts.require(fired["run_id"], "input").body
    assert snapshot["variable_names"] == ["region"]
    assert snapshot["workspace_variable_names"] == ["region"]
