"""The runner's endpoints: its session, artifacts, apply start, heartbeats, logs and
its report, each replying through its documented model (docs/runner-contract.md)."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain import runner_reports
from runplane.domain.capabilities import Phase
from runplane.domain.errors import InvalidInput
from runplane.domain.logs import MAX_CHUNK_BYTES
from runplane.domain.run import RunKind
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class SessionStart(BaseModel):
    bootstrap: str = Field(min_length=10, max_length=200)
    run_id: str
    attempt_id: str
    phase: Literal["plan", "apply"]
    sandbox_id: str
    # The artifacts the phase reads, as its launch named them: only what is read with the
    # bootstrap (what is granted is what the bootstrap names).
    inputs: list[Annotated[str, Field(max_length=64)]] = Field(default=[], max_length=3)
    # The state version its run pinned, as its launch named it: only read with the
    # bootstrap (the session's token names what the run says it pinned).
    state_version: str | None = Field(default=None, max_length=64)


class UploadStart(BaseModel):
    kind: str


class UploadRegister(BaseModel):
    # What begin-upload returned: it stands in for a record begin-upload did not write.
    ticket: str = Field(min_length=1, max_length=4096)
    size: int = Field(ge=0)
    sha256: str = Field(min_length=64, max_length=64)


class UploadRegistration(UploadRegister):
    artifact_id: str = Field(min_length=1, max_length=200)


class UploadsRegister(BaseModel):
    # A phase uploads three artifacts at most (plan, plan JSON, log): room to spare.
    uploads: list[UploadRegistration] = Field(min_length=1, max_length=8)


class ApplyStart(BaseModel):
    handle: str = Field(min_length=10, max_length=200)
    request: dict[str, str]


class LogChunkBody(BaseModel):
    sequence: int = Field(ge=0)
    offset: int = Field(ge=0)
    # Base64 of at most MAX_CHUNK_BYTES bytes.
    data: str = Field(min_length=1, max_length=4 * (MAX_CHUNK_BYTES // 3 + 1))


# -- replies ---------------------------------------------------------------------------------


class RunnerDoc(oas.Doc):
    """A reply to a sandbox's runner. Closed: the runner and the control plane ship
    together, so a field the service returns and the model does not name would be one
    the runner loses without a word; it fails in the handler instead. Replies carry
    secrets (a session token, URLs, data keys, tickets): an error never quotes them."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class DownloadGrantView(RunnerDoc):
    """How to read one input: GET ``url``, decrypt under ``data_key``, check."""

    artifact_id: str
    url: str = Field(description="A presigned GET URL of the encrypted object")
    sha256: str = Field(description="SHA-256 of the plaintext")
    size: int = Field(description="Bytes of the plaintext")
    data_key: str = Field(description="Base64 of the artifact's data key")


class UploadGrantView(RunnerDoc):
    """How to upload one artifact: encrypt under ``data_key``, PUT to ``url``, then
    register with ``ticket``. Nothing is written until the register."""

    artifact_id: str
    url: str = Field(description="A presigned PUT URL for the encrypted object")
    chunk_size: int = Field(description="Plaintext bytes per encrypted chunk")
    max_size: int = Field(description="The most plaintext bytes the artifact may hold")
    data_key: str = Field(description="Base64 of the artifact's data key")
    ticket: str = Field(description="Opaque; carried back to register the upload")


class SessionGrants(RunnerDoc):
    expires_in: int = Field(description="Seconds the grants' URLs are usable from issue")
    downloads: dict[str, DownloadGrantView] = Field(
        description="By artifact ID: the inputs the phase reads"
    )
    uploads: dict[Literal["plan", "plan_json", "logs"], UploadGrantView] = Field(
        description="By kind: the artifacts the phase uploads"
    )


class PlanOptionsView(RunnerDoc):
    destroy: bool
    refresh_only: bool
    targets: list[str]
    replacements: list[str]


class PhaseManifest(RunnerDoc):
    """What the phase is about; no secret."""

    run_id: str
    kind: RunKind
    attempt_id: str
    phase: Phase
    organization: str
    workspace: str
    engine_version: str | None
    configuration_artifact_id: str
    variables_artifact_id: str | None = Field(description="null: the run has no variables")
    sensitive_variables: list[str] = Field(
        description="Names the runner declares sensitive to the engine (never values)"
    )
    predecessor_state_version_id: str | None
    remote_operation: bool = Field(
        description="Created by a remote backend: the configuration names that backend"
    )
    options: PlanOptionsView = Field(
        description="What the plan is asked beyond the configuration; the runner checks "
        "that the saved plan obeys it"
    )
    plan_artifact_id: str | None = Field(default=None, description="An apply's only")
    plan_sha256: str | None = Field(default=None, description="An apply's only")


class SessionStarted(RunnerDoc):
    token: str = Field(description="The session's bearer secret for every other runner call")
    manifest: PhaseManifest
    grants: SessionGrants


class ArtifactRegistered(RunnerDoc):
    artifact_id: str
    size: int
    sha256: str


class ArtifactsRegistered(RunnerDoc):
    artifacts: list[ArtifactRegistered] = Field(description="In the order given")


class ApplyStarted(RunnerDoc):
    """The apply's lock and fence (the same again for an identical retry)."""

    lock_id: str
    fence: str


class StateCheck(RunnerDoc):
    state_version_id: str | None = Field(description="null: the workspace has no state")
    serial: int | None = Field(default=None, description="Only with a state version")
    sha256: str | None = Field(default=None, description="Only with a state version")
    matches: bool = Field(description="This attempt published the current state")


class Heartbeat(RunnerDoc):
    alive: bool = Field(
        description="false: the beat kept nothing alive (the attempt ended, or nothing waits "
        "for it)"
    )


class LogChunkStored(RunnerDoc):
    sequence: int
    next_offset: int = Field(description="The byte the next chunk starts at")
    replayed: bool = Field(description="A resend of a stored chunk, acknowledged again")


class ReportTaken(RunnerDoc):
    status: Literal[
        "plan_complete",
        "plan_failed",
        "plan_credentials_required",
        "succeeded",
        "needs_recovery",
        "apply_interrupted",
        "apply_failed",
    ] = Field(description="The run's status once the report was taken")


@router.post(
    "/api/v1/runner/sessions",
    responses=oas.responses(201, SessionStarted, *oas.WRITE),
)
def runner_session(body: SessionStart) -> Reply:
    started = services().runner_api.start(
        body.bootstrap,
        run_id=body.run_id,
        attempt_id=body.attempt_id,
        phase=body.phase,
        sandbox_id=body.sandbox_id,
        inputs=body.inputs,
        state_version=body.state_version,
    )
    return json_reply(201, SessionStarted.model_validate(started))


@router.post(
    "/api/v1/runner/downloads/<artifact_id>",
    responses=oas.responses(200, DownloadGrantView, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_download(artifact_id: str) -> Reply:
    granted = services().runner_api.download(principal(), artifact_id)
    return json_reply(200, DownloadGrantView.model_validate(granted))


@router.post(
    "/api/v1/runner/uploads",
    responses=oas.responses(201, UploadGrantView, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_upload(body: UploadStart) -> Reply:
    granted = services().runner_api.begin_upload(principal(), body.kind)
    return json_reply(201, UploadGrantView.model_validate(granted))


@router.post(
    "/api/v1/runner/uploads/register",
    responses=oas.responses(200, ArtifactsRegistered, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_register_all(body: UploadsRegister) -> Reply:
    from runplane.services.artifacts import UploadReport

    uploads = [UploadReport(u.artifact_id, u.ticket, u.size, u.sha256) for u in body.uploads]
    registered = services().runner_api.register_all(principal(), uploads)
    return json_reply(200, ArtifactsRegistered.model_validate(registered))


@router.post(
    "/api/v1/runner/uploads/<artifact_id>/register",
    responses=oas.responses(200, ArtifactRegistered, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_register(artifact_id: str, body: UploadRegister) -> Reply:
    registered = services().runner_api.register(
        principal(), artifact_id, body.ticket, body.size, body.sha256
    )
    return json_reply(200, ArtifactRegistered.model_validate(registered))


@router.post(
    "/api/v1/runner/apply-start",
    responses=oas.responses(200, ApplyStarted, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_apply_start(body: ApplyStart) -> Reply:
    started = services().runner_api.apply_start(principal(), body.handle, body.request)
    return json_reply(200, ApplyStarted.model_validate(started))


@router.get(
    "/api/v1/runner/state-check",
    responses=oas.responses(200, StateCheck, *oas.READ),
    security=oas.RUNNER,
)
def runner_state_check() -> Reply:
    return json_reply(
        200, StateCheck.model_validate(services().runner_api.state_check(principal()))
    )


@router.post(
    "/api/v1/runner/heartbeat",
    responses=oas.responses(200, Heartbeat, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_heartbeat() -> Reply:
    return json_reply(200, Heartbeat.model_validate(services().runner_api.heartbeat(principal())))


@router.post(
    "/api/v1/runner/log-chunks",
    responses=oas.responses(201, LogChunkStored, *oas.WRITE, also=200),
    security=oas.RUNNER,
)
def runner_log_chunk(body: LogChunkBody) -> Reply:
    try:
        data = base64.b64decode(body.data, validate=True)
    except ValueError:
        raise InvalidInput("data must be base64", "/data") from None
    stored = LogChunkStored.model_validate(
        services().logs.store_chunk(principal(), body.sequence, body.offset, data)
    )
    return json_reply(200 if stored.replayed else 201, stored)


@router.post(
    "/api/v1/runner/result",
    responses=oas.responses(200, ReportTaken, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_result(
    body: Annotated[dict[str, Any], Body(description="A runner report (docs/runner-contract.md)")],
) -> Reply:
    # The contract's own reader validates it (one definition, shared with the runner).
    report, uploads = runner_reports.read_result(body)
    taken = services().runner_api.report(principal(), report, uploads)
    return json_reply(200, ReportTaken.model_validate(taken))


class CredentialsRedeem(BaseModel):
    handle: str = Field(min_length=10, max_length=200)


class AwsCredentials(RunnerDoc):
    """A role session of the phase's role (secret but for the role and region)."""

    role_arn: str
    region: str
    access_key_id: str
    secret_access_key: str
    session_token: str
    expiration: str
    endpoint_url: str | None = Field(
        default=None, description="A non-default STS (the embedded stack's); absent in AWS"
    )


class WorkloadTokenDoc(RunnerDoc):
    """A workload identity token for one audience (secret)."""

    audience: str
    token: str
    client_id: str | None = None
    tenant_id: str | None = None


class CloudCredentials(RunnerDoc):
    aws: AwsCredentials | None = None
    gcp: WorkloadTokenDoc | None = None
    azure: WorkloadTokenDoc | None = None


class CredentialsIssued(RunnerDoc):
    """A phase's cloud credentials: for the engine's environment only."""

    credentials: CloudCredentials
    issued: list[str] = Field(description="What was issued, by identity (never a credential)")


@router.post(
    "/api/v1/runner/credentials",
    responses=oas.responses(200, CredentialsIssued, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_credentials(body: CredentialsRedeem) -> Reply:
    issued = services().run_credentials.issue(principal(), body.handle)
    reply = {"credentials": issued.to_wire(), "issued": issued.identities()}
    return json_reply(200, CredentialsIssued.model_validate(reply))


class StandbyClaim(BaseModel):
    # rsb_<standby ID>.<43 base64url characters>
    ticket: str = Field(min_length=10, max_length=200)


class StandbyAssigned(RunnerDoc):
    """The phase a standby runner was assigned: exactly the environment a launch
    passes a task started for it (docs/runner-contract.md), once (secret)."""

    environment: dict[str, str]


@router.post(
    "/api/v1/runner/standby/claim",
    responses={
        **oas.responses(200, StandbyAssigned, 401, 503),
        204: {"description": "Nothing assigned yet: ask again"},
    },
)
def runner_standby_claim(body: StandbyClaim) -> Reply:
    assigned = services().standby_claims.claim(body.ticket)
    if assigned is None:
        return Reply(status_code=204, body="")
    return json_reply(200, StandbyAssigned(environment=assigned))
