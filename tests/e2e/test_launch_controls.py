"""Fail-closed launch controls: denied runs leave nothing behind; existing runs keep reading."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import boto3
import pytest

from runplane.cli import main
from runplane.client import ApiError, Client, Connection
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO, new_workspace, writer_of


@pytest.fixture
def controls(local: Local) -> Iterator[Local]:
    yield local
    # Leave the shared stack launching for the tests after this one.
    local.client.set_launch_controls("organization")
    local.client.set_launch_controls("platform")


def _artifact_count(local: Local) -> int:
    assert local.stack.services is not None
    settings = local.stack.services.settings
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=settings.aws_endpoint_url)
    listed = s3.list_objects_v2(Bucket=settings.artifact_bucket, Prefix="artifacts/")
    return int(listed.get("KeyCount", 0))


def _executions(local: Local) -> int:
    assert local.stack.services is not None
    settings = local.stack.services.settings
    sfn = boto3.client(
        "stepfunctions", region_name="us-east-1", endpoint_url=settings.aws_endpoint_url
    )
    return len(sfn.list_executions(stateMachineArn=settings.state_machine_arn)["executions"])


def test_a_denied_launch_is_503_with_retry_after_and_creates_nothing(controls: Local) -> None:
    # Given a workspace with an earlier run, and uploaded configuration
    local = controls
    ws = new_workspace(local, "denied")
    earlier = local.client.create_run(ws, HELLO, kind="plan_only")
    local.client.watch(earlier["id"], timeout=120)
    configuration = local.client.upload_configuration(ws, HELLO)
    runs, executions, artifacts = (
        len(local.client._call("GET", f"/api/v1/workspaces/{ws}/runs")["runs"]),
        _executions(local),
        _artifact_count(local),
    )

    # When the organization switches launches off and someone creates a run
    local.client.set_launch_controls("organization", launches_enabled=False)
    request = urllib.request.Request(  # noqa: S310 - the loopback stack
        f"{local.url}/api/v1/workspaces/{ws}/runs",
        data=(
            f'{{"kind": "plan_only", "configuration_version_id": "{configuration["id"]}", '
            '"variables": {"greeting": "secret-ish"}}'
        ).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {local.admin_token}",
            "Content-Type": "application/json",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)  # noqa: S310

    # Then it is 503 with Retry-After: 60, and no run, execution or artifact exists
    assert refused.value.code == 503
    assert refused.value.headers["Retry-After"] == "60"
    assert b"service_unavailable" in refused.value.read()
    assert len(local.client._call("GET", f"/api/v1/workspaces/{ws}/runs")["runs"]) == runs
    assert _executions(local) == executions
    assert _artifact_count(local) == artifacts
    # And existing runs and reads keep working
    assert local.client.review(earlier["id"])["status"] == "succeeded"


def test_launches_denied_before_apply_fail_the_apply_without_starting_it(controls: Local) -> None:
    # Given a plan awaiting approval
    local = controls
    ws = new_workspace(local, "preapply")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)

    # When the platform switches launches off and the plan is approved
    local.client.set_launch_controls("platform", launches_enabled=False)
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=120)

    # Then the apply never started, the run says why, and the workspace is free
    assert done["status"] == "apply_failed"
    assert done["status_reason"].startswith("LAUNCH_DENIED")
    assert done["apply"]["resulting_state_version"]["status"] == "not_recorded"
    assert writer_of(ws) == (None, None)


def test_a_runner_release_off_the_allowlist_is_denied(controls: Local) -> None:
    local = controls
    ws = new_workspace(local, "allowlist")
    local.client.set_launch_controls("organization", runner_releases=["runner@some-other"])

    with pytest.raises(ApiError) as refused:
        local.client.create_run(ws, HELLO)

    assert refused.value.status == 503
    assert "allowlist" in str(refused.value)


def test_only_platform_operators_set_platform_controls(controls: Local) -> None:
    from runplane.domain.identity import ROLES

    local = controls
    org_admin = local.token(ROLES["admin"], name="org-admin")
    client = type(local.client)(type(local.client.connection)(local.url, org_admin))

    with pytest.raises(ApiError) as refused:
        client.set_launch_controls("platform", launches_enabled=False)

    assert refused.value.status == 403
    assert client.set_launch_controls("organization", suspended=False)["suspended"] is False


def test_an_organization_at_its_sandbox_limit_gets_503_until_one_finishes(
    controls: Local,
) -> None:
    # Given an organization of its own (no other test's sandboxes count against it)
    # that is allowed no concurrent sandboxes
    org, token = controls.other_organization(unique("capacity-org"))
    client = Client(Connection(controls.url, token, org))
    ws = client.create_workspace("capacity")["id"]
    client.set_launch_controls("organization", max_sandboxes=0)

    # When someone creates a run / Then it is 503 naming the limit, and no run exists
    with pytest.raises(ApiError) as refused:
        client.create_run(ws, HELLO, kind="plan_only")
    assert refused.value.status == 503
    assert "limit of 0 sandboxes" in str(refused.value)
    assert client._call("GET", f"/api/v1/workspaces/{ws}/runs")["runs"] == []

    # And once the limit allows one sandbox, runs plan one after another: each
    # finished plan gives its slot back
    client.set_launch_controls("organization", max_sandboxes=1)
    for _ in range(2):
        done = client.watch(client.create_run(ws, HELLO, kind="plan_only")["id"], timeout=120)
        assert done["status"] == "succeeded"


def test_the_cli_changes_only_the_controls_it_is_given(
    controls: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an organization of its own and the CLI pointed at it
    org, token = controls.other_organization(unique("cli-controls"))
    client = Client(Connection(controls.url, token, org))
    ws = client.create_workspace("cli")["id"]
    connect = ["--url", controls.url, "--token", token, "--organization", org, "--json"]

    def cli(*args: str) -> dict[str, object]:
        capsys.readouterr()
        assert main(["controls", *args, *connect]) == 0
        shown: dict[str, object] = json.loads(capsys.readouterr().out)
        return shown

    # When a limit and a region are set, then launches switched off
    cli("set", "--max-sandboxes", "3", "--region", "us-east-1")
    shown = cli("set", "--launches", "off")

    # Then the earlier settings stay, and new runs are denied
    assert shown["max_sandboxes"] == 3
    assert shown["allowed_regions"] == ["us-east-1"]
    assert shown["launches_enabled"] is False
    assert shown["running_sandboxes"] == 0
    with pytest.raises(ApiError) as refused:
        client.create_run(ws, HELLO, kind="plan_only")
    assert refused.value.status == 503

    # When everything is opened up again / Then the controls read as unrestricted
    shown = cli("set", "--launches", "on", "--max-sandboxes", "-1", "--region", "")
    assert (shown["launches_enabled"], shown["max_sandboxes"], shown["allowed_regions"]) == (
        True,
        None,
        [],
    )
