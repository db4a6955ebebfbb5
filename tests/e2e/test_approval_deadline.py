"""The approval deadline is persisted; when the wait times out, the database decides."""

from __future__ import annotations

import pytest

from runplane.client import ApiError
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, new_workspace, stages, writer_of


def test_no_decision_before_the_deadline_expires_the_run_and_frees_the_workspace(
    local: Local,
) -> None:
    # Given a workspace whose plans wait 3 seconds for a decision, with a run queued behind
    ws = new_workspace(local, "deadline")
    local.client.set_approval_window(ws, 3)
    first = local.client.create_run(ws, HELLO)
    local.client.watch(first["id"], until=["awaiting_approval"], timeout=120)
    second = local.client.create_run(ws, HELLO, variables={"greeting": "after"})

    # When nobody decides in time
    expired = local.client.watch(first["id"], timeout=60)

    # Then the database expired it, closing approval and releasing the workspace
    assert expired["status"] == "expired"
    assert expired["status_reason"] == "APPROVAL_EXPIRED"
    assert expired["approval"]["status"] == "expired"
    assert stages(expired)["approval"] == "failed"
    assert stages(expired)["apply"] == "skipped"
    # And a late decision is refused: a new run is needed
    with pytest.raises(ApiError) as late:
        local.client.decide(first["id"], "approve")
    assert late.value.status == 409
    assert late.value.body["code"] == "APPROVAL_EXPIRED"
    # And the next run got the workspace
    waiting = local.client.watch(second["id"], until=["awaiting_approval"], timeout=120)
    assert waiting["status"] == "awaiting_approval"
    assert writer_of(ws)[0] == second["id"]
    local.client.cancel(second["id"])


def test_the_approval_window_has_bounds(local: Local) -> None:
    ws = new_workspace(local, "bounds")
    for seconds in (0, 31 * 24 * 3600):
        with pytest.raises(ApiError) as refused:
            local.client.set_approval_window(ws, seconds)
        assert refused.value.status == 422
    assert local.client.set_approval_window(ws, 3600)["approval_window_seconds"] == 3600


def test_the_approval_window_is_a_json_integer(local: Local) -> None:
    # Given a workspace with a window of an hour
    ws = new_workspace(local, "window-type")
    local.client.set_approval_window(ws, 3600)
    for value in (True, "120", 90.5):
        # When the window is set to a boolean, a string or a fraction
        body = {"approval_window_seconds": value}
        with pytest.raises(ApiError) as refused:
            local.client._call("PATCH", f"/api/v1/workspaces/{ws}", body)
        # Then it is refused with the field named, and the window is unchanged
        assert refused.value.status == 422, value
        assert refused.value.body["pointer"] == "/approval_window_seconds"
        assert local.client.workspace(ws)["approval_window_seconds"] == 3600


def test_a_decision_binds_the_plan_the_person_reviewed(local: Local) -> None:
    # Given a run awaiting approval, whose review shows what a decision binds
    ws = new_workspace(local, "binding")
    run = local.client.create_run(ws, HELLO)
    review = local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    binding = review["approval"]["binding"]
    assert binding["plan_sha256"] == review["plan"]["plan_sha256"]

    # When someone approves a different plan than the one awaiting
    with pytest.raises(ApiError) as refused:
        local.client.decide(run["id"], "approve", plan_sha256="0" * 64)

    # Then it is refused and nothing is decided; approving the reviewed plan works
    assert refused.value.status == 409
    assert local.client.review(run["id"])["approval"]["status"] == "waiting"
    local.client.decide(run["id"], "approve", plan_sha256=binding["plan_sha256"])
    assert local.client.watch(run["id"], timeout=120)["status"] == "succeeded"
