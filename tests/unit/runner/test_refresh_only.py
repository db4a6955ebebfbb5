"""What a refresh-only plan reports: the resources the refresh found changed."""

from __future__ import annotations

from typing import Any

from runplane.domain.plan_summary import drifted_resources


def _drift(*actions: list[str]) -> dict[str, Any]:
    return {
        "format_version": "0.2",
        "resource_drift": [
            {"address": f"test_thing.t{i}", "change": {"actions": a}} for i, a in enumerate(actions)
        ],
        "resource_changes": [],
    }


def test_changed_resources_count_as_drift() -> None:
    # Given a refresh that found one resource updated and one deleted outside the engine
    plan = _drift(["update"], ["delete"], ["no-op"])
    # Then two resources drifted
    assert drifted_resources(plan) == 2


def test_a_plan_without_drift_reports_none() -> None:
    # Given plans with no drift, an empty drift list, or a malformed one
    for plan in ({"format_version": "0.2"}, _drift(), {"resource_drift": "x"}, _drift(["read"])):
        # Then nothing drifted
        assert drifted_resources(plan) == 0
