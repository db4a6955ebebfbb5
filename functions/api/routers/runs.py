"""Runs: creation, review, decisions, cancellation, policy overrides and recovery."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.errors import InvalidInput
from runplane.domain.recovery import ClaimedUpload, RecoveryRequest, Resolution
from runplane.domain.run import RunKind
from runplane.domain.run_options import MAX_ADDRESSES, check_run_options
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class RunCreate(BaseModel):
    kind: Literal["plan_only", "speculative", "plan_and_apply"]
    configuration_version_id: str = Field(min_length=1, max_length=64)
    engine_version: str | None = Field(default=None, max_length=40)
    variables: dict[str, str] = Field(default_factory=dict)
    # docs/runs.md, "Run options": checked by the domain, whose errors point here.
    destroy: bool = False
    refresh_only: bool = False
    targets: list[str] = Field(default_factory=list, max_length=MAX_ADDRESSES)
    replacements: list[str] = Field(default_factory=list, max_length=MAX_ADDRESSES)


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


class OverrideBody(BaseModel):
    reason: str = Field(min_length=1, max_length=1000)


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


@router.post(
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
        options=check_run_options(
            destroy=body.destroy,
            refresh_only=body.refresh_only,
            targets=body.targets,
            replacements=body.replacements,
        ),
    )
    return json_reply(201, _review(services().runs.review_of(run)))


@router.get(
    "/api/v1/workspaces/<workspace_id>/runs",
    responses=oas.responses(200, oas.RunList, *oas.READ),
    security=oas.PEOPLE,
)
def list_runs(workspace_id: str) -> Reply:
    runs = services().runs.list(principal(), workspace_id)
    listed = [
        oas.RunSummary(
            id=r.id, kind=r.kind.value, status=r.status.value, created_at=r.created_at.isoformat()
        )
        for r in runs
    ]
    return json_reply(200, oas.RunList(runs=listed))


@router.get(
    "/api/v1/runs/<run_id>",
    responses=oas.responses(200, oas.Review, *oas.READ),
    security=oas.PEOPLE,
)
def review(run_id: str) -> Reply:
    return json_reply(200, _review(services().runs.review(principal(), run_id)))


def _decide(run_id: str, decision: str, body: DecisionBody) -> Reply:
    who = principal()
    s = services()
    binding = body.model_dump(exclude_none=True, exclude={"comment"})
    decided = s.runs.decide(who, run_id, decision, body.comment, binding)
    return json_reply(200, _review(s.runs.review_of(decided.run)))


@router.post(
    "/api/v1/runs/<run_id>/actions/approve",
    responses=oas.responses(200, oas.Review, *oas.WRITE),
    security=oas.PEOPLE,
)
def approve(run_id: str, body: DecisionBody) -> Reply:
    return _decide(run_id, "approve", body)


@router.post(
    "/api/v1/runs/<run_id>/actions/reject",
    responses=oas.responses(200, oas.Review, *oas.WRITE),
    security=oas.PEOPLE,
)
def reject(run_id: str, body: DecisionBody) -> Reply:
    return _decide(run_id, "reject", body)


@router.post(
    "/api/v1/runs/<run_id>/actions/cancel",
    responses=oas.responses(200, oas.Review, *oas.WRITE),
    security=oas.PEOPLE,
)
def cancel(run_id: str) -> Reply:
    who = principal()
    s = services()
    s.runs.cancel(who, run_id, s.launcher)
    return json_reply(200, _review(s.runs.review(who, run_id)))


@router.post(
    "/api/v1/runs/<run_id>/actions/override-policy",
    responses=oas.responses(200, oas.Review, *oas.WRITE),
    security=oas.PEOPLE,
)
def override_policy(run_id: str, body: OverrideBody) -> Reply:
    who = principal()
    s = services()
    s.policies.override(who, s.runs.get(who, run_id), body.reason)
    return json_reply(200, _review(s.runs.review(who, run_id)))


@router.post(
    "/api/v1/runs/<run_id>/actions/recover",
    responses=oas.responses(200, oas.RecoveryResult, *oas.WRITE),
    security=oas.PEOPLE,
)
def recover(run_id: str, body: RecoverBody) -> Reply:
    s = services()
    result = s.recoveries.recover(principal(), run_id, recovery_request(body), s.launcher)
    return json_reply(200, oas.RecoveryResult.model_validate(result))


def _review(review: dict[str, Any]) -> oas.Review:
    """The review as its documented model: what a client gets is exactly the schema."""
    return oas.Review.model_validate(review)
