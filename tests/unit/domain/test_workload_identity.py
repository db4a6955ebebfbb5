"""Workload identity claims: the subject, lifetimes clipped and refused, the plan digest
an apply carries and a plan never does."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.errors import WorkloadIdentityRefused
from runplane.domain.run import RunKind
from runplane.domain.workload_identity import (
    CLAIMS_SUPPORTED,
    MAX_LIFETIME,
    RunPhase,
    TokenRequest,
    WorkloadIdentityClaims,
    claims_for,
    lifetime,
    subject,
)

NOW = datetime(2026, 5, 4, 12, 0, 0, 750_000, tzinfo=UTC)  # NumericDates truncate
ISSUER = "https://runplane.example.com"
ORG_ID = "org-aaaaaaaaaaaaaaaaaaaaaaaaaa"
WS_ID = "ws-bbbbbbbbbbbbbbbbbbbbbbbbbb"
RUN_ID = "run-cccccccccccccccccccccccccc"
ATTEMPT_ID = "att-dddddddddddddddddddddddddd"
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def request(phase: RunPhase = RunPhase.PLAN, **changes: Any) -> TokenRequest:
    base = TokenRequest(
        organization_id=ORG_ID,
        organization_name="acme",
        workspace_id=WS_ID,
        workspace_name="network",
        run_id=RUN_ID,
        attempt_id=ATTEMPT_ID,
        run_phase=phase,
        run_kind=RunKind.PLAN_AND_APPLY,
        audience="sts.amazonaws.com",
        plan_digest=DIGEST if phase is RunPhase.APPLY else None,
    )
    return dataclasses.replace(base, **changes)


def build(
    req: TokenRequest,
    *,
    deadline: datetime = NOW + timedelta(hours=4),
    asked: timedelta = MAX_LIFETIME,
) -> WorkloadIdentityClaims:
    return claims_for(
        req,
        issuer=ISSUER,
        token_id="wit-eeeeeeeeeeeeeeeeeeeeeeeeee",
        now=NOW,
        phase_deadline=deadline,
        requested_lifetime=asked,
    )


def test_the_subject_names_the_organization_by_name_and_the_workspace_by_id() -> None:
    assert subject("acme", WS_ID, RunPhase.APPLY) == (
        "organization:acme:workspace:ws-bbbbbbbbbbbbbbbbbbbbbbbbbb:run_phase:apply"
    )
    assert subject("acme", WS_ID, RunPhase.PLAN).endswith(":run_phase:plan")


@pytest.mark.parametrize(
    ("organization", "workspace"),
    [
        ("acme:workspace:x", WS_ID),  # a colon would forge another subject's parts
        ("", WS_ID),
        ("a" * 91, WS_ID),
        ("acme", "network"),  # a workspace's name is not its ID
        ("acme", RUN_ID),  # nor is another kind of ID
    ],
)
def test_a_subject_of_anything_but_a_name_and_a_workspace_id_is_refused(
    organization: str, workspace: str
) -> None:
    with pytest.raises(WorkloadIdentityRefused):
        subject(organization, workspace, RunPhase.PLAN)


def test_a_plan_token_carries_every_claim_but_the_plan_digest() -> None:
    # When the claims of a plan token are built
    claims = build(request()).to_jwt()
    # Then they name the phase's organization, workspace, run and attempt
    assert claims == {
        "iss": ISSUER,
        "aud": "sts.amazonaws.com",
        "sub": f"organization:acme:workspace:{WS_ID}:run_phase:plan",
        "iat": int(NOW.timestamp()),
        "nbf": int(NOW.timestamp()),
        "exp": int(NOW.timestamp()) + 3600,
        "jti": "wit-eeeeeeeeeeeeeeeeeeeeeeeeee",
        "runplane_organization_id": ORG_ID,
        "runplane_organization_name": "acme",
        "runplane_workspace_id": WS_ID,
        "runplane_workspace_name": "network",
        "runplane_run_id": RUN_ID,
        "runplane_attempt_id": ATTEMPT_ID,
        "runplane_run_phase": "plan",
        "runplane_run_kind": "plan_and_apply",
    }
    # And every claim a token can hold is one the discovery document lists
    assert set(claims) < set(CLAIMS_SUPPORTED)
    assert set(CLAIMS_SUPPORTED) - set(claims) == {"runplane_plan_digest"}


def test_an_apply_token_carries_the_approved_plans_digest() -> None:
    claims = build(request(RunPhase.APPLY)).to_jwt()
    assert claims["runplane_plan_digest"] == DIGEST
    assert claims["runplane_run_phase"] == "apply"
    assert claims["sub"].endswith(":run_phase:apply")


def test_an_apply_token_without_a_plan_digest_is_refused() -> None:
    with pytest.raises(WorkloadIdentityRefused) as refused:
        build(request(RunPhase.APPLY, plan_digest=None))
    assert refused.value.pointer == "/runplane_plan_digest"
    assert refused.value.http_status == 422


@pytest.mark.parametrize("digest", ["", DIGEST.upper(), DIGEST[:-1], f"sha256:{DIGEST}"])
def test_an_apply_token_with_a_malformed_digest_is_refused(digest: str) -> None:
    with pytest.raises(WorkloadIdentityRefused):
        build(request(RunPhase.APPLY, plan_digest=digest))


def test_a_plan_token_with_a_plan_digest_is_refused() -> None:
    with pytest.raises(WorkloadIdentityRefused) as refused:
        build(request(RunPhase.PLAN, plan_digest=DIGEST))
    assert refused.value.pointer == "/runplane_plan_digest"


@pytest.mark.parametrize("kind", [RunKind.PLAN_ONLY, RunKind.SPECULATIVE, RunKind.REFRESH_ONLY])
def test_a_run_that_never_applies_gets_plan_tokens_only(kind: RunKind) -> None:
    # A plan token is issued for every kind of run
    assert build(request(run_kind=kind)).to_jwt()["runplane_run_kind"] == kind.value
    # But an apply token only for a run that may apply
    with pytest.raises(WorkloadIdentityRefused) as refused:
        build(request(RunPhase.APPLY, run_kind=kind))
    assert refused.value.pointer == "/runplane_run_kind"


def test_a_longer_lifetime_is_clipped_to_the_maximum() -> None:
    claims = build(request(), asked=timedelta(hours=12))
    assert claims.lifetime_seconds == MAX_LIFETIME.total_seconds() == 3600


def test_a_lifetime_is_clipped_to_what_is_left_of_the_phase() -> None:
    # Given a phase that ends in ten minutes and a half
    deadline = NOW + timedelta(minutes=10, seconds=30)
    # When an hour is asked
    claims = build(request(), deadline=deadline, asked=timedelta(hours=1))
    # Then the token expires no later than the phase
    assert claims.expires_at <= deadline.timestamp()
    assert claims.lifetime_seconds == 630


def test_a_shorter_lifetime_is_kept() -> None:
    assert build(request(), asked=timedelta(minutes=15)).lifetime_seconds == 900


@pytest.mark.parametrize(
    "asked", [timedelta(0), timedelta(seconds=-5), timedelta(milliseconds=300)]
)
def test_a_lifetime_of_zero_or_less_is_refused(asked: timedelta) -> None:
    with pytest.raises(WorkloadIdentityRefused) as refused:
        lifetime(asked, now=NOW, phase_deadline=NOW + timedelta(hours=1))
    assert refused.value.pointer == "/lifetime"


@pytest.mark.parametrize("left", [timedelta(0), timedelta(seconds=-1), timedelta(milliseconds=200)])
def test_no_token_is_issued_for_a_phase_past_its_limit(left: timedelta) -> None:
    with pytest.raises(WorkloadIdentityRefused) as refused:
        build(request(), deadline=NOW + left)
    assert refused.value.pointer == "/phase_deadline"


@pytest.mark.parametrize(
    "audience",
    ["", "two words", "a" * 401, "tab\there", "ünïcode"],
)
def test_an_audience_must_be_one_short_printable_string(audience: str) -> None:
    with pytest.raises(WorkloadIdentityRefused) as refused:
        build(request(audience=audience))
    assert refused.value.pointer == "/aud"


@pytest.mark.parametrize(
    "audience",
    [
        "sts.amazonaws.com",
        "api://AzureADTokenExchange",
        "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/p/providers/r",
    ],
)
def test_the_clouds_audiences_are_accepted(audience: str) -> None:
    assert build(request(audience=audience)).to_jwt()["aud"] == audience


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("subject", f"organization:other:workspace:{WS_ID}:run_phase:plan"),
        ("subject", f"organization:acme:workspace:{WS_ID}:run_phase:apply"),
        ("expires_at", int(NOW.timestamp()) + 3601),
        ("expires_at", int(NOW.timestamp())),
        ("not_before", int(NOW.timestamp()) - 1),
        ("issuer", ""),
        ("token_id", ""),
        ("run_id", ATTEMPT_ID),
        ("attempt_id", RUN_ID),
        ("organization_id", WS_ID),
        ("workspace_name", "bad name"),
        ("run_phase", "destroy"),
        ("run_kind", "apply_everything"),
    ],
)
def test_claims_are_built_only_valid(field: str, value: Any) -> None:
    # Given valid claims
    claims = build(request())
    # When one field is changed to break an invariant, Then the value cannot be built
    with pytest.raises(WorkloadIdentityRefused):
        dataclasses.replace(claims, **{field: value})
