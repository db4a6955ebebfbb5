"""Deleting a workspace end to end over real HTTP on the embedded stack: a workspace
whose applied run created a resource is refused (the run API, the CLI and the Cloud
API's deletions alike), a destroy run planned and applied by the real engine empties
it, and then ``runplane workspace delete`` deletes it: its name is free, it answers
404, and the deletion is audited."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import requests

from runplane.store import audit
from runplane.store.run_reader import DynamoRunReader
from tests.e2e.conftest import Local
from tests.e2e.test_cli import Capture, cli, cli_json, connect, one_error_line, workspace
from tests.e2e.test_native_remote_runs import tfe
from tests.e2e.test_run_options import applied, configuration, managed

pytestmark = pytest.mark.e2e


def _delete(local: Local, ws_id: str, body: dict[str, Any] | None = None) -> Any:
    return requests.delete(
        f"{local.url}/api/v1/workspaces/{ws_id}",
        headers={"Authorization": f"Bearer {local.admin_token}"},
        json=body,
        timeout=30,
    )


def _trail(local: Local, ws_id: str) -> list[Any]:
    services = local.stack.services
    assert services is not None
    org_id = services.workspaces.organization_id_of(local.organization)
    return [e for e in audit.organization_trail(org_id) if e.subject_id == ws_id]


def test_a_workspace_is_deleted_only_once_a_destroy_run_emptied_it(
    local: Local, capsys: Capture, tmp_path: Path
) -> None:
    # Given a workspace whose applied run created test_thing.a
    ws_id, name = workspace(local, capsys, "delete")
    directory = configuration(tmp_path, "a")
    applied(local, capsys, ws_id, directory)
    assert managed(local, ws_id) == ["test_thing.a"]

    # When it is deleted through the run API, the CLI and both Cloud API deletions
    refused = _delete(local, ws_id)
    code, _, err = cli(capsys, "workspace", "delete", name, "--yes", *connect(local))
    org = local.organization
    by_name = tfe(local, "DELETE", f"/organizations/{org}/workspaces/{name}")
    safe = tfe(local, "POST", f"/workspaces/{ws_id}/actions/safe-delete")

    # Then each is a 409 naming the resource and both ways out, and nothing changed
    assert refused.status_code == 409
    assert refused.json()["code"] == "WORKSPACE_NOT_EMPTY"
    assert "still manages 1 resource" in refused.json()["message"]
    assert code == 2
    line = one_error_line(err)
    assert "HTTP 409 WORKSPACE_NOT_EMPTY" in line
    assert f"runplane workspace delete {name} --force --reason TEXT" in line
    for reply in (by_name, safe):
        assert reply.status_code == 409
        [error] = reply.json()["errors"]
        assert "--destroy" in error["detail"]
        assert "--force --reason" in error["detail"]
    # And a forced deletion without a reason is a 422 at /reason
    forced = _delete(local, ws_id, {"force": True})
    assert (forced.status_code, forced.json()["pointer"]) == (422, "/reason")
    assert cli_json(capsys, "workspace", "show", name, *connect(local))["id"] == ws_id
    assert [e for e in _trail(local, ws_id) if e.type == "workspace.deleted"] == []

    # When a destroy run is approved and applied
    destroyed = applied(local, capsys, ws_id, directory, "--destroy")
    assert destroyed["plan"]["summary"]["destroys"] == 1
    assert managed(local, ws_id) == []

    # And the workspace is deleted with the CLI, confirmed by typing its name
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(f"{name}\n"))
        code, out, err = cli(capsys, "workspace", "delete", name, *connect(local))

    # Then it is deleted, with nothing left unmanaged
    assert code == 0, err
    assert out.strip() == f"{ws_id}  {name}  deleted"
    # And it answers 404 by ID and by name, and is in no list
    assert (
        requests.get(
            f"{local.url}/api/v1/workspaces/{ws_id}",
            headers={"Authorization": f"Bearer {local.admin_token}"},
            timeout=30,
        ).status_code
        == 404
    )
    assert tfe(local, "GET", f"/organizations/{org}/workspaces/{name}").status_code == 404
    listed = cli_json(capsys, "workspace", "list", *connect(local))
    assert ws_id not in [w["id"] for w in listed]
    # And the deletion was audited, its runs kept
    [event] = [e for e in _trail(local, ws_id) if e.type == "workspace.deleted"]
    assert (event.details["force"], event.details["resources"]) == ("false", "0")
    services = local.stack.services
    assert services is not None
    assert len(DynamoRunReader(services.run_records).runs_of_workspace(ws_id)) == 2
    # And its name can be taken again
    again = cli_json(capsys, "workspace", "create", name, *connect(local))
    assert again["id"] != ws_id


def test_the_run_api_deletes_an_empty_workspace_and_the_cli_asks_for_its_name(
    local: Local, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two workspaces that never had state
    first, _ = workspace(local, capsys, "delete-api")
    second, name = workspace(local, capsys, "delete-ask")

    # When the first is deleted through the run API, with a reason and no force
    reply = _delete(local, first, {"reason": "made by mistake"})
    # Then it is deleted, unforced, nothing left managed
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["id"], body["deleted"], body["forced"], body["resources"]) == (
        first,
        True,
        False,
        0,
    )
    [event] = [e for e in _trail(local, first) if e.type == "workspace.deleted"]
    assert event.details["reason"] == "made by mistake"
    # And a second deletion finds nothing
    assert _delete(local, first).status_code == 404

    # When the CLI deletes the second and another name is typed
    monkeypatch.setattr("sys.stdin", io.StringIO("something-else\n"))
    code, _, err = cli(capsys, "workspace", "delete", name, *connect(local))
    # Then nothing was deleted
    assert code == 3
    prompt, refusal = err.splitlines()
    assert prompt == f"type the workspace's name ({name}) to delete it: "
    assert refusal.startswith("error: not deleted: the name typed was not")
    assert cli_json(capsys, "workspace", "show", second, *connect(local))["name"] == name
    # And an unknown field is refused
    assert _delete(local, second, {"forse": True}).status_code == 422
