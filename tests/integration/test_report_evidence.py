"""A runner's result is not believed: every artifact it names must be its attempt's own
registered upload, of the kind its role needs, with the digest it states. A plan report
that names anything else ends the run ``plan_failed`` with a named reason and gives it
no plan evidence, policy check, apply record or approval binding; an apply report keeps
its outcome and drops the log. An apply whose start can never succeed ends the run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from runplane.domain.capabilities import Binding, Phase
from runplane.domain.errors import (
    ApplyStartRefused,
    Conflict,
    ReportRefused,
    RunnerAuthorityRefused,
    UnknownCapability,
)
from runplane.domain.identity import Unauthenticated
from runplane.domain.ids import IdKind
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import Failed, Planned
from runplane.services.policy import RESERVED
from runplane.store import artifacts as artifact_store
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import (
    Arena,
    applying,
    awaiting_approval,
    build_arena,
    log_artifact,
    planned,
    planning,
    put_through,
    to_apply_sandbox,
    uploaded,
)

CHANGES = PlanSummary(adds=1, has_changes=True)
# (what the forged report names instead of the truth, what the reason then says)
Forgery = Callable[[Arena, str, Planned], tuple[Planned, str]]


def another_run_s_plan(arena: Arena, run_id: str, report: Planned) -> tuple[Planned, str]:
    _, other = planning(arena, f"other-of-{run_id[-6:]}")
    theirs = uploaded(arena, other, "plan", {"plan": b"another run's plan"})["plan"]
    forged = dataclasses.replace(
        report, plan_artifact_id=theirs.artifact_id, plan_sha256=theirs.sha256
    )
    return forged, f"artifact {theirs.artifact_id} was not uploaded by this attempt"


def its_log_as_its_plan(arena: Arena, run_id: str, report: Planned) -> tuple[Planned, str]:
    forged = dataclasses.replace(report, plan_artifact_id=report.log_artifact_id)
    return forged, (
        f"artifact {report.log_artifact_id} is not this attempt's plan (it is a logs artifact)"
    )


def an_unregistered_upload(arena: Arena, run_id: str, report: Planned) -> tuple[Planned, str]:
    # Put to its URL under this attempt's ticket, but never registered.
    grant = arena.session_start(run_id, "plan")["grants"]["uploads"]["plan"]
    upload = put_through(grant, b"a plan nobody registered")
    forged = dataclasses.replace(
        report, plan_artifact_id=upload.artifact_id, plan_sha256=upload.sha256
    )
    return forged, (
        f"artifact {upload.artifact_id} is not a registered artifact of this run's organization"
    )


def a_wrong_plan_digest(arena: Arena, run_id: str, report: Planned) -> tuple[Planned, str]:
    forged = dataclasses.replace(report, plan_sha256="0" * 64)
    registered = report.plan_sha256[:12]
    return forged, (
        f"the plan's stated sha256 000000000000... is not artifact "
        f"{report.plan_artifact_id}'s ({registered}...)"
    )


def a_wrong_plan_json_digest(arena: Arena, run_id: str, report: Planned) -> tuple[Planned, str]:
    forged = dataclasses.replace(report, plan_json_sha256="f" * 64)
    registered = report.plan_json_sha256[:12]
    return forged, (
        f"the plan JSON's stated sha256 ffffffffffff... is not artifact "
        f"{report.plan_json_artifact_id}'s ({registered}...)"
    )


def another_organization_s_plan(arena: Arena, run_id: str, report: Planned) -> tuple[Planned, str]:
    other = build_arena(arena.stack, arena.stack.tenancy.create_organization("elsewhere"))
    _, theirs_run = planning(other, "elsewhere")
    theirs = uploaded(other, theirs_run, "plan", {"plan": b"their plan"})["plan"]
    forged = dataclasses.replace(
        report, plan_artifact_id=theirs.artifact_id, plan_sha256=theirs.sha256
    )
    # Named as an unknown one would be: nothing says it exists elsewhere.
    return forged, (
        f"artifact {theirs.artifact_id} is not a registered artifact of this run's organization"
    )


def a_control_plane_artifact(arena: Arena, run_id: str, report: Planned) -> tuple[Planned, str]:
    configuration = run_parts.require(run_id, "input").body["configuration_artifact_id"]
    forged = dataclasses.replace(report, plan_json_artifact_id=configuration)
    return forged, f"artifact {configuration} was not uploaded by this attempt"


FORGERIES: list[Forgery] = [
    another_run_s_plan,
    its_log_as_its_plan,
    an_unregistered_upload,
    a_wrong_plan_digest,
    a_wrong_plan_json_digest,
    another_organization_s_plan,
    a_control_plane_artifact,
]


def plan_attempt_id(run_id: str) -> str:
    return str(run_parts.require(run_id, "attempt#plan").body["attempt_id"])


def assert_failed_without_plan_evidence(arena: Arena, ws: str, run_id: str, reason: str) -> None:
    run = arena.runs.get(arena.admin, run_id)
    assert (run.status, run.status_reason) == (RunStatus.PLAN_FAILED, reason)
    # No plan evidence, no policy check, no apply record (so nothing to bind or approve)
    for part in ("plan", "policy", "apply", "approval"):
        assert run_parts.get(run_id, part, reads=IdentityMap()) is None, part
    attempt = run_parts.require(run_id, "attempt#plan")
    assert attempt.state == "failed"
    assert (attempt.body["reason"], attempt.body["log_artifact_id"]) == (reason, None)
    # The move is one audited transaction, the workspace is free, the workflow resumed
    trail = arena.stack.lifecycle.runs.audit_trail(run_id)
    assert trail[-1].type == "run.plan_failed"
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id is None
    assert "token-plan" in arena.workflow.resumed


@pytest.mark.parametrize("forgery", FORGERIES, ids=lambda forgery: forgery.__name__)
def test_a_plan_report_naming_what_its_attempt_did_not_upload_fails_the_run(
    arena: Arena, forgery: Forgery
) -> None:
    # Given a planning run whose runner uploaded and registered its plan, JSON and log
    ws, run_id = planning(arena, "forged")
    honest = planned(arena, run_id, CHANGES)
    # And a report that names something else in their place
    forged, why = forgery(arena, run_id, honest)

    # When the runner reports it
    with pytest.raises(ReportRefused) as refused:
        arena.orchestration.report_plan(run_id, plan_attempt_id(run_id), forged)

    # Then it is refused as a typed 422 naming the run's end and why
    reason = f"the plan report was refused: {why}"
    assert (refused.value.http_status, refused.value.to_body()) == (
        422,
        {"code": "REPORT_REFUSED", "message": reason, "run_id": run_id, "status": "plan_failed"},
    )
    # And the run ended plan_failed with that reason and no plan evidence
    assert_failed_without_plan_evidence(arena, ws, run_id, reason)


def test_the_honest_report_still_commits_its_plan(arena: Arena) -> None:
    # Given a planning run whose runner uploaded and registered its plan, JSON and log
    _, run_id = planning(arena, "honest")
    report = planned(arena, run_id, CHANGES)

    # When it reports exactly those
    status = arena.orchestration.report_plan(run_id, plan_attempt_id(run_id), report)

    # Then the run has its plan evidence, its reserved policy check and apply record
    assert status == "plan_complete"
    assert run_parts.require(run_id, "plan").body["plan_artifact_id"] == report.plan_artifact_id
    assert run_parts.require(run_id, "policy").state == RESERVED
    assert run_parts.require(run_id, "apply").state == "pending"


def test_a_refused_result_registers_none_of_its_uploads_and_a_replay_writes_nothing(
    arena: Arena,
) -> None:
    # Given a planning run's runner that put its plan, JSON and log through its grants
    ws, run_id = planning(arena, "refused-uploads")
    started = arena.session_start(run_id, "plan")
    grants = started["grants"]["uploads"]
    bodies = {"plan": b"plan", "plan_json": b"{}", "logs": b"log\n"}
    uploads = {kind: put_through(grants[kind], body) for kind, body in bodies.items()}
    runner = arena.stack.identity.authenticate(f"Bearer {started['token']}")
    # And a report naming its log as its plan JSON, sent with those uploads
    forged = Planned(
        summary=CHANGES,
        plan_artifact_id=uploads["plan"].artifact_id,
        plan_sha256=uploads["plan"].sha256,
        plan_json_artifact_id=uploads["logs"].artifact_id,
        plan_json_sha256=uploads["logs"].sha256,
        log_artifact_id=uploads["logs"].artifact_id,
    )

    # When the result call takes them together
    with pytest.raises(ReportRefused) as refused:
        arena.runner_api.report(runner, forged, list(uploads.values()))

    # Then the run failed, naming the artifact and what it is
    why = f"artifact {uploads['logs'].artifact_id} is not this attempt's plan JSON"
    assert why in refused.value.message
    assert_failed_without_plan_evidence(arena, ws, run_id, refused.value.message)
    # And none of the call's uploads was registered
    for upload in uploads.values():
        assert not artifact_store.exists(upload.artifact_id)
    # And its session is revoked with its attempt
    with pytest.raises(Unauthenticated):
        arena.stack.identity.authenticate(f"Bearer {started['token']}")

    # When the same report is sent again (by a caller that got past authentication)
    before = arena.stack.scan()
    with pytest.raises(Conflict):
        arena.runner_api.report(runner, forged)
    # Then it is refused and writes nothing more
    assert arena.stack.scan() == before


def test_a_failed_plan_report_naming_a_foreign_log_fails_with_the_refusal(arena: Arena) -> None:
    # Given a planning run, and a log another run's plan attempt uploaded
    ws, run_id = planning(arena, "foreign-log")
    _, other = planning(arena, "foreign-log-owner")
    theirs = log_artifact(arena, other, "plan")

    # When the runner reports a failure naming that log
    with pytest.raises(ReportRefused) as refused:
        arena.orchestration.report_plan(
            run_id, plan_attempt_id(run_id), Failed(reason="boom", log_artifact_id=theirs)
        )

    # Then the run fails with the refusal, not the runner's word
    reason = f"the plan report was refused: artifact {theirs} was not uploaded by this attempt"
    assert refused.value.message == reason
    assert_failed_without_plan_evidence(arena, ws, run_id, reason)


def test_an_apply_report_naming_a_foreign_log_keeps_its_outcome_and_drops_the_log(
    arena: Arena,
) -> None:
    # Given an applying run, and the log its own plan attempt uploaded
    ws, run_id = applying(arena, "apply-foreign-log")
    plan_log = run_parts.require(run_id, "plan").body["log_artifact_id"]
    attempt = run_parts.require(run_id, "attempt#apply").body["attempt_id"]

    # When the apply runner reports its engine failed, naming that log as its own
    status = arena.orchestration.report_apply(
        run_id, attempt, Failed(reason="engine apply failed", log_artifact_id=plan_log)
    )

    # Then the outcome stands: the apply failed and the workspace is released
    assert status == "apply_failed"
    run = arena.runs.get(arena.admin, run_id)
    why = f"artifact {plan_log} was not uploaded by this attempt"
    assert run.status_reason == f"engine apply failed; the apply's log was refused: {why}"
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id is None
    # And the attempt records no log, and why
    closed = run_parts.require(run_id, "attempt#apply")
    assert closed.state == "failed"
    assert (closed.body["log_artifact_id"], closed.body["log_refused"]) == (None, why)
    assert closed.body["reason"] == "engine apply failed"


def test_an_apply_report_naming_its_own_log_records_it(arena: Arena) -> None:
    # Given an applying run whose apply runner uploaded its log
    _, run_id = applying(arena, "apply-own-log")
    log = log_artifact(arena, run_id)
    attempt = run_parts.require(run_id, "attempt#apply").body["attempt_id"]

    # When it reports its engine failed with that log
    arena.orchestration.report_apply(
        run_id, attempt, Failed(reason="engine apply failed", log_artifact_id=log)
    )

    # Then the log is the attempt's, and the reason is the runner's alone
    closed = run_parts.require(run_id, "attempt#apply").body
    assert closed["log_artifact_id"] == log
    assert "log_refused" not in closed
    assert arena.runs.get(arena.admin, run_id).status_reason == "engine apply failed"


# -- the apply start ------------------------------------------------------------------------


def approved_apply_sandbox(arena: Arena, name: str) -> tuple[str, str, str]:
    """An approved run whose apply sandbox started: its workspace, the run, and the
    apply-start handle the sandbox was launched with."""
    ws, run_id = awaiting_approval(arena, name)
    attempt = to_apply_sandbox(arena, run_id)
    handle = arena.launcher.requests[attempt["sandbox_id"]].apply_start
    assert handle is not None
    return ws, run_id, handle


def test_an_apply_start_with_another_plan_ends_the_run_and_a_replay_writes_nothing(
    arena: Arena,
) -> None:
    # Given an approved run whose apply sandbox holds its session and apply-start handle
    ws, run_id, handle = approved_apply_sandbox(arena, "start-refused")
    token = arena.runner_token(run_id, "apply")
    runner = arena.stack.identity.authenticate(f"Bearer {token}")
    approved = run_parts.require(run_id, "plan").body["plan_sha256"]
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).lock_run_id == run_id

    # When it presents a plan whose digest is not the approved plan's
    with pytest.raises(ApplyStartRefused) as refused:
        arena.runner_api.apply_start(runner, handle, {"plan_sha256": "0" * 64})

    # Then the start is refused, saying why, and the run ended apply_failed with it
    reason = (
        "the apply start was refused: the runner's plan (sha256 000000000000...) is not "
        f"the approved plan (sha256 {approved[:12]}...)"
    )
    assert (refused.value.http_status, refused.value.to_body()) == (
        409,
        {
            "code": "APPLY_START_REFUSED",
            "message": reason,
            "run_id": run_id,
            "status": "apply_failed",
        },
    )
    run = arena.runs.get(arena.admin, run_id)
    assert (run.status, run.status_reason) == (RunStatus.APPLY_FAILED, reason)
    assert arena.stack.lifecycle.runs.audit_trail(run_id)[-1].type == "run.apply_refused"
    # And its attempt closed failed, its apply record left starting, nothing ran
    attempt = run_parts.require(run_id, "attempt#apply")
    assert (attempt.state, attempt.body["reason"]) == ("failed", reason)
    record = run_parts.require(run_id, "apply")
    assert (record.state, record.body["reason"], record.body["run_status"]) == (
        "failed",
        reason,
        "apply_failed",
    )
    # And the workspace's writer reservation and lock are released
    workspace = workspace_store.get_workspace(ws, reads=IdentityMap())
    assert (workspace.writer_run_id, workspace.lock_id) == (None, None)
    # And the workflow's wait for the apply ended
    assert "token-apply" in arena.workflow.resumed
    # And the session died with its attempt
    with pytest.raises(Unauthenticated):
        arena.stack.identity.authenticate(f"Bearer {token}")

    # When the same start is presented again (by a caller past authentication)
    before = arena.stack.scan()
    with pytest.raises(ApplyStartRefused) as again:
        arena.runner_api.apply_start(runner, handle, {"plan_sha256": "0" * 64})
    # Then it is refused again and nothing more is written
    assert again.value.status == "apply_failed"
    assert arena.stack.scan() == before
    # And the capability, redeemed by the refusal, gives the refusal to an identical
    # redemption, never a start
    binding = Binding(run_id, runner.attempt_id or "", Phase.APPLY, runner.sandbox_id or "")
    with pytest.raises(ApplyStartRefused), arena.stack.units() as uow:
        arena.stack.capabilities.redeem_apply_start(
            uow, handle, binding, {"plan_sha256": "0" * 64}, {"lock_id": "x", "fence": "1"}
        )
    assert arena.stack.scan() == before


def test_an_apply_start_refused_for_another_attempt_or_handle_writes_nothing(
    arena: Arena,
) -> None:
    # Given an approved run whose apply sandbox holds its session and apply-start handle
    _, run_id, handle = approved_apply_sandbox(arena, "start-not-owner")
    runner = arena.runner(run_id, "apply")
    other = dataclasses.replace(runner, attempt_id=arena.stack.ids.new(IdKind.ATTEMPT))
    before = arena.stack.scan()

    # When a session of another attempt presents a wrong plan
    with pytest.raises(RunnerAuthorityRefused):
        arena.runner_api.apply_start(other, handle, {"plan_sha256": "0" * 64})
    # And the sandbox's own session does so with a handle that is not the capability
    with pytest.raises(UnknownCapability):
        arena.runner_api.apply_start(runner, "aps_" + "0" * 43, {"plan_sha256": "0" * 64})

    # Then nothing at all was written: the run still awaits its start
    assert arena.stack.scan() == before
    # And the real start, with the approved plan, still succeeds
    approved = run_parts.require(run_id, "plan").body["plan_sha256"]
    arena.runner_api.apply_start(runner, handle, {"plan_sha256": approved})
    assert arena.runs.get(arena.admin, run_id).status is RunStatus.APPLYING


def test_an_apply_start_whose_approval_and_plan_disagree_ends_the_run(arena: Arena) -> None:
    # Given an approved run whose approval binds another plan digest than its evidence
    _, run_id, handle = approved_apply_sandbox(arena, "start-inconsistent")
    approval = run_parts.require(run_id, "approval")
    binding = {**approval.body["binding"], "plan_sha256": "e" * 64}
    run_parts.change(
        run_id,
        "approval",
        expected_state=approval.state,
        body={**approval.body, "binding": binding},
        now=arena.stack.clock.now(),
    ).commit()
    runner = arena.runner(run_id, "apply")
    evidence = run_parts.require(run_id, "plan").body["plan_sha256"]

    # When the sandbox presents the plan the evidence records
    with pytest.raises(ApplyStartRefused) as refused:
        arena.runner_api.apply_start(runner, handle, {"plan_sha256": evidence})

    # Then the start is refused and the run ends, saying the two disagree
    assert "the approval is bound to plan sha256 eeeeeeeeeeee..." in refused.value.message
    assert arena.runs.get(arena.admin, run_id).status is RunStatus.APPLY_FAILED


def test_an_uploaded_object_is_attributed_to_the_attempt_that_registered_it(
    arena: Arena,
) -> None:
    # Given a planning run's runner that uploaded and registered its log
    _, run_id = planning(arena, "attributed")
    log = log_artifact(arena, run_id, "plan")

    # Then the record names the attempt (and session) that registered it
    record = artifact_store.get(log, reads=IdentityMap())
    assert record.attempt_id == plan_attempt_id(run_id)
    assert record.session_id is not None
    # And an artifact the control plane stored names none
    configuration = run_parts.require(run_id, "input").body["configuration_artifact_id"]
    assert artifact_store.get(configuration, reads=IdentityMap()).attempt_id is None
