"""The rules a runner's report and apply start are held to (``domain.report_evidence``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactStatus, Produced
from runplane.domain.parts import ApprovalBinding, PlanEvidence
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.report_evidence import (
    apply_start_refusal,
    named_by,
    refusal,
)
from runplane.domain.runner_reports import Applied, Failed, Planned

ORG, ATTEMPT = "org-1", "att-1"
PLAN, JSON, LOG = "a" * 64, "b" * 64, "c" * 64


def produced(
    artifact_id: str,
    kind: ArtifactKind,
    sha256: str,
    *,
    org: str = ORG,
    attempt: str | None = ATTEMPT,
    status: ArtifactStatus = ArtifactStatus.REGISTERED,
) -> Produced:
    artifact = Artifact(artifact_id, org, kind, status, 1, sha256, datetime(2025, 1, 1, tzinfo=UTC))
    return Produced(artifact, attempt)


HELD = {
    "art-plan": produced("art-plan", ArtifactKind.PLAN, PLAN),
    "art-json": produced("art-json", ArtifactKind.PLAN_JSON, JSON),
    "art-log": produced("art-log", ArtifactKind.LOGS, LOG),
}
REPORT = Planned(
    summary=PlanSummary(adds=1, has_changes=True),
    plan_artifact_id="art-plan",
    plan_sha256=PLAN,
    plan_json_artifact_id="art-json",
    plan_json_sha256=JSON,
    log_artifact_id="art-log",
)


def refused(report: Planned | Applied | Failed, held: dict[str, Produced] = HELD) -> str | None:
    return refusal(named_by(report), held, organization_id=ORG, attempt_id=ATTEMPT)


def test_a_report_of_its_attempt_s_own_uploads_is_taken() -> None:
    assert refused(REPORT) is None
    assert refused(Applied(log_artifact_id="art-log")) is None
    assert refused(Failed(reason="boom")) is None


@pytest.mark.parametrize(
    ("held", "why"),
    [
        ({}, "artifact art-plan is not a registered artifact of this run's organization"),
        (
            {"art-plan": produced("art-plan", ArtifactKind.PLAN, PLAN, org="org-2")},
            "artifact art-plan is not a registered artifact of this run's organization",
        ),
        (
            {
                "art-plan": produced(
                    "art-plan", ArtifactKind.PLAN, PLAN, status=ArtifactStatus.PENDING
                )
            },
            "artifact art-plan is not a registered artifact of this run's organization",
        ),
        (
            {"art-plan": produced("art-plan", ArtifactKind.PLAN, PLAN, attempt="att-2")},
            "artifact art-plan was not uploaded by this attempt",
        ),
        (
            {"art-plan": produced("art-plan", ArtifactKind.PLAN, PLAN, attempt=None)},
            "artifact art-plan was not uploaded by this attempt",
        ),
        (
            {"art-plan": produced("art-plan", ArtifactKind.LOGS, PLAN)},
            "artifact art-plan is not this attempt's plan (it is a logs artifact)",
        ),
        (
            {"art-plan": produced("art-plan", ArtifactKind.PLAN, "d" * 64)},
            "the plan's stated sha256 aaaaaaaaaaaa... is not artifact art-plan's (dddddddddddd...)",
        ),
        (
            {"art-json": produced("art-json", ArtifactKind.PLAN_JSON, "d" * 64)},
            "the plan JSON's stated sha256 bbbbbbbbbbbb... is not artifact art-json's "
            "(dddddddddddd...)",
        ),
    ],
)
def test_the_first_artifact_that_is_not_what_the_report_says_is_named(
    held: dict[str, Produced], why: str
) -> None:
    assert refused(REPORT, {**HELD, **held} if held else {}) == why


def test_a_log_is_held_to_its_attempt_and_kind_but_states_no_digest() -> None:
    other = {"art-log": produced("art-log", ArtifactKind.LOGS, LOG, attempt="att-2")}
    assert refused(Applied(log_artifact_id="art-log"), other) == (
        "artifact art-log was not uploaded by this attempt"
    )
    assert refused(Failed(reason="x", log_artifact_id="art-plan")) == (
        "artifact art-plan is not this attempt's log (it is a plan artifact)"
    )


def evidence(sha256: str = PLAN) -> PlanEvidence:
    return PlanEvidence(
        ATTEMPT, "art-plan", sha256, "art-json", JSON, "art-log", {}, True, None, None
    )


def test_an_apply_start_needs_the_approved_plan_and_consistent_evidence() -> None:
    approved = ApprovalBinding(PLAN, None, None, None)
    assert apply_start_refusal(evidence(), approved, PLAN) is None
    assert apply_start_refusal(evidence(), approved, "0" * 64) == (
        "the runner's plan (sha256 000000000000...) is not the approved plan "
        "(sha256 aaaaaaaaaaaa...)"
    )
    assert apply_start_refusal(evidence(), approved, None) == (
        "the runner's plan (sha256 none) is not the approved plan (sha256 aaaaaaaaaaaa...)"
    )
    # What a runner sent is quoted only as a hex digest
    assert "<" not in (apply_start_refusal(evidence(), approved, "<script>") or "")
    assert apply_start_refusal(evidence("e" * 64), approved, "e" * 64) == (
        "the approval is bound to plan sha256 aaaaaaaaaaaa..., but the plan evidence "
        "records eeeeeeeeeeee..."
    )
    assert apply_start_refusal(None, approved, PLAN) is not None
    assert apply_start_refusal(evidence(), None, PLAN) is not None
