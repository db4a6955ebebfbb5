"""Cloud credentials for runs, end to end on the embedded stack: a real engine plans as the
workspace's plan role and applies as its apply role, each exchanged by STS for a workload
identity token the stack signed; a role that does not trust the run ends it saying what
to fix; no credential reaches the run's logs, review or audit trail; another
organization's runs can never obtain the first's roles; and the runner's credentials
capability is one-time and bound to its phase."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import requests

from runplane.client import Client, Connection
from runplane.domain.identity import Permission
from runplane.store import audit
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import config, stages

ACCOUNT = "123456789012"
AUDIENCE = "sts.amazonaws.com"

PROVIDER = """\
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
"""

# ``planned`` is read while planning; ``applied`` depends on a resource being created, so
# the engine reads it while applying: each reports the role its phase ran as.
WHO_RAN = (
    PROVIDER
    + """
data "test_caller_identity" "planned" {}

resource "test_thing" "x" {
  name    = "x"
  content = data.test_caller_identity.planned.arn
}

data "test_caller_identity" "applied" {
  depends_on = [test_thing.x]
}

output "plan_role" {
  value = data.test_caller_identity.planned.arn
}

output "apply_role" {
  value = data.test_caller_identity.applied.arn
}
"""
)


def _iam(local: Local) -> Any:
    settings = local.stack.services.settings  # type: ignore[union-attr]
    return boto3.client("iam", region_name=settings.region, endpoint_url=settings.aws_endpoint_url)


def _issuer(local: Local) -> str:
    return str(local.stack.services.workload_identity.issuer)  # type: ignore[union-attr]


def _trust_provider(local: Local) -> str:
    """The account's IAM OIDC provider for the stack's issuer (created once)."""
    iam = _iam(local)
    issuer = _issuer(local)
    host = issuer.split("://", 1)[1].rstrip("/")
    for listed in iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]:
        if listed["Arn"].endswith(f":oidc-provider/{host}"):
            return host
    iam.create_open_id_connect_provider(
        Url=issuer, ClientIDList=[AUDIENCE], ThumbprintList=["0" * 40]
    )
    return host


def _role(local: Local, name: str, subject: str) -> str:
    """A role trusting the stack's tokens whose ``sub`` matches ``subject``."""
    host = _trust_provider(local)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{host}"},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {f"{host}:aud": AUDIENCE},
                    "StringLike": {f"{host}:sub": subject},
                },
            }
        ],
    }
    _iam(local).create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(policy))
    return f"arn:aws:iam::{ACCOUNT}:role/{name}"


def _settings(local: Local, ws: str, token: str | None = None, **body: Any) -> None:
    answer = requests.put(
        f"{local.url}/api/v1/workspaces/{ws}/cloud-settings",
        headers={"Authorization": f"Bearer {token or local.admin_token}"},
        json=body,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


def _trail(local: Local, run_id: str) -> list[Any]:
    services = local.stack.services
    assert services is not None
    org_id = services.workspaces.organization_id_of(local.organization)
    return [e for e in audit.organization_trail(org_id) if e.subject_id == run_id]


def _assumed(role_arn: str, phase: str, run_id: str) -> str:
    name = role_arn.rsplit("/", 1)[1]
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/runplane-{phase}-{run_id}"


def test_a_run_plans_as_the_plan_role_and_applies_as_the_apply_role(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace whose plan and apply roles each trust only their own phase
    ws = str(local.client.create_workspace(unique("creds"))["id"])
    org = local.organization
    plan_role = _role(local, unique("plan"), f"organization:{org}:workspace:{ws}:run_phase:plan")
    apply_role = _role(local, unique("apply"), f"organization:{org}:workspace:{ws}:run_phase:apply")
    _settings(local, ws, aws_plan_role_arn=plan_role, aws_apply_role_arn=apply_role)

    # When a run that reports who it ran as plans, is approved and applies
    run = local.client.create_run(ws, config(tmp_path, WHO_RAN))
    waiting = local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    assert waiting["status"] == "awaiting_approval", waiting.get("status_reason")
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=180)

    # Then the plan ran as the plan role and the apply as the apply role
    assert done["status"] == "succeeded", done.get("status_reason")
    plan_log = local.client.log(run["id"], "plan")
    apply_log = local.client.log(run["id"], "apply")
    assert _assumed(plan_role, "plan", run["id"]) in plan_log
    assert _assumed(apply_role, "apply", run["id"]) in apply_log
    assert _assumed(apply_role, "apply", run["id"]) not in plan_log
    assert f"cloud credentials issued for this phase: aws role {plan_role}" in plan_log
    # And the review names the decisions, never a credential
    review = json.dumps(done)
    assert plan_role in review
    assert apply_role in review
    for text in (plan_log, apply_log, review):
        assert "AWS_SECRET_ACCESS_KEY" not in text
        assert "aws_secret_access_key" not in text
    # And each issue is audited by identity
    issued = [e for e in _trail(local, run["id"]) if e.type == "run.credentials_issued"]
    assert [(e.details["phase"], e.details["aws_role_arn"]) for e in issued] == [
        ("plan", plan_role),
        ("apply", apply_role),
    ]


def test_a_role_that_does_not_trust_the_run_ends_it_saying_what_to_fix(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace whose plan role trusts only another workspace's plans
    ws = str(local.client.create_workspace(unique("untrusted"))["id"])
    role = _role(
        local,
        unique("elsewhere"),
        f"organization:{local.organization}:workspace:ws-someoneelse:run_phase:plan",
    )
    _settings(local, ws, aws_plan_role_arn=role)

    # When a run plans
    run = local.client.create_run(ws, config(tmp_path, WHO_RAN))
    done = local.client.watch(run["id"], timeout=180)

    # Then it ends asking for credentials, naming the role and what it must trust
    assert done["status"] == "plan_credentials_required"
    assert stages(done)["plan"] == "failed"
    log = local.client.log(run["id"], "plan")
    assert "AccessDenied" in log
    assert role in log
    assert "run_phase:plan" in log
    refused = [e for e in _trail(local, run["id"]) if e.type == "run.credentials_refused"]
    assert [e.details["code"] for e in refused] == ["cloud_credentials_refused"]


def test_another_organizations_workspace_never_obtains_the_first_ones_role(
    local: Local, tmp_path: Path
) -> None:
    # Given a role trusting only the default organization's plans
    role = _role(
        local, unique("mine"), f"organization:{local.organization}:workspace:*:run_phase:plan"
    )
    # And another organization whose workspace names that role
    other_org, other_token = local.other_organization(unique("rival"))
    rival = Client(Connection(local.url, other_token, other_org))
    ws = str(rival.create_workspace(unique("rival-ws"))["id"])
    _settings(local, ws, token=other_token, aws_plan_role_arn=role)

    # When that workspace's run plans
    run = rival.create_run(ws, config(tmp_path, WHO_RAN))
    done = rival.watch(run["id"], timeout=180)

    # Then STS refused it: its token names its own organization, which the role does not
    assert done["status"] == "plan_credentials_required"
    assert f"organization:{other_org}:workspace:{ws}:run_phase:plan" in rival.log(run["id"], "plan")


def test_a_handle_no_launch_minted_issues_nothing(local: Local) -> None:
    # Given a caller that is no runner session
    token = local.token([Permission.RUN_READ])

    # When it asks for a phase's credentials with a made-up handle
    answer = requests.post(
        f"{local.url}/api/v1/runner/credentials",
        headers={"Authorization": f"Bearer {token}"},
        json={"handle": "rpc_" + "x" * 43},
        timeout=30,
    )

    # Then it is refused, and nothing was issued
    assert answer.status_code in (401, 403), answer.text
    assert "credentials" not in answer.json()
