"""The runner report contract: each variant survives the wire, and anything else is
refused with a pointer to the field at fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runplane.domain.capabilities import Phase
from runplane.domain.errors import InvalidInput
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.runner_reports import (
    Applied,
    CredentialsRequired,
    Failed,
    Interrupted,
    Planned,
    RunnerReport,
    check_phase,
    from_wire,
)

PLANNED = Planned(
    summary=PlanSummary(
        adds=1, destroys=1, replaces=1, output_changes={"ip": "update"}, has_changes=True
    ),
    plan_artifact_id="art-plan",
    plan_sha256="a" * 64,
    plan_json_artifact_id="art-json",
    plan_json_sha256="b" * 64,
    log_artifact_id="art-log",
    engine_version="1.0.3",
    engine_seconds=2.5,
)
REFRESHED = Planned(
    summary=PlanSummary(drifted=2, has_changes=True),
    plan_artifact_id="art-plan",
    plan_sha256="a" * 64,
    plan_json_artifact_id="art-json",
    plan_json_sha256="b" * 64,
    log_artifact_id="art-log",
)
VARIANTS: list[RunnerReport] = [
    PLANNED,
    REFRESHED,
    Applied(log_artifact_id="art-log", engine_seconds=0.0),
    Failed(reason="engine plan failed:\nError: boom", log_artifact_id="art-log"),
    Failed(reason="the runner failed (OSError); see the run's log"),
    CredentialsRequired(reason="engine plan failed", log_artifact_id="art-log", engine_seconds=1),
    Interrupted(
        reason="the engine was killed by signal 9 (SIGKILL) during apply",
        log_artifact_id="art-log",
        engine_seconds=3.5,
    ),
    Interrupted(reason="the engine was killed by signal 15 (SIGTERM) during apply"),
]


@pytest.mark.parametrize("report", VARIANTS, ids=lambda r: type(r).__name__)
def test_every_variant_survives_the_wire(report: RunnerReport) -> None:
    # Given a report as the runner builds it
    # When it is sent as JSON and read back
    wire = json.loads(json.dumps(report.to_wire()))
    read = from_wire(wire)

    # Then it is the same report, and its wire form names its outcome
    assert read == report
    assert type(read) is type(report)
    assert wire["outcome"] == report.OUTCOME


def test_the_wire_form_is_what_the_runner_always_sent() -> None:
    # Given a planned report (the wire is shared with runners already deployed)
    # When it is written
    wire = PLANNED.to_wire()

    # Then it has the same fields as before the contract was typed
    assert wire == {
        "outcome": "planned",
        "has_changes": True,
        "summary": {
            "adds": 1,
            "changes": 0,
            "destroys": 1,
            "replaces": 1,
            "output_changes": {"ip": "update"},
            "has_changes": True,
        },
        "plan_artifact_id": "art-plan",
        "plan_sha256": "a" * 64,
        "plan_json_artifact_id": "art-json",
        "plan_json_sha256": "b" * 64,
        "engine_version": "1.0.3",
        "log_artifact_id": "art-log",
        "engine_seconds": 2.5,
    }


def planned_wire(**changes: Any) -> dict[str, Any]:
    wire = PLANNED.to_wire()
    for key, value in changes.items():
        if value is DROP:
            wire.pop(key)
        else:
            wire[key] = value
    return wire


def summary_wire(**changes: Any) -> dict[str, Any]:
    summary: dict[str, Any] = PLANNED.summary.as_dict()
    summary.update(changes)
    return planned_wire(summary=summary)


DROP = object()
APPLIED = {"outcome": "applied", "log_artifact_id": "l"}
MALFORMED: list[tuple[str, object, str]] = [
    ("not an object", ["planned"], "/"),
    ("no outcome", {"reason": "x"}, "/outcome"),
    ("unknown outcome", {"outcome": "errored", "reason": "x"}, "/outcome"),
    ("outcome not a string", {"outcome": 1}, "/outcome"),
    ("failure without reason", {"outcome": "failed"}, "/reason"),
    ("empty reason", {"outcome": "failed", "reason": ""}, "/reason"),
    ("reason too long", {"outcome": "failed", "reason": "x" * 2001}, "/reason"),
    ("reason not a string", {"outcome": "credentials_required", "reason": 7}, "/reason"),
    ("interruption without reason", {"outcome": "interrupted"}, "/reason"),
    ("applied without log", {"outcome": "applied"}, "/log_artifact_id"),
    ("negative seconds", {**APPLIED, "engine_seconds": -1}, "/engine_seconds"),
    ("seconds as text", {**APPLIED, "engine_seconds": "2"}, "/engine_seconds"),
    ("seconds as bool", {**APPLIED, "engine_seconds": True}, "/engine_seconds"),
    ("unknown field", {**APPLIED, "has_change": True}, "/has_change"),
    (
        "field for another outcome",
        {"outcome": "failed", "reason": "x", "plan_sha256": "a" * 64},
        "/plan_sha256",
    ),
    ("planned without plan", planned_wire(plan_artifact_id=DROP), "/plan_artifact_id"),
    ("planned without summary", planned_wire(summary=DROP), "/summary"),
    ("planned with null summary", planned_wire(summary=None), "/summary"),
    ("summary not an object", planned_wire(summary=[1]), "/summary"),
    ("plan digest not hex", planned_wire(plan_sha256="A" * 64), "/plan_sha256"),
    ("plan json digest short", planned_wire(plan_json_sha256="b" * 63), "/plan_json_sha256"),
    ("has_changes as text", planned_wire(has_changes="true"), "/has_changes"),
    ("has_changes contradicts summary", planned_wire(has_changes=False), "/has_changes"),
    ("count missing", summary_wire(replaces=None), "/summary/replaces"),
    ("count negative", summary_wire(adds=-1), "/summary/adds"),
    ("count as float", summary_wire(changes=1.0), "/summary/changes"),
    ("count as bool", summary_wire(destroys=True), "/summary/destroys"),
    (
        "unknown output action",
        summary_wire(output_changes={"ip": "replace"}),
        "/summary/output_changes/ip",
    ),
    (
        "pointer escapes output names",
        summary_wire(output_changes={"a/b~": 1}),
        "/summary/output_changes/a~1b~0",
    ),
    ("unknown summary field", summary_wire(add=1), "/summary/add"),
    ("drift as text", summary_wire(drifted="2"), "/summary/drifted"),
    ("engine version not a string", planned_wire(engine_version=103), "/engine_version"),
]


@pytest.mark.parametrize(
    ("body", "pointer"),
    [(body, pointer) for _, body, pointer in MALFORMED],
    ids=[name for name, _, _ in MALFORMED],
)
def test_a_malformed_report_is_refused_with_a_pointer(body: object, pointer: str) -> None:
    # Given a report that breaks the contract
    # When it is read
    with pytest.raises(InvalidInput) as refused:
        from_wire(body)

    # Then it is refused as invalid input naming the field at fault
    assert refused.value.http_status == 422
    assert refused.value.pointer == pointer


@pytest.mark.parametrize(
    ("report", "phase"),
    [
        (PLANNED, Phase.APPLY),
        (Applied(log_artifact_id="l"), Phase.PLAN),
        (Interrupted(reason="killed"), Phase.PLAN),
    ],
    ids=["planned-by-apply", "applied-by-plan", "interrupted-by-plan"],
)
def test_a_session_reports_only_its_own_phase(report: RunnerReport, phase: Phase) -> None:
    # Given a report of the other phase's success
    # When a session of this phase makes it
    with pytest.raises(InvalidInput) as refused:
        check_phase(report, phase)

    # Then it is refused at the outcome
    assert refused.value.pointer == "/outcome"


@pytest.mark.parametrize("phase", list(Phase))
def test_either_phase_may_fail(phase: Phase) -> None:
    # Given failures of both kinds, Then either phase may report them
    check_phase(Failed(reason="x"), phase)
    check_phase(CredentialsRequired(reason="x"), phase)


def test_an_interrupted_apply_has_its_own_outcome_on_the_wire() -> None:
    # Given an apply whose engine a signal ended
    report = Interrupted(reason="the engine was killed by signal 9 (SIGKILL) during apply")

    # When it is written, Then it is not a plain failure: its outcome says interrupted
    assert report.to_wire() == {
        "outcome": "interrupted",
        "reason": "the engine was killed by signal 9 (SIGKILL) during apply",
    }
    # And only an apply session may report it
    check_phase(report, Phase.APPLY)
