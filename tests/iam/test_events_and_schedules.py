"""Run events delivered to a webhook, and a schedule firing a drift check, each handler
under its deployed role: the stream relay, the event worker, the schedule's function."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from runplane.store.run_reader import DynamoRunReader
from tests.e2e.conftest import unique
from tests.e2e.test_managed_runs import HELLO
from tests.e2e.test_run_events import Receiver, eventually
from tests.iam.conftest import Enforced
from tests.iam.observed import Scenario, as_harness, refusals, watch


def fire(enforced: Enforced, at: datetime, workspace_id: str) -> str:
    """Step the scheduler to ``at`` as EventBridge Scheduler would (signed as the
    harness, which stands for it); the one run the due fire created in the workspace."""
    stack = enforced.local.stack
    assert stack.scheduler is not None
    assert stack.services is not None
    runs = DynamoRunReader(stack.services.run_records)
    fired = as_harness(stack.scheduler.fire_due, at)
    created = [
        result
        for result in fired
        if result.get("outcome") == "created"
        and as_harness(runs.get_run, str(result["run_id"])).workspace_id == workspace_id
    ]
    assert len(created) == 1, (fired, refusals(enforced))
    return str(created[0]["run_id"])


def test_notifications_and_a_scheduled_drift_check_need_nothing_their_roles_do_not_allow(
    enforced: Enforced,
) -> None:
    client = enforced.local.client
    receiver = Receiver()
    try:
        # Given a workspace that notifies a webhook of runs awaiting approval and of drift
        workspace = str(client.create_workspace(unique("iam-events"))["id"])
        destination: dict[str, Any] = client._call(
            "POST",
            f"/api/v1/workspaces/{workspace}/notifications",
            {
                "name": "hooks",
                "kind": "webhook",
                "url": receiver.url,
                "events": ["needs_attention", "drift_detected"],
            },
        )
        receiver.secret = destination["signing_secret"].encode()
        scenario = Scenario(enforced)

        # When a run plans and waits for approval, and is rejected
        run = client.create_run(workspace, HELLO)
        watch(enforced, run["id"], until=["awaiting_approval"])
        client.decide(run["id"], "reject", "nothing applied: the schedule finds drift")

        # Then the receiver gets the signed event, through the relay and the worker
        eventually(lambda: [r for r in receiver.received if r.event == "needs_attention"])

        # When a daily drift check is scheduled and fires
        schedule = client.create_schedule(workspace, "0 3 * * *")
        at = datetime.fromisoformat(schedule["next_fire_at"]) + timedelta(seconds=30)
        checked = watch(enforced, fire(enforced, at, workspace))

        # Then the real plan finds the unapplied change, the workspace shows drift,
        assert (checked["kind"], checked["status"]) == ("plan_only", "succeeded"), checked
        assert client.workspace(workspace)["drift"]["drifted"] is True
        # and the receiver is told of it
        eventually(lambda: [r for r in receiver.received if r.event == "drift_detected"])
        assert {(r.event, r.signed) for r in receiver.received} == {
            ("needs_attention", True),
            ("drift_detected", True),
        }

        # And nothing any handler called was refused or unattributed
        scenario.assert_clean()
        # And the relay, the worker, the schedule's function and the run API (which
        # created the schedule in EventBridge Scheduler) each called under its own role
        handlers = (
            "functions.events.relay.handler",
            "functions.events.handler.handler",
            "functions.scheduler.handler.fire",
            "functions.api.app.handler",
        )
        assert scenario.signed(*handlers) == dict.fromkeys(handlers, True)
        assert "dynamodb:GetRecords" in scenario.actions("functions.events.relay.handler")
        assert "scheduler:CreateSchedule" in scenario.actions("functions.api.app.handler")
        assert "states:StartExecution" in scenario.actions("functions.scheduler.handler.fire")
    finally:
        receiver.close()
