"""The runner's routes reply exactly as the run API's OpenAPI document says.

One plan and one apply session are driven through the API handler over the real
services on moto, calling every runner route as the runner does; each reply is checked
against its route's documented schema, which is closed: a field the document does not
name, or a required one missing, fails the check (and already fails in the handler,
whose reply models are the document's)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from jsonschema import Draft202012Validator

from functions.api import schema as oas
from functions.api.app import build_app, handler
from runplane import wiring
from runplane.adapters.token_signer import KmsTokenSigner
from runplane.domain.cloud_settings import CloudSettingsChange
from runplane.domain.identity import Principal
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.runner_reports import Applied, Planned, UploadReport
from runplane.services.principals import encode_principal
from runplane.services.workload_identity import WorkloadIdentity
from runplane.store import run_parts
from tests.integration.arena import (
    Arena,
    planning,
    put_through,
    show_json,
    to_apply_sandbox,
    to_approval,
)
from tests.integration.test_runner_authority import try_publish, with_state

RUNNER_ROUTES = "/api/v1/runner/"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """The run API's OpenAPI document, as ``GET /api/v1/openapi.json`` serves it."""
    parsed: dict[str, Any] = json.loads(
        oas.with_runner_report(build_app().get_openapi_json_schema())
    )
    return parsed


@dataclass
class Reply:
    method: str
    path: str
    status: int
    body: Any


@dataclass
class Sandbox:
    """A sandbox's runner calling the run API's handler, as the gateway passes its
    calls on; every reply is kept."""

    arena: Arena
    replies: list[Reply] = field(default_factory=list)
    caller: Principal | None = None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        authorizer = encode_principal(self.caller) if self.caller else None
        event = {
            "httpMethod": method,
            "path": path,
            "resource": "/{proxy+}",
            "headers": {"Content-Type": "application/json"},
            "queryStringParameters": None,
            "body": None if body is None else json.dumps(body),
            "isBase64Encoded": False,
            "requestContext": {"stage": "$default", "path": path, "authorizer": authorizer},
        }
        answer = handler(event, None)
        reply = Reply(method, path, answer["statusCode"], json.loads(answer["body"]))
        self.replies.append(reply)
        assert reply.status < 300, (method, path, reply.status, reply.body)
        return reply.body

    def start(self, run_id: str, phase: str) -> dict[str, Any]:
        """The session start with the handle the phase's sandbox was launched with."""
        attempt = run_parts.require(run_id, f"attempt#{phase}").body
        launched = self.arena.launcher.requests[attempt["sandbox_id"]]
        started: dict[str, Any] = self.call(
            "POST",
            "/api/v1/runner/sessions",
            {
                "bootstrap": launched.bootstrap,
                "run_id": run_id,
                "attempt_id": attempt["attempt_id"],
                "phase": phase,
                "sandbox_id": attempt["sandbox_id"],
                "inputs": launched.inputs,
            },
        )
        self.caller = self.arena.stack.identity.authenticate(f"Bearer {started['token']}")
        return started

    def credentials(self, run_id: str, phase: str) -> Any:
        """The phase's cloud credentials, redeemed with the handle it was launched with."""
        attempt = run_parts.require(run_id, f"attempt#{phase}").body
        launched = self.arena.launcher.requests[attempt["sandbox_id"]]
        return self.call("POST", "/api/v1/runner/credentials", {"handle": launched.credentials})

    def upload_alone(self, kind: str, plaintext: bytes) -> UploadReport:
        """Begin-upload, PUT, and register on its own."""
        granted = self.call("POST", "/api/v1/runner/uploads", {"kind": kind})
        upload = put_through(granted, plaintext)
        self.call(
            "POST",
            f"/api/v1/runner/uploads/{upload.artifact_id}/register",
            {"ticket": upload.ticket, "size": upload.size, "sha256": upload.sha256},
        )
        return upload

    def live_log(self, text: bytes) -> None:
        """A live log's first chunk, sent twice (the second is a resend)."""
        chunk = {"sequence": 0, "offset": 0, "data": base64.b64encode(text).decode()}
        self.call("POST", "/api/v1/runner/log-chunks", chunk)
        self.call("POST", "/api/v1/runner/log-chunks", chunk)


@pytest.fixture
def sandbox(arena: Arena) -> Iterator[Sandbox]:
    wiring.install(arena.stack.services)
    try:
        yield Sandbox(arena)
    finally:
        wiring._installed.clear()


def registration(upload: UploadReport) -> dict[str, Any]:
    return {
        "artifact_id": upload.artifact_id,
        "ticket": upload.ticket,
        "size": upload.size,
        "sha256": upload.sha256,
    }


def run_plan_and_apply(sandbox: Sandbox, name: str) -> None:
    """A plan_and_apply run against a workspace with state, its plan and apply sandboxes
    calling every runner route (the apply publishes the successor state)."""
    arena = sandbox.arena
    ws_id, _ = with_state(arena, name)
    with_cloud_roles(arena, ws_id)
    _, run_id = planning(arena, name, workspace_id=ws_id)

    # The plan: its inputs, each way of registering an upload, and its report
    plan = sandbox.start(run_id, "plan")
    sandbox.call(
        "POST", f"/api/v1/runner/downloads/{plan['manifest']['configuration_artifact_id']}"
    )
    sandbox.call("POST", "/api/v1/runner/heartbeat")
    sandbox.credentials(run_id, "plan")
    sandbox.live_log(b"planning\n")
    sandbox.call("GET", "/api/v1/runner/state-check")
    log = sandbox.upload_alone("logs", b"the plan's log\n")
    grants = plan["grants"]["uploads"]
    saved = put_through(grants["plan"], b"the saved plan")
    shown = put_through(grants["plan_json"], show_json(("one", ["create"])))
    sandbox.call(
        "POST",
        "/api/v1/runner/uploads/register",
        {"uploads": [registration(saved), registration(shown)]},
    )
    planned = Planned(
        summary=PlanSummary(adds=1, has_changes=True),
        plan_artifact_id=saved.artifact_id,
        plan_sha256=saved.sha256,
        plan_json_artifact_id=shown.artifact_id,
        plan_json_sha256=shown.sha256,
        log_artifact_id=log.artifact_id,
    )
    sandbox.call("POST", "/api/v1/runner/result", planned.to_wire())

    # The apply: its plan, its start (and a retry of it), its publication, and its
    # report registering its log
    to_approval(arena, run_id)
    attempt = to_apply_sandbox(arena, run_id)
    apply = sandbox.start(run_id, "apply")
    manifest = apply["manifest"]
    sandbox.call("POST", f"/api/v1/runner/downloads/{manifest['plan_artifact_id']}")
    handle = arena.launcher.requests[attempt["sandbox_id"]].apply_start
    start = {"handle": handle, "request": {"plan_sha256": manifest["plan_sha256"]}}
    sandbox.call("POST", "/api/v1/runner/apply-start", start)
    sandbox.call("POST", "/api/v1/runner/apply-start", start)
    sandbox.credentials(run_id, "apply")
    assert sandbox.caller is not None
    try_publish(arena, sandbox.caller, ws_id, 2)
    sandbox.call("GET", "/api/v1/runner/state-check")
    applied_log = put_through(apply["grants"]["uploads"]["logs"], b"the apply's log\n")
    applied = Applied(log_artifact_id=applied_log.artifact_id)
    sandbox.call(
        "POST",
        "/api/v1/runner/result",
        {**applied.to_wire(), "uploads": [registration(applied_log)]},
    )


def with_cloud_roles(arena: Arena, workspace_id: str) -> None:
    """Plan and apply roles for the workspace's runs, and the issuer that signs their
    tokens (a KMS key of its own: this stack is built without one)."""
    services = arena.stack.services
    kms = boto3.client("kms", region_name="us-east-1")
    key_id = kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    services.workload_identity = WorkloadIdentity(
        services.clock,
        services.ids,
        KmsTokenSigner(kms),
        issuer="https://runplane.test",
        key_ids=[key_id],
    )
    services.cloud_settings.put(
        arena.admin,
        workspace_id,
        CloudSettingsChange(
            aws_plan_role_arn="arn:aws:iam::123456789012:role/plan",
            aws_apply_role_arn="arn:aws:iam::123456789012:role/apply",
        ),
    )


def documented(document: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The schema the document gives the reply's route and status, its references
    resolvable."""
    for template, operations in document["paths"].items():
        pattern = re.sub(r"\{[^/]+\}", "[^/]+", template)
        if re.fullmatch(pattern, reply.path) and reply.method.lower() in operations:
            responses = operations[reply.method.lower()]["responses"]
            schema = responses[str(reply.status)]["content"]["application/json"]["schema"]
            return {**schema, "components": document["components"]}
    raise AssertionError(f"{reply.method} {reply.path} is not documented")


def route_of(document: dict[str, Any], reply: Reply) -> str:
    for template in document["paths"]:
        if re.fullmatch(re.sub(r"\{[^/]+\}", "[^/]+", template), reply.path):
            return f"{reply.method} {template}"
    raise AssertionError(reply.path)


def open_objects(schema: Any, where: str = "") -> list[str]:
    """Where an object schema with named properties lets other fields through."""
    found: list[str] = []
    if isinstance(schema, dict):
        if "properties" in schema and schema.get("additionalProperties") is not False:
            found.append(where or "/")
        for key, value in schema.items():
            found += open_objects(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found += open_objects(value, f"{where}/{index}")
    return found


def referenced(document: dict[str, Any], schema: Any) -> set[str]:
    """The component schemas ``schema`` reaches, through references."""
    names: set[str] = set()
    pending = [schema]
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            ref = current.get("$ref", "")
            name = ref.rsplit("/", 1)[-1]
            if ref.startswith("#/components/schemas/") and name not in names:
                names.add(name)
                pending.append(document["components"]["schemas"][name])
            pending.extend(v for k, v in current.items() if k != "$ref")
        elif isinstance(current, list):
            pending.extend(current)
    return names


def test_every_runner_reply_is_documented_closed(document: dict[str, Any]) -> None:
    # Given the success replies the document gives the runner's routes
    replies = {
        f"{method.upper()} {path} {status}": response["content"]["application/json"]["schema"]
        for path, operations in document["paths"].items()
        if path.startswith(RUNNER_ROUTES)
        for method, operation in operations.items()
        for status, response in operation["responses"].items()
        if status in {"200", "201"}
    }
    # Eleven routes of a runner's phase (a log chunk's resend is a 200 too) and a standby
    # runner's claim of its run (docs/standby.md).
    assert len(replies) == 13
    # When every schema they reach is read
    reached = set().union(*(referenced(document, schema) for schema in replies.values()))
    # Then each one names its fields and lets no other field through
    assert "RunnerReply" not in document["components"]["schemas"]
    assert reached
    schemas = document["components"]["schemas"]
    assert {
        name: open_objects(schemas[name]) for name in reached if open_objects(schemas[name])
    } == {}


# Asked by a standby runner before it has a run (no pool runs here: tests/service).
STANDBY_CLAIM = "/api/v1/runner/standby/claim"


def test_a_plan_and_apply_run_s_runner_replies_are_what_the_document_says(
    sandbox: Sandbox, document: dict[str, Any]
) -> None:
    # Given a plan_and_apply run whose sandboxes call every runner route, as runners do
    run_plan_and_apply(sandbox, "replies")

    # Then every runner route answered, with each success status it documents
    answered = {f"{route_of(document, r)} {r.status}" for r in sandbox.replies}
    documented_routes = {
        f"{method.upper()} {path} {status}"
        for path, operations in document["paths"].items()
        if path.startswith(RUNNER_ROUTES) and path != STANDBY_CLAIM
        for method, operation in operations.items()
        for status in operation["responses"]
        if status in {"200", "201"}
    }
    assert answered == documented_routes
    # And each reply is exactly what the document says of its route and status
    for reply in sandbox.replies:
        validator = Draft202012Validator(documented(document, reply))
        errors = [error.message[:200] for error in validator.iter_errors(reply.body)]
        assert errors == [], (reply.method, reply.path, reply.status)
    # And the replies carried what a runner reads: the apply's plan in its manifest,
    # the apply confirmed as the current state's publisher, and the run's last status
    starts = [r.body for r in sandbox.replies if r.path.endswith("/runner/sessions")]
    assert [s["manifest"]["phase"] for s in starts] == ["plan", "apply"]
    assert "plan_artifact_id" not in starts[0]["manifest"]
    assert starts[1]["manifest"]["plan_artifact_id"]
    checks = [r.body for r in sandbox.replies if r.path.endswith("/state-check")]
    assert [(c["serial"], c["matches"]) for c in checks] == [(1, False), (2, True)]
    results = [r.body for r in sandbox.replies if r.path.endswith("/runner/result")]
    assert results == [{"status": "plan_complete"}, {"status": "succeeded"}]
