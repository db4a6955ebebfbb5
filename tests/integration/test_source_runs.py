"""The source workflow's run-creation step against moto: DynamoDB for the runs and the
ingestion, Step Functions for the runs' executions."""

from __future__ import annotations

import json
import uuid

import boto3
import requests

from runplane.adapters.workflow import Workflow
from runplane.domain.github import Binding
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind
from runplane.store import github as github_store
from runplane.store import github_installations
from runplane.store.models import SourceIngestionItem, source_key
from runplane.store.transaction import Transaction
from runplane.wiring import Services
from tests.composition import services_for
from tests.github_holding import hold_installation
from tests.integration.arena import Arena
from tests.integration.conftest import SETTINGS, TABLE

REPOSITORY = "acme/infra"
SHA = "a" * 40


def with_step_functions(arena: Arena) -> tuple[Services, object, str]:
    """The stack's services with the run workflow in moto's Step Functions (which keeps
    executions RUNNING: nothing executes them here)."""
    stack = arena.stack
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}
    arn = sfn.create_state_machine(
        name=f"runs-{uuid.uuid4().hex[:8]}",
        definition=json.dumps(definition),
        roleArn="arn:aws:iam::123456789012:role/runplane-test",
    )["stateMachineArn"]
    services = services_for(
        stack.clock,
        stack.ids,
        table=TABLE,
        objects=stack.objects,
        keys=stack.keys,
        verifier=stack.issuer.verifier(leeway_seconds=0),
        launcher=stack.services.launcher,
        workflow=Workflow(sfn, arn),
        **SETTINGS,
    )
    return services, sfn, arn


def ready_ingestion(arena: Arena, services: Services, workspace_ids: list[str]) -> str:
    """A push ingestion that fetched its commit: one uploaded configuration version per
    bound workspace, no run recorded yet."""
    stack = arena.stack
    now = stack.clock.now()
    targets = []
    if github_installations.holder_of(4242) is None:
        hold_installation(arena.org.id, 4242)
    for ws_id in workspace_ids:
        github_store.bind(
            Binding(ws_id, arena.org.id, REPOSITORY, "main", "", 4242, RunKind.PLAN_ONLY),
            None,
            actor="test",
            now=now,
        ).commit()
        upload = services.runs.new_configuration_upload(arena.admin, ws_id)
        requests.put(upload.upload_url, data=b"config", timeout=30).raise_for_status()
        cv = services.runs.finalize_configuration(arena.admin, upload.id)
        targets.append(
            {
                "workspace_id": ws_id,
                "working_directory": "",
                "kind": RunKind.PLAN_ONLY.value,
                "configuration_version_id": cv["id"],
                "configuration_artifact_id": cv["artifact_id"],
                "run_id": None,
            }
        )
    source_id = stack.ids.new(IdKind.SOURCE_INGESTION)
    Transaction().put_new(
        SourceIngestionItem(
            *source_key(source_id),
            source_id=source_id,
            org_id=arena.org.id,
            delivery_id=str(uuid.uuid4()),
            event="push",
            repository=REPOSITORY,
            branch="main",
            ref="refs/heads/main",
            commit_sha=SHA,
            installation_id=4242,
            status="ready",
            workflow_id=source_id,
            targets=targets,
            created_at=now,
            updated_at=now,
        )
    ).commit()
    return source_id


def test_a_retry_after_a_crash_between_creating_and_recording_runs_creates_no_second_run(
    arena: Arena,
) -> None:
    # Given a ready push ingestion for two bound workspaces, whose run-creation step ran
    services, sfn, arn = with_step_functions(arena)
    workspaces = [arena.stack.tenancy.create_workspace(arena.org.id, f"gh-{n}").id for n in "ab"]
    source_id = ready_ingestion(arena, services, workspaces)
    assert services.github.create_runs(source_id) == {"source_id": source_id, "runs": 2}
    first = {t["workspace_id"]: t["run_id"] for t in github_store.get_source(source_id).targets}
    # ... but crashed before its record of the runs was written
    forgotten = [{**t, "run_id": None} for t in github_store.get_source(source_id).targets]
    github_store.set_targets(source_id, forgotten, arena.stack.clock.now()).commit()

    # When Step Functions retries the step
    retried = services.github.create_runs(source_id)

    # Then each workspace still has exactly one run, and the ingestion records it
    assert retried == {"source_id": source_id, "runs": 2}
    for ws_id in workspaces:
        assert [r.id for r in services.runs.list(arena.admin, ws_id)] == [first[ws_id]]
    recorded = {t["workspace_id"]: t["run_id"] for t in github_store.get_source(source_id).targets}
    assert recorded == first
    assert not any(t.get("error") for t in github_store.get_source(source_id).targets)
    # And each run has exactly one workflow execution, named by the run
    executions = sfn.list_executions(stateMachineArn=arn)["executions"]  # type: ignore[attr-defined]
    assert sorted(e["name"] for e in executions) == sorted(first.values())


def test_a_retry_after_a_crash_before_the_workflow_started_starts_it_once(
    arena: Arena,
) -> None:
    # Given a ready push ingestion whose step created the run and crashed before
    # starting its workflow and recording it (the run is dispatch_pending, no execution)
    services, sfn, arn = with_step_functions(arena)
    ws_id = arena.stack.tenancy.create_workspace(arena.org.id, "gh-unstarted").id
    source_id = ready_ingestion(arena, services, [ws_id])
    unstarted = services_for(
        arena.stack.clock,
        arena.stack.ids,
        table=TABLE,
        objects=arena.stack.objects,
        keys=arena.stack.keys,
        launcher=arena.stack.services.launcher,
        workflow=arena.workflow,  # starts nothing
        **SETTINGS,
    )
    unstarted.github.create_runs(source_id)
    [run_id] = [t["run_id"] for t in github_store.get_source(source_id).targets]
    forgotten = [{**t, "run_id": None} for t in github_store.get_source(source_id).targets]
    github_store.set_targets(source_id, forgotten, arena.stack.clock.now()).commit()
    assert sfn.list_executions(stateMachineArn=arn)["executions"] == []  # type: ignore[attr-defined]

    # When the step is retried, twice
    services.github.create_runs(source_id)
    github_store.set_targets(source_id, forgotten, arena.stack.clock.now()).commit()
    services.github.create_runs(source_id)

    # Then the one run's workflow was started, once, and the run is recorded
    executions = sfn.list_executions(stateMachineArn=arn)["executions"]  # type: ignore[attr-defined]
    assert [e["name"] for e in executions] == [run_id]
    assert [r.id for r in services.runs.list(arena.admin, ws_id)] == [run_id]
    assert [t["run_id"] for t in github_store.get_source(source_id).targets] == [run_id]
