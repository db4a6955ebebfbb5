"""Variable values with control characters, refused through the run API's HTTP entry
point before anything is written (a run's and a workspace's variables alike)."""

from __future__ import annotations

import json

import pytest

from runplane.client import ApiError
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import new_workspace
from tests.e2e.test_runner_refusals import PLAIN, files, start_plan


def test_a_run_variable_with_a_nul_is_refused_and_no_run_is_created(local: Local) -> None:
    # Given an uploaded configuration
    ws = new_workspace(local, "var-nul")

    # When a run is created with a value holding a NUL
    with pytest.raises(ApiError) as refused:
        start_plan(local, ws, files({"main.tf": PLAIN}), {"token": "secret-7\x00tail"})

    # Then it is a 422 pointing at the variable, naming no value, and no run exists
    assert refused.value.status == 422
    body = refused.value.body
    assert (body["code"], body["pointer"]) == ("INVALID_INPUT", "/variables/token")
    assert "U+0000" in body["message"]
    assert "secret-7" not in json.dumps(body)
    assert local.client._call("GET", f"/api/v1/workspaces/{ws}/runs")["runs"] == []


def test_a_workspace_variable_with_a_carriage_return_is_refused_and_not_stored(
    local: Local,
) -> None:
    ws = new_workspace(local, "wsvar-cr")
    local.client.set_variable(ws, "region", "eu-west-1\n\tsecond line")

    with pytest.raises(ApiError) as refused:
        local.client.set_variable(ws, "token", "secret-8\r\n", sensitive=True)

    assert refused.value.status == 422
    body = refused.value.body
    assert (body["code"], body["pointer"]) == ("INVALID_INPUT", "/value")
    assert "U+000D" in body["message"]
    assert "secret-8" not in json.dumps(body)
    stored = local.client.list_variables(ws)
    assert [(v["name"], v["value"]) for v in stored] == [("region", "eu-west-1\n\tsecond line")]
