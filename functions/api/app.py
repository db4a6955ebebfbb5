"""The run API (REST): workspaces, configuration uploads, runs, reviews, decisions,
and the runner's endpoints. Handlers parse, call one service, map the result."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict
from functools import lru_cache
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Header
from pydantic import BaseModel, Field, StrictInt

from functions.api import event_routes, schedules
from functions.api import schema as oas
from functions.bodies import parse_json
from functions.isolation import IsolatedRestResolver, ResolverPool
from runplane.domain.capabilities import Phase
from runplane.domain.entities import Workspace
from runplane.domain.errors import InvalidBody, InvalidInput, RunplaneError
from runplane.domain.identity import Principal
from runplane.domain.logs import END_OF_TEXT, MAX_CHUNK_BYTES
from runplane.domain.recovery import ClaimedUpload, RecoveryRequest, Resolution
from runplane.domain.run import RunKind
from runplane.services.identity import decode_principal
from runplane.services.launch_controls import GLOBAL, Controls
from runplane.wiring import services

Reply = Response[str]
# A region, release or runtime name in launch controls.
Name = Annotated[str, Field(min_length=1, max_length=100)]


class WorkspaceCreate(BaseModel):
    name: str = Field(min_length=1, max_length=90)
    terraform_version: str | None = Field(default=None, max_length=40)


class WorkspaceUpdate(BaseModel):
    # Strict: lax parsing would read `true` as a one-second window.
    approval_window_seconds: StrictInt | None = Field(default=None, ge=1, le=30 * 24 * 3600)


class GitHubBindingBody(BaseModel):
    repository: str = Field(min_length=3, max_length=140)
    branch: str = Field(min_length=1, max_length=255)
    working_directory: str = Field(default="", max_length=500)
    installation_id: StrictInt
    push_run_kind: Literal["plan_and_apply", "plan_only"] = "plan_and_apply"


class LaunchControlsBody(BaseModel):
    launches_enabled: bool = True
    suspended: bool = False
    allowed_regions: list[Name] = Field(default_factory=list, max_length=50)
    runner_releases: list[Name] = Field(default_factory=list, max_length=50)
    policy_runtimes: list[Name] = Field(default_factory=list, max_length=50)
    max_sandboxes: StrictInt | None = Field(default=None, ge=0, le=10_000)


class RunCreate(BaseModel):
    kind: Literal["plan_only", "speculative", "plan_and_apply"]
    configuration_version_id: str = Field(min_length=1, max_length=64)
    engine_version: str | None = Field(default=None, max_length=40)
    variables: dict[str, str] = Field(default_factory=dict)


class DecisionBody(BaseModel):
    comment: str | None = Field(default=None, max_length=1000)
    # What the person reviewed: a decision on anything else is refused.
    plan_sha256: str | None = Field(default=None, max_length=64)
    predecessor_state_version_id: str | None = Field(default=None, max_length=64)
    policy_input_digest: str | None = Field(default=None, max_length=80)
    policy_result_digest: str | None = Field(default=None, max_length=80)


class ClaimedUploadBody(BaseModel):
    id: str = Field(min_length=1, max_length=64)
    claimed_at: str = Field(min_length=1, max_length=64)


class RecoverBody(BaseModel):
    resolution: Literal["current_state_verified", "import_emergency_state"]
    reason: str = Field(max_length=1000)
    confirm_authority_revocation: bool = False
    # The workspace's current state version the operator verified (null: none).
    current_state_version_id: str | None = Field(max_length=64)
    # import_emergency_state: the snapshot, base64, and the SHA-256 the operator reviewed.
    emergency_state: str | None = Field(default=None, max_length=14_000_000)
    emergency_state_sha256: str | None = Field(default=None, max_length=64)
    discard_claimed_upload: ClaimedUploadBody | None = None
    acknowledge_state_loss: bool = False
    takeover: bool = False


class PolicySetBody(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    modules: list[dict[str, str]] = Field(min_length=1, max_length=64)
    policies: list[dict[str, str]] = Field(min_length=1, max_length=64)
    input_shape: str | None = Field(default=None, max_length=32)
    unknown_input_roots: str | None = Field(default=None, max_length=32)


class AttachmentsBody(BaseModel):
    workspaces: list[str] = Field(default_factory=list, max_length=500)
    all_workspaces: bool = False


class TokenCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    role: Literal["reader", "developer", "operator", "admin"]


class OverrideBody(BaseModel):
    reason: str = Field(min_length=1, max_length=1000)


class SessionStart(BaseModel):
    bootstrap: str = Field(min_length=10, max_length=200)
    run_id: str
    attempt_id: str
    phase: Literal["plan", "apply"]
    sandbox_id: str


class UploadStart(BaseModel):
    kind: str


class UploadRegister(BaseModel):
    size: int = Field(ge=0)
    sha256: str = Field(min_length=64, max_length=64)


class ApplyStart(BaseModel):
    handle: str = Field(min_length=10, max_length=200)
    request: dict[str, str]


class LogChunkBody(BaseModel):
    sequence: int = Field(ge=0)
    offset: int = Field(ge=0)
    # Base64 of at most MAX_CHUNK_BYTES bytes.
    data: str = Field(min_length=1, max_length=4 * (MAX_CHUNK_BYTES // 3 + 1))


class RunnerReport(BaseModel):
    outcome: Literal["planned", "failed", "credentials_required", "applied"]
    reason: str | None = Field(default=None, max_length=2000)
    has_changes: bool | None = None
    summary: dict[str, Any] | None = None
    plan_artifact_id: str | None = None
    plan_sha256: str | None = None
    plan_json_artifact_id: str | None = None
    plan_json_sha256: str | None = None
    log_artifact_id: str | None = None
    engine_version: str | None = None
    engine_seconds: float | None = Field(default=None, ge=0)


def _json(status: int, body: Any) -> Reply:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


def recovery_request(body: RecoverBody) -> RecoveryRequest:
    emergency = None
    if body.emergency_state is not None:
        try:
            emergency = base64.b64decode(body.emergency_state, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput("emergency_state is not valid base64", "/emergency_state") from None
    claimed = body.discard_claimed_upload
    return RecoveryRequest(
        resolution=Resolution(body.resolution),
        reason=body.reason,
        confirm_authority_revocation=body.confirm_authority_revocation,
        current_state_version_id=body.current_state_version_id,
        emergency_state=emergency,
        emergency_state_sha256=body.emergency_state_sha256,
        discard_claimed_upload=None
        if claimed is None
        else ClaimedUpload(claimed.id, claimed.claimed_at),
        acknowledge_state_loss=body.acknowledge_state_loss,
        takeover=body.takeover,
    )


def build_app() -> IsolatedRestResolver:
    app = IsolatedRestResolver(enable_validation=True)
    app.configure_openapi(
        title="Runplane run API", version="1", security_schemes=oas.SECURITY_SCHEMES
    )

    def principal() -> Principal:
        return decode_principal(app.current_event.request_context.raw_event.get("authorizer"))

    @app.get("/api/v1/openapi.json", include_in_schema=False)
    def openapi() -> Reply:
        schema = app.get_openapi_json_schema()
        return Response(status_code=200, content_type="application/json", body=schema)

    # -- workspaces and configuration ------------------------------------------------------

    @app.post(
        "/api/v1/workspaces",
        responses=oas.responses(201, oas.WorkspaceCreated, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def create_workspace(body: WorkspaceCreate) -> Reply:
        who = principal()
        s = services()
        org = s.workspaces.organization_name(who.organization_id)
        ws = s.workspaces.create(who, org, body.name, terraform_version=body.terraform_version)
        return _json(201, {"id": ws.id, "name": ws.name, "organization": org})

    @app.patch(
        "/api/v1/workspaces/<workspace_id>",
        responses=oas.responses(200, oas.WorkspaceUpdated, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def update_workspace(workspace_id: str, body: WorkspaceUpdate) -> Reply:
        who = principal()
        s = services()
        ws = s.workspaces.update(
            who,
            s.workspaces.by_id(who, workspace_id),
            approval_window_seconds=body.approval_window_seconds,
        )
        return _json(
            200,
            {"id": ws.id, "name": ws.name, "approval_window_seconds": ws.approval_window_seconds},
        )

    @app.post(
        "/api/v1/workspaces/<workspace_id>/configuration-versions",
        responses=oas.responses(201, oas.ConfigurationUpload, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def new_configuration(workspace_id: str) -> Reply:
        upload = services().runs.new_configuration_upload(principal(), workspace_id)
        return _json(
            201,
            {
                "id": upload.id,
                "upload_url": upload.upload_url,
                "expires_at": upload.expires_at.isoformat(),
            },
        )

    @app.post(
        "/api/v1/configuration-versions/<cv_id>/actions/finalize",
        responses=oas.responses(200, oas.Configuration, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def finalize_configuration(cv_id: str) -> Reply:
        return _json(200, services().runs.finalize_configuration(principal(), cv_id))

    # -- runs ---------------------------------------------------------------------------------

    @app.post(
        "/api/v1/workspaces/<workspace_id>/runs",
        responses=oas.responses(201, oas.Review, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def create_run(workspace_id: str, body: RunCreate) -> Reply:
        who = principal()
        run = services().runs.create(
            who,
            workspace_id,
            kind=RunKind(body.kind),
            configuration_version_id=body.configuration_version_id,
            engine_version=body.engine_version,
            variables=body.variables,
        )
        return _json(201, services().runs.review(who, run.id))

    @app.get(
        "/api/v1/workspaces/<workspace_id>/runs",
        responses=oas.responses(200, oas.RunList, *oas.READ),
        security=oas.PEOPLE,
    )
    def list_runs(workspace_id: str) -> Reply:
        runs = services().runs.list(principal(), workspace_id)
        return _json(
            200,
            {
                "runs": [
                    {
                        "id": r.id,
                        "kind": r.kind.value,
                        "status": r.status.value,
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in runs
                ]
            },
        )

    @app.get(
        "/api/v1/runs/<run_id>",
        responses=oas.responses(200, oas.Review, *oas.READ),
        security=oas.PEOPLE,
    )
    def review(run_id: str) -> Reply:
        return _json(200, services().runs.review(principal(), run_id))

    def _decide(run_id: str, decision: str, body: DecisionBody) -> Reply:
        who = principal()
        s = services()
        binding = body.model_dump(exclude_none=True, exclude={"comment"})
        decided = s.runs.decide(who, run_id, decision, body.comment, binding)
        if decided.token:
            s.workflow.resume(decided.token, {"decision": decision})
        return _json(200, s.runs.review(who, run_id))

    @app.post(
        "/api/v1/runs/<run_id>/actions/approve",
        responses=oas.responses(200, oas.Review, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def approve(run_id: str, body: DecisionBody) -> Reply:
        return _decide(run_id, "approve", body)

    @app.post(
        "/api/v1/runs/<run_id>/actions/reject",
        responses=oas.responses(200, oas.Review, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def reject(run_id: str, body: DecisionBody) -> Reply:
        return _decide(run_id, "reject", body)

    @app.post(
        "/api/v1/runs/<run_id>/actions/cancel",
        responses=oas.responses(200, oas.Review, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def cancel(run_id: str) -> Reply:
        who = principal()
        s = services()
        s.runs.cancel(who, run_id, s.launcher)
        return _json(200, s.runs.review(who, run_id))

    @app.post(
        "/api/v1/runs/<run_id>/actions/override-policy",
        responses=oas.responses(200, oas.Review, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def override_policy(run_id: str, body: OverrideBody) -> Reply:
        who = principal()
        s = services()
        s.policies.override(who, s.runs.get(who, run_id), body.reason)
        return _json(200, s.runs.review(who, run_id))

    @app.post(
        "/api/v1/runs/<run_id>/actions/recover",
        responses=oas.responses(200, oas.RecoveryResult, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def recover(run_id: str, body: RecoverBody) -> Reply:
        s = services()
        result = s.recoveries.recover(principal(), run_id, recovery_request(body), s.launcher)
        return _json(200, result)

    # -- API tokens -----------------------------------------------------------------------------

    @app.post(
        "/api/v1/tokens",
        responses=oas.responses(201, oas.TokenIssued, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def create_token(body: TokenCreate) -> Reply:
        issued = services().identity.create_token(principal(), body.name, body.role)
        record = issued.record
        return _json(
            201,
            {
                "id": record.id,
                "name": record.name,
                "role": body.role,
                "permissions": sorted(p.value for p in record.permissions),
                # Shown once: only its hash is stored.
                "token": issued.token,
            },
        )

    @app.delete(
        "/api/v1/tokens/<token_id>",
        responses=oas.responses(200, oas.TokenRevoked, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def revoke_token(token_id: str) -> Reply:
        services().identity.revoke_token(principal(), token_id)
        return _json(200, {"id": token_id, "revoked": True})

    # -- policy sets ----------------------------------------------------------------------------

    @app.post(
        "/api/v1/policy-sets",
        responses=oas.responses(201, oas.PolicySet, *oas.WRITE, also=200),
        security=oas.PEOPLE,
    )
    def publish_policy_set(body: PolicySetBody) -> Reply:
        published = services().policies.publish(principal(), body.model_dump(exclude_none=True))
        return _json(201 if published.created else 200, published.to_dict())

    @app.get(
        "/api/v1/policy-sets",
        responses=oas.responses(200, oas.PolicySets, *oas.READ),
        security=oas.PEOPLE,
    )
    def list_policy_sets() -> Reply:
        sets = services().policies.list(principal())
        return _json(200, {"policy_sets": [published.to_dict() for published in sets]})

    @app.get(
        "/api/v1/policy-sets/<name>",
        responses=oas.responses(200, oas.PolicySet, *oas.READ),
        security=oas.PEOPLE,
    )
    def get_policy_set(name: str) -> Reply:
        return _json(200, services().policies.get(principal(), name).to_dict())

    @app.put(
        "/api/v1/policy-sets/<name>/attachments",
        responses=oas.responses(200, oas.PolicySet, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def attach_policy_set(name: str, body: AttachmentsBody) -> Reply:
        attached = services().policies.attach(
            principal(), name, body.workspaces, body.all_workspaces
        )
        return _json(200, attached.to_dict())

    @app.get(
        "/api/v1/launch-controls/<scope>",
        responses=oas.responses(200, oas.LaunchControls, *oas.READ),
        security=oas.PEOPLE,
    )
    def get_launch_controls(scope: Literal["platform", "organization"]) -> Reply:
        controls, running = services().launch_controls.get(
            principal(), GLOBAL if scope == "platform" else "organization"
        )
        return _json(200, {"scope": scope, **asdict(controls), "running_sandboxes": running})

    @app.put(
        "/api/v1/launch-controls/<scope>",
        responses=oas.responses(200, oas.LaunchControls, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def set_launch_controls(
        scope: Literal["platform", "organization"], body: LaunchControlsBody
    ) -> Reply:
        controls = services().launch_controls.set(
            principal(),
            GLOBAL if scope == "platform" else "organization",
            Controls(
                launches_enabled=body.launches_enabled,
                suspended=body.suspended,
                allowed_regions=tuple(body.allowed_regions),
                runner_releases=tuple(body.runner_releases),
                policy_runtimes=tuple(body.policy_runtimes),
                max_sandboxes=body.max_sandboxes,
            ),
        )
        return _json(200, {"scope": scope, **asdict(controls)})

    # -- GitHub sources -------------------------------------------------------------------------

    @app.put(
        "/api/v1/workspaces/<workspace_id>/github",
        responses=oas.responses(200, oas.GitHubBindingView, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def bind_github(workspace_id: str, body: GitHubBindingBody) -> Reply:
        bound = services().github.bind(principal(), workspace_id, **body.model_dump())
        return _json(200, bound.to_dict())

    @app.get(
        "/api/v1/workspaces/<workspace_id>/github",
        responses=oas.responses(200, oas.GitHubBindingView, *oas.READ),
        security=oas.PEOPLE,
    )
    def get_github(workspace_id: str) -> Reply:
        return _json(200, services().github.binding(principal(), workspace_id).to_dict())

    @app.delete(
        "/api/v1/workspaces/<workspace_id>/github",
        responses=oas.responses(200, oas.GitHubUnbound, *oas.WRITE),
        security=oas.PEOPLE,
    )
    def unbind_github(workspace_id: str) -> Reply:
        services().github.unbind(principal(), workspace_id)
        return _json(200, {"workspace_id": workspace_id, "bound": False})

    @app.post("/webhooks/github", responses=oas.webhook_responses())
    def github_webhook(
        x_github_event: Annotated[str, Header(min_length=1, max_length=100)],
        x_github_delivery: Annotated[str, Header(min_length=1, max_length=100)],
        x_hub_signature_256: Annotated[str | None, Header(max_length=100)] = None,
    ) -> Reply:
        # Signed by GitHub, not authenticated by a token: the service checks the HMAC
        # of the exact bytes received.
        event = app.current_event
        raw = event.get("body") or ""
        body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode("utf-8")
        reply = services().github.receive(dict(event.get("headers") or {}), body)
        return _json(reply.status, reply.body)

    # -- reads: workspaces and run logs ---------------------------------------------------------

    def _workspace(ws: Workspace) -> dict[str, Any]:
        return {
            "id": ws.id,
            "name": ws.name,
            "created_at": ws.created_at.isoformat(),
            "description": ws.description,
            "tags": list(ws.tag_names),
            "terraform_version": ws.terraform_version,
            # null: the deployment's default window applies.
            "approval_window_seconds": ws.approval_window_seconds,
            "locked": ws.locked,
            "writer_run_id": ws.writer_run_id,
            "queue_length": ws.queue_length,
            "current_state_version_id": ws.current_state_version_id,
            # What the last scheduled plan found (docs/schedules.md); null: never checked.
            "drift": services().schedules.drift_of(ws.id),
        }

    @app.get(
        "/api/v1/workspaces",
        responses=oas.responses(200, oas.WorkspaceList, *oas.AUTHENTICATED),
        security=oas.PEOPLE,
    )
    def list_workspaces() -> Reply:
        found = services().workspaces.list_own(principal())
        return _json(200, {"workspaces": [_workspace(ws) for ws in found]})

    @app.get(
        "/api/v1/workspaces/<workspace_id>",
        responses=oas.responses(200, oas.WorkspaceView, *oas.READ),
        security=oas.PEOPLE,
    )
    def get_workspace(workspace_id: str) -> Reply:
        return _json(200, _workspace(services().workspaces.by_id(principal(), workspace_id)))

    def _query_int(name: str) -> int | None:
        raw = app.current_event.get_query_string_value(name)
        if raw is None:
            return None
        if not raw.isascii() or not raw.isdigit() or len(raw) > 15:
            raise InvalidInput(f"{name} must be a whole number of bytes", f"/{name}")
        return int(raw)

    @app.get(
        "/api/v1/runs/<run_id>/logs/<phase>",
        responses=oas.text_responses(*oas.READ),
        security=oas.PEOPLE,
    )
    def run_log(run_id: str, phase: Literal["plan", "apply"]) -> Reply:
        read = services().logs.read(
            principal(),
            run_id,
            Phase(phase),
            offset=_query_int("offset") or 0,
            limit=_query_int("limit"),
        )
        text = read.data.decode("utf-8", "replace") + (END_OF_TEXT if read.at_end else "")
        return Response(
            status_code=200,
            content_type="text/plain; charset=utf-8",
            body=text,
            headers={
                "Runplane-Log-Offset": str(read.offset),
                "Runplane-Log-Next-Offset": str(read.next_offset),
                "Runplane-Log-Length": str(read.length),
                "Runplane-Log-Complete": "true" if read.complete else "false",
                "Runplane-Log-Source": read.source,
            },
        )

    # -- runner -------------------------------------------------------------------------------

    @app.post(
        "/api/v1/runner/sessions",
        responses=oas.responses(201, oas.RunnerReply, *oas.WRITE),
    )
    def runner_session(body: SessionStart) -> Reply:
        started = services().runner_api.start(
            body.bootstrap,
            run_id=body.run_id,
            attempt_id=body.attempt_id,
            phase=body.phase,
            sandbox_id=body.sandbox_id,
        )
        return _json(201, started)

    @app.post(
        "/api/v1/runner/downloads/<artifact_id>",
        responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
        security=oas.RUNNER,
    )
    def runner_download(artifact_id: str) -> Reply:
        return _json(200, services().runner_api.download(principal(), artifact_id))

    @app.post(
        "/api/v1/runner/uploads",
        responses=oas.responses(201, oas.RunnerReply, *oas.WRITE),
        security=oas.RUNNER,
    )
    def runner_upload(body: UploadStart) -> Reply:
        return _json(201, services().runner_api.begin_upload(principal(), body.kind))

    @app.post(
        "/api/v1/runner/uploads/<artifact_id>/register",
        responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
        security=oas.RUNNER,
    )
    def runner_register(artifact_id: str, body: UploadRegister) -> Reply:
        return _json(
            200, services().runner_api.register(principal(), artifact_id, body.size, body.sha256)
        )

    @app.post(
        "/api/v1/runner/apply-start",
        responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
        security=oas.RUNNER,
    )
    def runner_apply_start(body: ApplyStart) -> Reply:
        return _json(200, services().runner_api.apply_start(principal(), body.handle, body.request))

    @app.get(
        "/api/v1/runner/state-check",
        responses=oas.responses(200, oas.RunnerReply, *oas.READ),
        security=oas.RUNNER,
    )
    def runner_state_check() -> Reply:
        return _json(200, services().runner_api.state_check(principal()))

    @app.post(
        "/api/v1/runner/heartbeat",
        responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
        security=oas.RUNNER,
    )
    def runner_heartbeat() -> Reply:
        return _json(200, services().runner_api.heartbeat(principal()))

    @app.post(
        "/api/v1/runner/log-chunks",
        responses=oas.responses(201, oas.RunnerReply, *oas.WRITE, also=200),
        security=oas.RUNNER,
    )
    def runner_log_chunk(body: LogChunkBody) -> Reply:
        try:
            data = base64.b64decode(body.data, validate=True)
        except ValueError:
            raise InvalidInput("data must be base64", "/data") from None
        stored = services().logs.store_chunk(principal(), body.sequence, body.offset, data)
        return _json(200 if stored["replayed"] else 201, stored)

    @app.post(
        "/api/v1/runner/result",
        responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
        security=oas.RUNNER,
    )
    def runner_result(body: RunnerReport) -> Reply:
        report = body.model_dump(exclude_none=True)
        return _json(200, services().runner_api.report(principal(), report))

    event_routes.register(app, principal)
    schedules.register(app, principal)

    # -- errors -------------------------------------------------------------------------------

    @app.exception_handler(RunplaneError)  # type: ignore[untyped-decorator]
    def runplane_error(error: RunplaneError) -> Reply:
        body: dict[str, Any] = error.to_body()
        pointer = getattr(error, "pointer", None)
        if pointer:
            body["pointer"] = pointer
        reply = _json(error.http_status, body)
        retry_after = getattr(error, "retry_after_seconds", None)
        if retry_after:
            reply.headers["Retry-After"] = str(retry_after)
        return reply

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def invalid(error: RequestValidationError) -> Reply:
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": "invalid request"}
        location = [str(p) for p in first.get("loc", ()) if p != "body"]
        return _json(
            422,
            {
                "code": "INVALID_INPUT",
                "message": str(first.get("msg")),
                "pointer": "/" + "/".join(location),
            },
        )

    @app.not_found
    def not_found(_: Exception) -> Reply:
        return _json(404, {"code": "NOT_FOUND", "message": "no such endpoint"})

    return app


@lru_cache(maxsize=1)
def resolvers() -> ResolverPool:
    return ResolverPool(build_app)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Read before Powertools does: it fails untyped on some bodies (deep nesting, not UTF-8).
    # A webhook's body is read only after its signature is checked, by its route.
    if not str(event.get("path", "")).startswith("/webhooks/"):
        try:
            parse_json(event.get("body"), bool(event.get("isBase64Encoded")))
        except InvalidBody as unreadable:
            return {
                "statusCode": unreadable.http_status,
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps(unreadable.to_body()),
                "isBase64Encoded": False,
            }
    result: dict[str, Any] = resolvers().resolve(event, context)
    return result
