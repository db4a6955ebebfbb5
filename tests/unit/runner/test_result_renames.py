"""A result re-sent after its uploads went up afresh names the IDs they were stored under."""

from __future__ import annotations

from runplane.domain.runner_reports import Applied, Failed
from runplane.runner.main import _renamed
from tests.unit.domain.test_runner_reports import PLANNED


def test_a_plan_names_each_artifact_by_the_id_it_was_stored_under() -> None:
    # Given a plan's report, and its JSON and log stored afresh under new IDs
    stored = {"art-json": "art-json-2", "art-log": "art-log-2"}

    # When it is renamed
    renamed = _renamed(PLANNED, stored)

    # Then those two are renamed and everything else is as it was
    assert renamed.plan_json_artifact_id == "art-json-2"  # type: ignore[union-attr]
    assert renamed.log_artifact_id == "art-log-2"
    assert renamed.plan_artifact_id == "art-plan"  # type: ignore[union-attr]
    assert renamed.summary == PLANNED.summary  # type: ignore[union-attr]


def test_a_failure_without_a_log_and_an_apply_rename_what_they_name() -> None:
    # Given a failure that names no log, and an apply whose log went up afresh
    # When each is renamed / Then only a named artifact changes
    assert _renamed(Failed(reason="x"), {"art-log": "art-2"}) == Failed(reason="x")
    applied = _renamed(Applied(log_artifact_id="art-log", engine_seconds=1.0), {"art-log": "a2"})
    assert applied == Applied(log_artifact_id="a2", engine_seconds=1.0)
