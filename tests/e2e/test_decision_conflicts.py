"""A decision that comes after another one is a 409 naming the run's status, over HTTP."""

from __future__ import annotations

import pytest

from runplane.client import ApiError
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, new_workspace


def test_rejecting_an_approved_run_is_a_conflict_that_names_its_status(local: Local) -> None:
    # Given a run awaiting approval, approved by one reviewer
    run = local.client.create_run(new_workspace(local, "decided"), HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    local.client.decide(run["id"], "approve")

    # When another reviewer rejects it
    with pytest.raises(ApiError) as refused:
        local.client.decide(run["id"], "reject")

    # Then the rejection is a 409 that says the run was decided, and how it stands
    assert refused.value.status == 409
    body = refused.value.body
    assert body["code"] == "ALREADY_DECIDED"
    assert body["run_id"] == run["id"]
    assert body["approval"] == "approved"
    assert body["status"] in {"awaiting_approval", "applying", "succeeded"}
    assert body["status"] in body["message"]
    # And the approval stands: the run is applied
    done = local.client.watch(run["id"], timeout=120)
    assert done["status"] == "succeeded"
    assert done["approval"]["status"] == "approved"
    # And cancelling the finished run is the same kind of answer
    with pytest.raises(ApiError) as late:
        local.client.cancel(run["id"])
    assert late.value.status == 409
    assert late.value.body["code"] == "ALREADY_DECIDED"
    assert late.value.body["status"] == "succeeded"
