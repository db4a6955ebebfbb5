"""A runner's plan result over the in-memory unit of work: what a plan report commits
(its uploads, the attempt's close, the plan's evidence with the policy check and the
apply record, the run's move) all or nothing, what it refuses (another attempt, a late or
duplicated report, artifacts it cannot vouch for), and whom it wakes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Never

import pytest

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactRecord, ArtifactStatus
from runplane.domain.entities import Run
from runplane.domain.errors import ConcurrentChange, Conflict, ReportRefused
from runplane.domain.parts import AttemptState, PlanEvidenceState
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import CredentialsRequired, Failed, Planned
from runplane.services.capabilities import Capabilities
from runplane.services.policy import RESERVED
from runplane.services.runner_reports import RunnerReports
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import InMemoryUnitOfWork
from tests.fakes import InMemoryArtifactRecords, no_read_ahead
from tests.service.conftest import Tier
from tests.service.scenarios import open_attempt, run_at, settle, written

ATTEMPT = "att-plan"
PLAN_WAIT = "tok-plan"
UPLOADED_AT = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Desk:
    tier: Tier
    reports: RunnerReports
    records: InMemoryArtifactRecords

    def everything(self) -> tuple[object, ...]:
        return (written(self.tier), dict(self.records.records))


def _not_here() -> Never:
    raise AssertionError("a plan report reached a service the tier does not build")


@pytest.fixture
def desk(tier: Tier) -> Desk:
    records = InMemoryArtifactRecords()

    def units() -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(
            tier.run_reader,
            tier.writer_queue,
            tier.sandboxes,
            directory=tier.directory,
            artifacts=records,
        )

    reports = RunnerReports(
        tier.clock,
        tier.ids,
        run_lifecycle(tier.clock, tier.ids),
        Capabilities(tier.clock, tier.ids, tier.new_unit),
        tier.workflow,
        tier.launcher,
        control_plane_url="http://runplane.test",
        launch_controls=_not_here,
        policies=_not_here,
        units=units,
        reads_ahead=no_read_ahead,
    )
    return Desk(tier, reports, records)


def planning(desk: Desk) -> Run:
    """``run-1`` planning in sandbox ``task-plan`` (a slot and a runner session held),
    holding the writer of ``ws-1`` with ``run-2`` waiting; its phase's wait is
    ``PLAN_WAIT``."""
    tier = desk.tier
    run = run_at(tier, RunStatus.PLANNING)
    attempt = open_attempt(tier, run, "plan", "task-plan", "org#org-acme", "session-plan")
    ledger = tier.run_reader
    ledger.set_part(replace(attempt, token=PLAN_WAIT))
    tier.writer_queue.holders["ws-1"] = run.id
    tier.writer_queue.waiting["ws-1"] = [("run-2", "tok-waiter")]
    settle(tier)
    return ledger.get_run(run.id)


def upload(
    kind: ArtifactKind,
    artifact_id: str,
    sha256: str,
    *,
    organization_id: str = "org-acme",
    attempt_id: str = ATTEMPT,
) -> ArtifactRecord:
    artifact = Artifact(
        artifact_id, organization_id, kind, ArtifactStatus.REGISTERED, 10, sha256, UPLOADED_AT
    )
    key = f"objects/{artifact_id}"
    return ArtifactRecord(artifact, key, b"key", 4096, "etag", "rs-1", attempt_id)


def uploads(**changes: str) -> list[ArtifactRecord]:
    return [
        upload(ArtifactKind.PLAN, "art-plan", "p" * 64, **changes),
        upload(ArtifactKind.PLAN_JSON, "art-json", "j" * 64, **changes),
        upload(ArtifactKind.LOGS, "art-log", "l" * 64, **changes),
    ]


def planned(adds: int = 1) -> Planned:
    return Planned(
        summary=PlanSummary(adds=adds, has_changes=adds > 0),
        plan_artifact_id="art-plan",
        plan_sha256="p" * 64,
        plan_json_artifact_id="art-json",
        plan_json_sha256="j" * 64,
        log_artifact_id="art-log",
        engine_version="1.0.3",
        engine_seconds=2.5,
    )


def test_a_plan_result_commits_its_evidence_and_wakes_the_workflow(desk: Desk) -> None:
    # Given a run planning, its runner's uploads verified in the reporting call
    run = planning(desk)
    # When the runner reports a plan with one resource to add
    outcome = desk.reports.report_plan(run.id, ATTEMPT, planned(), uploads())
    # Then the run's plan is complete, with changes; its evidence names the uploads
    assert outcome == "plan_complete"
    moved = desk.tier.run_reader.get_run(run.id)
    assert (moved.status, moved.plan_has_changes) == (RunStatus.PLAN_COMPLETE, True)
    parts = desk.tier.run_reader.parts(run.id)
    assert parts["plan"].state == PlanEvidenceState.COMMITTED
    assert parts["plan"].body["plan_artifact_id"] == "art-plan"
    assert parts["plan"].body["attempt_id"] == ATTEMPT
    # And the policy check is reserved and the apply record pending, with the plan
    assert parts["policy"].state == RESERVED
    assert parts["apply"].state == "pending"
    # And the attempt closed succeeded: its slot given back, its session revoked
    assert parts["attempt#plan"].state == AttemptState.SUCCEEDED
    assert desk.tier.sandboxes.active["org#org-acme"] == 0
    assert desk.tier.sandboxes.sessions["session-plan"] is not None
    # And the uploads are recorded, the workflow's wait resumed with the outcome and the
    # plan JSON's ID (public IDs only: the workflow's state carries it); the writer stays
    assert sorted(desk.records.records) == ["art-json", "art-log", "art-plan"]
    assert desk.tier.workflow.resumed == [
        ("tok-plan", {"outcome": "plan_complete", "plan_json_artifact_id": "art-json"})
    ]
    assert desk.tier.writer_queue.holders["ws-1"] == run.id


@pytest.mark.parametrize(
    ("report", "status"),
    [
        (Failed(reason="provider crashed", log_artifact_id="art-log"), "plan_failed"),
        (
            CredentialsRequired(reason="no credentials for aws", log_artifact_id="art-log"),
            "plan_credentials_required",
        ),
    ],
)
def test_a_failed_plan_ends_the_run_and_hands_the_writer_on(
    desk: Desk, report: Failed, status: str
) -> None:
    run = planning(desk)
    outcome = desk.reports.report_plan(run.id, ATTEMPT, report, [uploads()[2]])
    assert outcome == status
    assert desk.tier.run_reader.get_run(run.id).status.value == status
    parts = desk.tier.run_reader.parts(run.id)
    assert parts["attempt#plan"].state == AttemptState.FAILED
    assert "plan" not in parts
    assert "policy" not in parts
    # The next run in line holds the writer and was woken, then the plan's wait
    assert desk.tier.writer_queue.holders["ws-1"] == "run-2"
    assert desk.tier.workflow.resumed == [
        ("tok-waiter", {"held": True}),
        ("tok-plan", {"outcome": status}),
    ]


def test_a_duplicated_or_late_report_is_refused_and_writes_nothing(desk: Desk) -> None:
    # Given a plan result already committed
    run = planning(desk)
    desk.reports.report_plan(run.id, ATTEMPT, planned(), uploads())
    before = desk.everything()
    # When the same report arrives again, or a failure after it
    for report in (planned(), Failed(reason="late")):
        with pytest.raises(Conflict, match="already recorded"):
            desk.reports.report_plan(run.id, ATTEMPT, report)
    # Then nothing was written and nobody woken again
    assert desk.everything() == before


def test_another_attempts_report_is_refused(desk: Desk) -> None:
    run = planning(desk)
    before = desk.everything()
    with pytest.raises(Conflict, match="not run"):
        desk.reports.report_plan(run.id, "att-other", planned(), uploads(attempt_id="att-other"))
    assert desk.everything() == before


@pytest.mark.parametrize(
    ("held", "why"),
    [
        ([], "not a registered artifact"),
        (uploads(organization_id="org-globex"), "not a registered artifact"),
        (uploads(attempt_id="att-earlier"), "not uploaded by this attempt"),
        (
            [upload(ArtifactKind.LOGS, "art-plan", "p" * 64), *uploads()[1:]],
            "is not this attempt's plan",
        ),
        (
            [upload(ArtifactKind.PLAN, "art-plan", "x" * 64), *uploads()[1:]],
            "stated sha256",
        ),
    ],
    ids=["unknown", "another organization's", "another attempt's", "wrong kind", "forged digest"],
)
def test_a_report_naming_artifacts_it_cannot_vouch_for_fails_the_plan(
    desk: Desk, held: list[ArtifactRecord], why: str
) -> None:
    # Given a plan whose report names artifacts the control plane cannot vouch for
    run = planning(desk)
    # When it reports
    with pytest.raises(ReportRefused, match=why):
        desk.reports.report_plan(run.id, ATTEMPT, planned(), held)
    # Then the run failed with no plan, policy check, apply record or upload written
    assert desk.tier.run_reader.get_run(run.id).status is RunStatus.PLAN_FAILED
    parts = desk.tier.run_reader.parts(run.id)
    assert set(parts) == {"input", "attempt#plan"}
    assert parts["attempt#plan"].state == AttemptState.FAILED
    assert parts["attempt#plan"].body["log_artifact_id"] is None
    assert desk.records.records == {}
    assert desk.tier.workflow.resumed[-1] == ("tok-plan", {"outcome": "plan_failed"})


def test_an_upload_already_recorded_refuses_the_whole_result(desk: Desk) -> None:
    # Given one of the uploads recorded already (a register that raced the report)
    run = planning(desk)
    taken = uploads()[0]
    desk.records.records[taken.artifact.id] = taken
    before = desk.everything()
    # When the report registers it again with the result
    with pytest.raises(ConcurrentChange, match="already registered"):
        desk.reports.report_plan(run.id, ATTEMPT, planned(), uploads())
    # Then nothing of the result was written
    assert desk.everything() == before
