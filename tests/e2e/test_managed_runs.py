"""Managed runs end to end: the real ASL in moto's interpreter, task Lambdas in process,
a real runner subprocess running the real engine, state published through the Cloud API."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import boto3

from runplane.store import run_parts, state_versions
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local, unique

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello"
SECRET_VALUE = "s3cr3t-value-7b1f"


def config(tmp_path: Path, text: str, name: str = "cfg") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "main.tf").write_text(text, encoding="utf-8")
    return directory


def new_workspace(local: Local, prefix: str = "runs") -> str:
    return str(local.client.create_workspace(unique(prefix))["id"])


def stages(review: dict[str, Any]) -> dict[str, str]:
    return {s["stage"]: s["status"] for s in review["stages"]}


def events(local: Local, run_id: str) -> list[str]:
    assert local.stack.services is not None
    return [e.type for e in local.stack.services.lifecycle.runs.audit_trail(run_id)]


def writer_of(workspace_id: str) -> tuple[str | None, str | None]:
    ws = workspace_store.get_workspace(workspace_id, reads=IdentityMap())
    return ws.writer_run_id, ws.lock_id


def test_an_approved_plan_is_applied_and_its_state_carries_the_runs_provenance(
    local: Local,
) -> None:
    # Given a plan_and_apply run of the example
    ws = new_workspace(local)
    run = local.client.create_run(ws, HELLO)
    # (its workflow may already have queued it by the time the response is built)
    assert run["status"] in {"dispatch_pending", "queued"}
    assert run["workflow"]["definition_version"].startswith("run.asl.json#")

    # When its plan awaits approval and is approved
    waiting = local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    assert waiting["status"] == "awaiting_approval"
    summary = waiting["plan"]["summary"]
    assert summary["output_changes"] == {"message": "create", "thing_id": "create"}
    assert (summary["adds"], summary["changes"], summary["destroys"]) == (1, 0, 0)
    assert writer_of(ws)[0] == run["id"]
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=120)

    # Then it applied, and the published state names this run's exact attempt
    assert (done["status"], done["label"]) == ("succeeded", "Applied")
    assert set(stages(done).values()) == {"completed"}
    state = done["apply"]["resulting_state_version"]
    assert state["status"] == "recorded"
    version = state_versions.get(state["id"], reads=IdentityMap())
    attempt = run_parts.require(run["id"], "attempt#apply").body
    assert version.provenance is not None
    assert version.provenance["run_id"] == run["id"]
    assert version.provenance["attempt_id"] == attempt["attempt_id"]
    assert version.provenance["sandbox_id"] == attempt["sandbox_id"]
    assert version.provenance["fence"] == attempt["fence"]
    assert version.lock_id == attempt["lock_id"]
    # And the writer authority was released in the same commit
    assert writer_of(ws) == (None, None)
    assert events(local, run["id"]) == [
        "run.created",
        "run.queued",
        "run.planning_started",
        "run.plan_completed",
        "run.policy_started",
        "run.policy_passed",
        "run.approval_requested",
        "run.apply_started",
        "run.applied",
    ]


def test_a_rejected_plan_is_never_applied(local: Local) -> None:
    ws = new_workspace(local)
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)

    local.client.decide(run["id"], "reject", "not today")
    done = local.client.watch(run["id"], timeout=60)

    assert done["status"] == "rejected"
    assert stages(done) == {
        "plan": "completed",
        "policy": "completed",
        "approval": "completed",
        "apply": "skipped",
    }
    assert done["apply"]["resulting_state_version"]["status"] == "not_recorded"
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).current_state_version_id is None
    assert writer_of(ws) == (None, None)


def test_plan_only_and_speculative_runs_plan_and_stop(local: Local) -> None:
    ws = new_workspace(local)
    for kind in ("plan_only", "speculative"):
        run = local.client.create_run(ws, HELLO, kind=kind)
        done = local.client.watch(run["id"], timeout=120)

        assert (done["status"], done["label"]) == ("succeeded", "Plan completed")
        assert done["plan"]["has_changes"] is True
        assert stages(done)["approval"] == stages(done)["apply"] == "skipped"
        assert done["apply"] is None
        assert "run.approval_requested" not in events(local, run["id"])
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).current_state_version_id is None


def test_a_plan_with_no_changes_ends_without_apply(local: Local) -> None:
    ws = new_workspace(local)
    first = local.client.create_run(ws, HELLO)
    local.client.watch(first["id"], until=["awaiting_approval"], timeout=120)
    local.client.decide(first["id"], "approve")
    local.client.watch(first["id"], timeout=120)

    second = local.client.create_run(ws, HELLO)
    done = local.client.watch(second["id"], timeout=120)

    assert (done["status"], done["label"]) == ("succeeded", "Plan completed")
    assert done["plan"]["has_changes"] is False
    assert done["apply"]["status"] == "closed"
    assert done["apply"]["resulting_state_version"]["status"] == "not_recorded"
    assert done["input"]["predecessor_state_version_id"] is not None
    assert writer_of(ws) == (None, None)


def test_a_configuration_that_does_not_plan_fails_the_run(local: Local, tmp_path: Path) -> None:
    ws = new_workspace(local)
    broken = config(tmp_path, 'output "x" { value = undefined_thing }\n')

    run = local.client.create_run(ws, broken)
    done = local.client.watch(run["id"], timeout=120)

    assert done["status"] == "plan_failed"
    assert stages(done) == {
        "plan": "failed",
        "policy": "skipped",
        "approval": "skipped",
        "apply": "skipped",
    }
    assert "engine" in (done["status_reason"] or "")
    assert writer_of(ws) == (None, None)
    attempt = run_parts.require(run["id"], "attempt#plan")
    assert attempt.state == "failed"
    assert attempt.body.get("log_artifact_id")


def test_runs_wait_fifo_per_workspace_and_other_workspaces_proceed(local: Local) -> None:
    # Given a run holding a workspace while it waits for approval
    ws, other = new_workspace(local, "fifo"), new_workspace(local, "elsewhere")
    first = local.client.create_run(ws, HELLO)
    local.client.watch(first["id"], until=["awaiting_approval"], timeout=120)

    # When a second run is created there, and a third in another workspace
    second = local.client.create_run(ws, HELLO, variables={"greeting": "hi"})
    third = local.client.create_run(other, HELLO)

    # Then the third plans at once while the second waits in the queue
    assert (
        local.client.watch(third["id"], until=["awaiting_approval"], timeout=120)["status"]
        == "awaiting_approval"
    )
    assert local.client.review(second["id"])["status"] == "queued"
    deadline = time.monotonic() + 30
    while workspace_store.get_workspace(ws, reads=IdentityMap()).queue_length != 1:
        assert time.monotonic() < deadline, "the second run never joined the queue"
        time.sleep(0.1)

    # And the moment the first ends, the second takes the workspace
    local.client.decide(first["id"], "approve")
    assert local.client.watch(first["id"], timeout=120)["status"] == "succeeded"
    waiting = local.client.watch(second["id"], until=["awaiting_approval"], timeout=120)
    assert waiting["status"] == "awaiting_approval"
    assert writer_of(ws)[0] == second["id"]
    for run in (second, third):
        local.client.decide(run["id"], "reject")


def test_no_secret_reaches_workflow_history_or_logs(local: Local, tmp_path: Path) -> None:
    # Given a run whose configuration takes a secret variable value
    ws = new_workspace(local, "secrets")
    directory = config(
        tmp_path, 'variable "password" {\n  sensitive = true\n}\noutput "n" { value = 1 }\n'
    )
    captured: list[str] = []
    handler = _Capture(captured)
    import logging

    logging.getLogger().addHandler(handler)
    try:
        run = local.client.create_run(ws, directory, variables={"password": SECRET_VALUE})
        local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
        local.client.decide(run["id"], "approve")
        assert local.client.watch(run["id"], timeout=120)["status"] == "succeeded"
    finally:
        logging.getLogger().removeHandler(handler)

    # When every execution history of the stack is read
    assert local.stack.services is not None
    settings = local.stack.services.settings
    sfn = boto3.client(
        "stepfunctions", region_name="us-east-1", endpoint_url=settings.aws_endpoint_url
    )
    histories: dict[str, str] = {}
    tokens: dict[str, set[str]] = {}
    for execution in sfn.list_executions(stateMachineArn=settings.state_machine_arn)["executions"]:
        events = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
        histories[execution["name"]] = json.dumps(events, default=str)
        tokens[execution["name"]] = {
            json.loads(e["taskScheduledEventDetails"]["parameters"])["Payload"]["token"]
            for e in events
            if e["type"] == "TaskScheduled"
            and "token" in json.loads(e["taskScheduledEventDetails"]["parameters"])["Payload"]
        }
    text = "\n".join(histories.values())

    # Then they carry run IDs only: no token, handle, session, key or secret value
    assert run["id"] in text
    for marker in (SECRET_VALUE, local.admin_token, "rpc_", "rps_", "rpt_", "rpu_", "data_key"):
        assert marker not in text, marker
    # And no artifact body: no plan, state or runner output
    for body_marker in ("resource_changes", '"lineage"', "Apply complete", "terraform_version"):
        assert body_marker not in text, body_marker
    # And a wait's task token appears only in its own execution's history
    assert tokens[run["id"]], "the run's waits carried no token"
    for name, own in tokens.items():
        for other, history in histories.items():
            if other != name:
                assert not any(token in history for token in own), (name, other)
    # And nothing logged in this process carries any of them
    logged = "\n".join(captured)
    every_token = set().union(*tokens.values())
    for marker in (SECRET_VALUE, local.admin_token, "rpc_", "rps_", *every_token):
        assert marker not in logged, "a secret was logged"
    # And the runner's stored log does not show the secret value
    attempt = run_parts.require(run["id"], "attempt#apply").body
    with local.stack.services.artifacts.open(
        workspace_store.get_workspace(ws, reads=IdentityMap()).organization_id,
        attempt["log_artifact_id"],
    ) as plaintext:
        runner_log = b"".join(plaintext).decode()
    assert SECRET_VALUE not in runner_log
    assert "Apply complete" in runner_log


class _Capture(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(level=0)
        # Handler.handle serializes emit under the handler's own lock.
        self.sink = sink

    def emit(self, record: Any) -> None:
        self.sink.append(f"{record.getMessage()} {record.__dict__}")


PARTIAL = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
resource "test_thing" "good" { name = "good" }
resource "test_thing" "bad" {
  name          = "bad"
  fail_on_apply = true
  depends_on    = [test_thing.good]
}
"""


def test_an_apply_that_fails_after_publishing_keeps_writer_authority(
    local: Local, tmp_path: Path
) -> None:
    # Given an approved plan whose second resource fails during apply
    ws = new_workspace(local, "partial")
    run = local.client.create_run(ws, config(tmp_path, PARTIAL))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)

    # When it applies
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=120)

    # Then the run failed, and the partial state it published is reported as such
    assert (done["status"], done["label"]) == ("apply_failed", "Apply failed")
    assert done["apply"]["status"] == "failed"
    published = done["apply"]["resulting_state_version"]
    assert published["status"] == "recorded"
    state = json.loads(
        local.stack.services.state.download(  # type: ignore[union-attr]
            _admin(local), published["id"]
        )
    )
    assert [r["name"] for r in state["resources"]] == ["good"]
    # And the run keeps the workspace's writer authority for recovery
    writer, lock = writer_of(ws)
    assert writer == run["id"]
    assert lock is not None
    assert stages(done)["apply"] == "failed"


def _admin(local: Local) -> Any:
    assert local.stack.services is not None
    return local.stack.services.identity.authenticate(f"Bearer {local.admin_token}")


def test_the_run_api_serves_its_openapi_document(local: Local) -> None:
    import urllib.request

    with urllib.request.urlopen(f"{local.url}/api/v1/openapi.json", timeout=30) as response:  # noqa: S310
        document = json.loads(response.read())

    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert "/api/v1/workspaces/{workspace_id}/runs" in paths
    assert "/api/v1/runs/{run_id}/actions/approve" in paths
    create = paths["/api/v1/workspaces/{workspace_id}/runs"]["post"]
    assert "requestBody" in create


def test_a_plan_that_lacks_cloud_credentials_says_so(local: Local, tmp_path: Path) -> None:
    # Given a configuration whose provider finds no credentials in the sandbox
    ws = new_workspace(local, "creds")
    directory = config(
        tmp_path,
        'terraform {\n  required_providers {\n    test = { source = "runplane/test", '
        'version = "0.1.0" }\n  }\n}\n'
        'resource "test_thing" "x" {\n  name = "x"\n  require_credentials = true\n}\n',
    )

    # When it plans
    run = local.client.create_run(ws, directory)
    done = local.client.watch(run["id"], timeout=120)

    # Then the run ends asking for credentials, not as a generic failure
    assert done["status"] == "plan_credentials_required"
    assert stages(done)["plan"] == "failed"
    assert writer_of(ws) == (None, None)
