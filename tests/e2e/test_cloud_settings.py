"""Workspace cloud settings end to end: ``runplane workspace cloud`` against the embedded
stack over real HTTP (show, set, clear; refusals that change nothing; who may change
them; another organization), the run API's answers, the credential decisions each run
pins as ``runplane run show`` shows them (unchanged for an older run after a change),
and the dashboard's pages, with the external ID nowhere."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
import requests

from runplane.domain.identity import ROLES
from runplane.store import audit
from tests.e2e.conftest import Local
from tests.e2e.test_cli import Capture, cli, cli_json, connect, one_error_line, workspace
from tests.e2e.test_dashboard import signed_in
from tests.e2e.test_managed_runs import HELLO

PLAN = "arn:aws:iam::123456789012:role/runplane-plan"
APPLY = "arn:aws:iam::123456789012:role/deploy/runplane-apply"
OTHER = "arn:aws:iam::123456789012:role/runplane-other"
SECRET = "ext-id-4e71b0d9aa"
GCP = "//iam.googleapis.com/projects/42/locations/global/workloadIdentityPools/ci/providers/rp"
GUID_A = "11111111-2222-3333-4444-555555555555"
GUID_B = "66666666-7777-8888-9999-000000000000"


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def _set(capsys: Capture, local: Local, ws: str, *flags: str) -> dict[str, Any]:
    return dict(cli_json(capsys, "workspace", "cloud", ws, "set", *flags, *connect(local)))


def _show(capsys: Capture, local: Local, ws: str) -> dict[str, Any]:
    return dict(cli_json(capsys, "workspace", "cloud", ws, *connect(local)))


def _api(local: Local, method: str, ws: str, token: str | None = None, **body: Any) -> Any:
    return requests.request(
        method,
        f"{local.url}/api/v1/workspaces/{ws}/cloud-settings",
        headers={"Authorization": f"Bearer {token or local.admin_token}"},
        json=body if method == "PUT" else None,
        timeout=30,
    )


def _trail(local: Local, ws_id: str) -> list[Any]:
    services = local.stack.services
    assert services is not None
    org_id = services.workspaces.organization_id_of(local.organization)
    return [e for e in audit.organization_trail(org_id) if e.subject_id == ws_id]


def test_set_show_and_clear_through_the_cli_never_show_the_external_id(
    local: Local,
    capsys: Capture,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="runplane")
    # Given a workspace with no cloud settings
    ws_id, name = workspace(local, capsys, "cloud")
    code, text, _ = cli(capsys, "workspace", "cloud", name, *connect(local))
    assert code == 0
    assert text.splitlines()[:3] == [
        f"{ws_id}  cloud settings  version 0",
        "  aws               none",
        "  gcp audience      none",
    ]

    # When the AWS roles are set by name, the external ID from stdin
    _stdin(monkeypatch, SECRET + "\n")
    code, text, err = cli(
        capsys,
        "workspace",
        "cloud",
        name,
        "set",
        "--aws-plan-role",
        PLAN,
        "--aws-apply-role",
        APPLY,
        "--aws-external-id-stdin",
        "--aws-session-duration",
        "2h",
        *connect(local),
    )
    # Then the text shows them, and the external ID only as set
    assert code == 0, err
    assert f"  aws plan role     {PLAN}" in text
    assert f"  aws apply role    {APPLY}" in text
    assert "  aws external ID   set" in text
    assert "  aws session       7200 s" in text
    assert "  aws region        deployment region" in text
    assert SECRET not in text + err

    # When more is set by ID (GCP and Azure), changing only what the flags name
    shown = _set(
        capsys,
        local,
        ws_id,
        "--gcp-audience",
        GCP,
        "--azure-client-id",
        GUID_A,
        "--azure-tenant-id",
        GUID_B.upper(),
        "--aws-region",
        "eu-west-3",
    )
    # Then the AWS settings and the external ID were kept, at the next version
    assert shown == {
        "workspace_id": ws_id,
        "aws_plan_role_arn": PLAN,
        "aws_apply_role_arn": APPLY,
        "aws_external_id_set": True,
        "aws_session_duration": 7200,
        "aws_region": "eu-west-3",
        "gcp_audience": GCP,
        "azure_audience": "api://AzureADTokenExchange",
        "azure_client_id": GUID_A,
        "azure_tenant_id": GUID_B,
        "version": 2,
        "updated_at": shown["updated_at"],
        "updated_by": shown["updated_by"],
    }
    assert _show(capsys, local, name) == shown
    # And an empty value unsets a setting
    assert _set(capsys, local, name, "--aws-apply-role", "")["aws_apply_role_arn"] is None

    # When they are cleared
    code, text, _ = cli(capsys, "workspace", "cloud", name, "clear", *connect(local))
    # Then none is left, at the next version
    assert code == 0
    assert text.splitlines()[:2] == [
        f"{ws_id}  cloud settings  version 4",
        "  aws               none",
    ]
    cleared = _show(capsys, local, name)
    assert (cleared["aws_plan_role_arn"], cleared["aws_external_id_set"]) == (None, False)
    # And every change was audited, naming what changed and never the external ID
    events = _trail(local, ws_id)
    assert [e.type for e in events] == [
        "workspace.cloud_settings_set",
        "workspace.cloud_settings_set",
        "workspace.cloud_settings_set",
        "workspace.cloud_settings_cleared",
    ]
    assert events[0].details["changed"] == (
        "aws_plan_role_arn,aws_apply_role_arn,aws_external_id,aws_session_duration"
    )
    assert SECRET not in json.dumps([e.details for e in events])
    # And no log line of the stack (in this process) holds it
    assert caplog.records
    assert SECRET not in caplog.text


def test_refused_settings_are_one_error_line_and_change_nothing(
    local: Local, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace with a plan role
    ws_id, name = workspace(local, capsys, "cloud-bad")
    before = _set(capsys, local, name, "--aws-plan-role", PLAN)
    # When a malformed role, a role of another partition, a session out of STS's range,
    # an external ID of characters STS refuses, an apply role with the plan role unset,
    # or a local mistake is asked for
    refusals = [
        (["--aws-apply-role", "arn:aws:iam::123:role/x"], "/aws_apply_role_arn", 2),
        (["--aws-plan-role", "arn:aws-cn:iam::123456789012:role/x"], "/aws_plan_role_arn", 2),
        (["--aws-session-duration", "14h"], "/aws_session_duration", 2),
        (["--aws-region", "cn-north-1"], "/aws_region", 2),
        (["--aws-plan-role", "", "--aws-apply-role", APPLY], "/aws_plan_role_arn", 2),
        (["--aws-session-duration", "soon"], None, 3),
        ([], None, 3),
    ]
    for flags, pointer, exit_code in refusals:
        code, _, err = cli(capsys, "workspace", "cloud", name, "set", *flags, *connect(local))
        # Then each is its exit code and one line (the API's names its code)
        assert code == exit_code, (flags, err)
        line = one_error_line(err)
        if pointer is not None:
            assert "HTTP 422 INVALID_INPUT" in line
    _stdin(monkeypatch, "has spaces " + SECRET)
    code, _, err = cli(
        capsys, "workspace", "cloud", name, "set", "--aws-external-id-stdin", *connect(local)
    )
    assert code == 2
    assert SECRET not in err
    assert "aws_external_id must be" in one_error_line(err)
    # A set flag with show or clear is a local mistake
    code, _, err = cli(capsys, "workspace", "cloud", name, "clear", "--aws-region", "x")
    assert code == 3
    assert "is for `runplane workspace cloud WORKSPACE set`" in one_error_line(err)
    # And nothing changed
    assert _show(capsys, local, name) == before
    assert len(_trail(local, ws_id)) == 1


def test_the_api_refuses_bad_bodies_with_a_pointer_and_stale_versions_with_409(
    local: Local, capsys: Capture
) -> None:
    ws_id, _ = workspace(local, capsys, "cloud-api")
    # A body with a field the API does not know (a misspelt setting) is refused, not
    # taken for an unset one
    answer = _api(local, "PUT", ws_id, aws_plan_role=PLAN)
    assert (answer.status_code, answer.json()["pointer"]) == (422, "/aws_plan_role")
    # A rule of the settings names its field
    answer = _api(local, "PUT", ws_id, aws_plan_role_arn=PLAN, aws_session_duration=60)
    assert answer.status_code == 422
    assert answer.json()["pointer"] == "/aws_session_duration"
    # A change at the version read goes through once; a second at that version is a 409
    made = _api(local, "PUT", ws_id, aws_plan_role_arn=PLAN, aws_external_id=SECRET, version=0)
    assert made.status_code == 200, made.text
    assert made.json()["version"] == 1
    assert SECRET not in made.text
    stale = _api(local, "PUT", ws_id, aws_plan_role_arn=OTHER, version=0)
    assert (stale.status_code, stale.json()["code"]) == (409, "CONCURRENT_CHANGE")
    read = _api(local, "GET", ws_id)
    assert read.json()["aws_plan_role_arn"] == PLAN
    assert read.json()["aws_external_id_set"] is True
    assert SECRET not in read.text


def test_only_admins_change_them_and_another_organization_finds_no_workspace(
    local: Local, capsys: Capture
) -> None:
    # Given a workspace with settings
    ws_id, name = workspace(local, capsys, "cloud-who")
    before = _set(capsys, local, name, "--aws-plan-role", PLAN)
    # When an operator (every permission but the admin's) reads them, then sets them
    operator = local.token(ROLES["operator"], "operator")
    assert _show_as(capsys, local, name, operator) == before
    code, _, err = cli(
        capsys,
        "workspace",
        "cloud",
        name,
        "set",
        "--aws-plan-role",
        OTHER,
        *connect(local, operator),
    )
    # Then the change is a 403 naming the permission (exit 2)
    assert code == 2
    assert "credentials:manage" in one_error_line(err)
    assert "HTTP 403" in err
    # When another organization's admin asks for them by ID, or clears them
    other, token = local.other_organization("cloud-other")
    for action in ([], ["clear"]):
        code, _, err = cli(
            capsys, "workspace", "cloud", ws_id, *action, *connect(local, token, other)
        )
        # Then the workspace is not found, as an unknown one
        assert code == 2
        assert "HTTP 404 NOT_FOUND" in one_error_line(err)
    assert _api(local, "PUT", ws_id, token, aws_plan_role_arn=OTHER).status_code == 404
    # And nothing changed
    assert _show(capsys, local, name) == before


def _show_as(capsys: Capture, local: Local, ws: str, token: str) -> dict[str, Any]:
    return dict(cli_json(capsys, "workspace", "cloud", ws, *connect(local, token)))


def _run_show(capsys: Capture, local: Local, run_id: str) -> str:
    code, text, err = cli(capsys, "run", "show", run_id, *connect(local))
    assert code == 0, err
    return text


def test_each_run_pins_the_settings_it_was_created_with_and_shows_them(
    local: Local, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace, a run created before it had cloud settings, and then settings
    ws_id, name = workspace(local, capsys, "cloud-runs")
    bare = local.client.create_run(ws_id, HELLO, kind="plan_only")["id"]
    _stdin(monkeypatch, SECRET)
    _set(
        capsys,
        local,
        name,
        "--aws-plan-role",
        PLAN,
        "--aws-apply-role",
        APPLY,
        "--aws-external-id-stdin",
        "--gcp-audience",
        GCP,
    )
    # When a run is created through the CLI, the settings change, and another is created
    code, out, err = cli(
        capsys, "run", "create", "--workspace", name, "--dir", str(HELLO), *connect(local)
    )
    assert code == 0, err
    first = out.strip()
    _set(capsys, local, name, "--aws-plan-role", OTHER, "--gcp-audience", "")
    second = local.client.create_run(ws_id, HELLO, kind="plan_only")["id"]

    # Then `run show` of the run created before any settings says it has none
    assert "  cloud      no cloud credentials" in _run_show(capsys, local, bare)
    # And the first run shows the roles, region and audience it pinned, the external ID
    # only as set, unchanged by the later change
    text = _run_show(capsys, local, first)
    assert f"  cloud      aws plan {PLAN}  apply {APPLY}" in text
    assert "             aws region us-east-1  session 3600 s  external ID set" in text
    assert f"gcp audience {GCP}" in text
    assert SECRET not in text
    review = cli_json(capsys, "run", "show", first, *connect(local))
    decisions = review["input"]["credentials"]
    assert (decisions["settings_version"], decisions["aws"]["plan_role_arn"]) == (1, PLAN)
    assert decisions["digest"].startswith("sha256:")
    assert SECRET not in json.dumps(review)
    # And the plan-only run created after the change pins the new plan role, no apply
    # role (it never applies), and no audience
    later = cli_json(capsys, "run", "show", second, *connect(local))["input"]["credentials"]
    assert later["settings_version"] == 2
    assert (later["aws"]["plan_role_arn"], later["aws"]["apply_role_arn"]) == (OTHER, None)
    assert later["gcp"] is None

    # And the dashboard shows the workspace's settings and each run's pinned decisions
    browser = signed_in(local)
    page = browser.get(f"{local.url}/ui/workspaces/{ws_id}", timeout=30).text
    assert 'id="cloud-credentials"' in page
    assert OTHER in page
    assert "external ID set" in page
    run_page = browser.get(f"{local.url}/ui/runs/{first}", timeout=30).text
    assert PLAN in run_page
    assert APPLY in run_page
    assert SECRET not in page + run_page
    # And the runs end: their roles do not exist in this account, so the runs that
    # pinned them end asking for credentials, before any engine ran
    for run_id in (first, second):
        ended = local.client.watch(run_id, until=["plan_credentials_required"], timeout=180)
        assert ended["status"] == "plan_credentials_required"
        assert "cloud credentials were not issued" in local.client.log(run_id, "plan")
    local.client.watch(bare, timeout=180)
