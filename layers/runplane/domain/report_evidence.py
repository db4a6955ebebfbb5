"""Why a runner's report, or its apply start, is refused: the rules, without the reads.

A runner's result names the artifacts its phase produced and states their digests;
the approval then binds them and the apply downloads them. The sandbox runs customer
code, so none of that is believed: every artifact a report names must be a registered
artifact of the run's organization, uploaded by the reporting attempt itself, of the
kind its role needs, and carry exactly the SHA-256 the report states. The services
read the records (with the report's other reads) and commit what these rules decide.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runplane.domain.artifacts import ArtifactKind, ArtifactStatus, Produced
from runplane.domain.parts import ApprovalBinding, PlanEvidence
from runplane.domain.runner_reports import Planned, RunnerReport

# Digests in a reason are shortened: enough to tell two apart, short enough for a
# status reason (200 characters).
_SHOWN_DIGEST = 12
_HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True)
class Named:
    """An artifact a report names for a ``role`` (``plan``, ``plan JSON``, ``log``)."""

    role: str
    artifact_id: str
    kind: ArtifactKind
    # The SHA-256 the report states for it; None where it states none (a log).
    sha256: str | None = None


def named_by(report: RunnerReport) -> tuple[Named, ...]:
    """Every artifact ``report`` names, in the order they are checked."""
    log = (
        (Named("log", report.log_artifact_id, ArtifactKind.LOGS),) if report.log_artifact_id else ()
    )
    if not isinstance(report, Planned):
        return log
    return (
        Named("plan", report.plan_artifact_id, ArtifactKind.PLAN, report.plan_sha256),
        Named(
            "plan JSON",
            report.plan_json_artifact_id,
            ArtifactKind.PLAN_JSON,
            report.plan_json_sha256,
        ),
        *log,
    )


def refusal(
    named: Sequence[Named],
    held: Mapping[str, Produced],
    *,
    organization_id: str,
    attempt_id: str,
) -> str | None:
    """Why the first of ``named`` cannot be what the report says it is (None: each
    is). ``held``: the artifacts found, by ID (registered ones, and those the report's
    own call registers)."""
    for each in named:
        why = _refused(each, held.get(each.artifact_id), organization_id, attempt_id)
        if why is not None:
            return why
    return None


def _refused(
    named: Named, produced: Produced | None, organization_id: str, attempt_id: str
) -> str | None:
    artifact_id = named.artifact_id
    if (
        produced is None
        or produced.artifact.organization_id != organization_id
        or produced.artifact.status is not ArtifactStatus.REGISTERED
    ):
        # Another organization's artifact reads as an unknown one: the sandbox learns
        # nothing of what exists outside its organization.
        return f"artifact {artifact_id} is not a registered artifact of this run's organization"
    if produced.attempt_id != attempt_id:
        return f"artifact {artifact_id} was not uploaded by this attempt"
    if produced.artifact.kind is not named.kind:
        return (
            f"artifact {artifact_id} is not this attempt's {named.role} "
            f"(it is a {produced.artifact.kind.value} artifact)"
        )
    if named.sha256 is not None and produced.artifact.sha256 != named.sha256:
        return (
            f"the {named.role}'s stated sha256 {_short(named.sha256)} is not "
            f"artifact {artifact_id}'s ({_short(produced.artifact.sha256)})"
        )
    return None


def apply_start_refusal(
    plan: PlanEvidence | None, approved: ApprovalBinding | None, stated_sha256: str | None
) -> str | None:
    """Why an apply can never start with the plan a runner presents (None: it may).

    Each of these is final: the approved plan does not change, so a retry presents
    the same mismatch."""
    if plan is None or approved is None:
        return "the run has no plan evidence or approval to start from"
    if approved.plan_sha256 != plan.plan_sha256:
        return (
            f"the approval is bound to plan sha256 {_short(approved.plan_sha256)}, "
            f"but the plan evidence records {_short(plan.plan_sha256)}"
        )
    if stated_sha256 != plan.plan_sha256:
        return (
            f"the runner's plan (sha256 {_short(stated_sha256)}) is not the approved plan "
            f"(sha256 {_short(plan.plan_sha256)})"
        )
    return None


def _short(digest: str | None) -> str:
    """A digest as a reason shows it: what a runner sent is shown only if it is hex."""
    if not digest:
        return "none"
    if not _HEX.fullmatch(digest):
        return "(not a hex digest)"
    return digest if len(digest) <= _SHOWN_DIGEST else f"{digest[:_SHOWN_DIGEST]}..."
