"""The runner's endpoints: its session, artifacts, apply start, heartbeats, logs and
its report."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain import runner_reports
from runplane.domain.errors import InvalidInput
from runplane.domain.logs import MAX_CHUNK_BYTES
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


@router.post(
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
        inputs=body.inputs,
    )
    return json_reply(201, started)


@router.post(
    "/api/v1/runner/downloads/<artifact_id>",
    responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_download(artifact_id: str) -> Reply:
    return json_reply(200, services().runner_api.download(principal(), artifact_id))


@router.post(
    "/api/v1/runner/uploads",
    responses=oas.responses(201, oas.RunnerReply, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_upload(body: UploadStart) -> Reply:
    return json_reply(201, services().runner_api.begin_upload(principal(), body.kind))


@router.post(
    "/api/v1/runner/uploads/register",
    responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_register_all(body: UploadsRegister) -> Reply:
    from runplane.services.artifacts import UploadReport

    uploads = [UploadReport(u.artifact_id, u.ticket, u.size, u.sha256) for u in body.uploads]
    return json_reply(200, services().runner_api.register_all(principal(), uploads))


@router.post(
    "/api/v1/runner/uploads/<artifact_id>/register",
    responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_register(artifact_id: str, body: UploadRegister) -> Reply:
    return json_reply(
        200,
        services().runner_api.register(
            principal(), artifact_id, body.ticket, body.size, body.sha256
        ),
    )


@router.post(
    "/api/v1/runner/apply-start",
    responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_apply_start(body: ApplyStart) -> Reply:
    return json_reply(
        200, services().runner_api.apply_start(principal(), body.handle, body.request)
    )


@router.get(
    "/api/v1/runner/state-check",
    responses=oas.responses(200, oas.RunnerReply, *oas.READ),
    security=oas.RUNNER,
)
def runner_state_check() -> Reply:
    return json_reply(200, services().runner_api.state_check(principal()))


@router.post(
    "/api/v1/runner/heartbeat",
    responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_heartbeat() -> Reply:
    return json_reply(200, services().runner_api.heartbeat(principal()))


@router.post(
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
    return json_reply(200 if stored["replayed"] else 201, stored)


@router.post(
    "/api/v1/runner/result",
    responses=oas.responses(200, oas.RunnerReply, *oas.WRITE),
    security=oas.RUNNER,
)
def runner_result(
    body: Annotated[dict[str, Any], Body(description="A runner report (docs/runner-contract.md)")],
) -> Reply:
    # The contract's own reader validates it (one definition, shared with the runner).
    report, uploads = runner_reports.read_result(body)
    return json_reply(200, services().runner_api.report(principal(), report, uploads))
