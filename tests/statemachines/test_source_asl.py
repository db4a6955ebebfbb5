"""The source workflow (``statemachines/source.asl.json``): static checks, and executions
in moto's interpreter with the Tasks routed to the real handlers and a fake GitHub."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from functions.tasks.errors import RETRYABLE
from functions.tasks.source_handlers import SOURCE_HANDLERS
from runplane import wiring
from runplane.domain.errors import GitHubUnavailable
from runplane.domain.github import Binding
from runplane.domain.run import RunKind
from runplane.local.moto_serial import serialize_requests
from runplane.local.moto_stepfunctions import clear_lambda_routes, enable_step_functions
from runplane.settings import Settings
from runplane.store import github as github_store
from runplane.store.models import SourceIngestionItem, source_key
from runplane.store.provision import create_table
from tests.github_fake import FakeGitHub
from tests.github_holding import hold_installation

if TYPE_CHECKING:
    from moto.core.config import DefaultConfig

ASL = Path(__file__).resolve().parents[2] / "statemachines" / "source.asl.json"
PLACEHOLDER = re.compile(r"^\$\{(?P<name>[A-Za-z]+)FunctionArn\}$")
SHA = "a" * 40


def machine() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(ASL.read_text(encoding="utf-8"))
    return loaded


def tasks() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in machine()["States"].items() if s["Type"] == "Task"}


# -- static checks -------------------------------------------------------------------------


def test_every_task_names_a_source_handler_and_every_handler_is_used() -> None:
    used = set()
    for state in tasks().values():
        match = PLACEHOLDER.match(state["Parameters"]["FunctionName"])
        assert match, state
        used.add(match["name"])
    assert used == set(SOURCE_HANDLERS)


def test_every_task_retries_named_errors_and_catches_everything_last() -> None:
    known = {*RETRYABLE, GitHubUnavailable.__name__}
    lambda_errors = {"Lambda.ServiceException", "Lambda.TooManyRequestsException"}
    for name, state in tasks().items():
        retried = {e for r in state["Retry"] for e in r["ErrorEquals"]}
        assert retried <= known | lambda_errors, name
        assert all(r["MaxAttempts"] <= 5 for r in state["Retry"]), name
        assert state["Catch"][-1]["ErrorEquals"] == ["States.ALL"], name


def test_tasks_pass_only_public_ids() -> None:
    for name, state in tasks().items():
        payload = state["Parameters"]["Payload"]
        assert set(payload) <= {"source_id.$", "run_id.$", "error.$"}, name
        # Results keep only what a Choice needs: never the handler's whole reply.
        assert "ResultSelector" in state, name


def test_every_transition_target_exists() -> None:
    states = machine()["States"]
    for name, state in states.items():
        targets = [state.get("Next"), state.get("Default")]
        targets += [c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])]
        assert {t for t in targets if t} <= states.keys(), name


# -- executions in moto ------------------------------------------------------------------


@pytest.fixture
def source_workflow(tmp_path: Path) -> Iterator[tuple[Any, str, FakeGitHub]]:
    from tests.integration.conftest import _issuer  # an RSA key made once per session

    github = FakeGitHub().start()
    serialize_requests("dynamodb")
    config: DefaultConfig = {
        "stepfunctions": {"execute_state_machine": True},
        "lambda": {"use_docker": False},
    }
    with mock_aws(config=config):
        region = "us-east-1"
        create_table(boto3.client("dynamodb", region_name=region), "runplane")
        boto3.client("s3", region_name=region).create_bucket(Bucket="runplane-artifacts")
        kms = boto3.client("kms", region_name=region)
        key_id = kms.create_key()["KeyMetadata"]["KeyId"]
        issuer = _issuer()
        from cryptography.hazmat.primitives import serialization

        pem = issuer.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        public = issuer.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        github.trust("7", public.decode())
        manager = boto3.client("secretsmanager", region_name=region)
        key_arn = manager.create_secret(Name="app-key", SecretString=pem)["ARN"]
        hook_arn = manager.create_secret(Name="hook", SecretString="s")["ARN"]
        text = ASL.read_text(encoding="utf-8")
        for name in SOURCE_HANDLERS:
            arn = f"arn:aws:lambda:{region}:123456789012:function:source-{name}"
            text = text.replace(f"${{{name}FunctionArn}}", arn)
        sfn = boto3.client("stepfunctions", region_name=region)
        arn = sfn.create_state_machine(
            name="source", definition=text, roleArn="arn:aws:iam::123456789012:role/sfn"
        )["stateMachineArn"]
        settings = Settings(
            kms_key_id=key_id,
            source_state_machine_arn=arn,
            github_api_url=github.url,
            github_app_id="7",
            github_app_private_key_secret_arn=key_arn,
            github_webhook_secret_arn=hook_arn,
        )
        wiring.install(wiring.build_services(settings))
        enable_step_functions({f"source-{n}": h for n, h in SOURCE_HANDLERS.items()})
        try:
            yield sfn, arn, github
        finally:
            clear_lambda_routes()
            wiring._installed.clear()
            github.stop()


def pending_source(source_id: str, org_id: str) -> None:
    now = wiring.services().clock.now()
    SourceIngestionItem(
        *source_key(source_id),
        source_id=source_id,
        org_id=org_id,
        delivery_id="d-1",
        event="push",
        repository="acme/infra",
        branch="main",
        ref="refs/heads/main",
        commit_sha=SHA,
        installation_id=11,
        status="pending",
        workflow_id=source_id,
        created_at=now,
        updated_at=now,
    ).save()


def wait(sfn: Any, execution_arn: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            return described
        assert time.monotonic() < deadline, "the execution did not end"
        time.sleep(0.2)


def test_a_commit_github_cannot_serve_fails_the_ingestion_and_creates_nothing(
    source_workflow: tuple[Any, str, FakeGitHub],
) -> None:
    sfn, arn, github = source_workflow
    services = wiring.services()
    # Given a workspace bound to acme/infra and a pending ingestion of a commit GitHub lacks
    org = services.tenancy.create_organization("acme")
    ws = services.tenancy.create_workspace(org.id, "net")
    binding = Binding(ws.id, org.id, "acme/infra", "main", "", 11, RunKind.PLAN_ONLY)
    hold_installation(org.id, 11)
    github_store.bind(binding, None, actor="tests", now=services.clock.now()).commit()
    pending_source("src-aaaaaaaaaaaaaaaaaaaaaaaaaa", org.id)

    # When the source workflow runs
    started = sfn.start_execution(
        stateMachineArn=arn,
        name="src-aaaaaaaaaaaaaaaaaaaaaaaaaa",
        input=json.dumps({"action": "ingest", "source_id": "src-aaaaaaaaaaaaaaaaaaaaaaaaaa"}),
    )
    described = wait(sfn, started["executionArn"])

    # Then it ends quietly, the ingestion failed with GitHub's refusal, and no run exists
    assert described["status"] == "SUCCEEDED"
    source = github_store.get_source("src-aaaaaaaaaaaaaaaaaaaaaaaaaa")
    assert source.status == "failed"
    assert "404" in (source.reason or "")
    keys = [
        item["PK"]["S"]
        for item in boto3.client("dynamodb", region_name="us-east-1").scan(TableName="runplane")[
            "Items"
        ]
    ]
    assert [k for k in keys if k.startswith(("RUN#", "CV#"))] == []
    # And the token it exchanged appears nowhere in the execution's history
    assert github.tokens
    history = json.dumps(
        sfn.get_execution_history(executionArn=started["executionArn"])["events"], default=str
    )
    assert all(token not in history for token in github.tokens)
    assert "PRIVATE KEY" not in history
