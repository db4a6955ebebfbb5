"""The embedded stack with every handler acting under its deployed role.

The stack is the e2e tier's (one per process); for this tier's tests moto's IAM
holds the template's roles, each handler's AWS calls are signed with credentials of
its own role (runplane.local.role_credentials), and moto refuses what the role does
not allow (tests/iam/enforcement.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import boto3
import pytest
from botocore.credentials import Credentials

from runplane.local import role_credentials
from runplane.local.stack import ACCOUNT, REGION, task_handlers
from tests.e2e.conftest import Local, embedded, fake_github  # noqa: F401
from tests.iam.enforcement import Decision, Enforcement, allows
from tests.iam.roles import (
    EmbeddedResources,
    Role,
    deployment_roles,
    function_roles,
    state_machine_roles,
)
from tests.infra.synth import Synthesized, synthesize

HARNESS = "harness"  # the tests' own calls, and the stand-ins for AWS services
ADMIN = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}
# Threads that stand for an AWS service, not a function: the local EventBridge Scheduler.
SERVICE_THREADS = ("runplane-scheduler",)


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    synthesized: Synthesized = synthesize(tmp_path_factory.mktemp("cdk-iam"), {})
    return synthesized.template


def embedded_resources(local: Local) -> EmbeddedResources:
    services = local.stack.services
    assert services is not None
    settings = services.settings
    session = boto3.session.Session(region_name=REGION)
    endpoint = settings.aws_endpoint_url
    table = session.client("dynamodb", endpoint_url=endpoint).describe_table(
        TableName=settings.table_name
    )["Table"]
    kms = session.client("kms", endpoint_url=endpoint)
    [signing_key] = settings.oidc_signing_keys
    assert settings.state_machine_arn
    assert settings.source_state_machine_arn
    return EmbeddedResources(
        table=settings.table_name,
        stream_arn=table["LatestStreamArn"],
        artifact_bucket=settings.artifact_bucket,
        data_key_arn=kms.describe_key(KeyId=settings.kms_key_id)["KeyMetadata"]["Arn"],
        signing_key_arn=kms.describe_key(KeyId=signing_key)["KeyMetadata"]["Arn"],
        secret_arns={
            "GitHubWebhookSecret": str(settings.github_webhook_secret_arn),
            "GitHubAppPrivateKey": str(settings.github_app_private_key_secret_arn),
            "GitHubAppClientSecret": str(settings.github_client_secret_arn),
            # The embedded stack signs its dashboard in itself: no such secret.
            "IdentityDashboardClientSecret": (
                f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:runplane/dashboard-client"
            ),
        },
        state_machines={
            "runplane-run": settings.state_machine_arn,
            "runplane-source": settings.source_state_machine_arn,
        },
        schedule_group=settings.scheduler_group,
        names={
            "runplane-prod-run": "runplane-run",
            "runplane-prod-source": "runplane-source",
            "runplane-prod-schedules": settings.scheduler_group,
        },
    )


@dataclass
class Enforced:
    """The stack under its roles: who signs what, and every decision taken."""

    local: Local
    roles: dict[str, Role]
    function_roles: dict[str, str]  # handler -> role logical ID
    invoker_roles: dict[str, str]  # embedded task function name -> state machine's role
    credentials: dict[str, Credentials]  # role logical ID (or HARNESS) -> credentials
    enforcement: Enforcement
    unattributed: list[str]

    def denials(self) -> list[Decision]:
        return self.enforcement.denied()

    def client(self, service: str) -> Any:
        """A client of the stack's moto; its calls are signed as whoever ``acting_as``
        names (``role:<logical ID>`` for a role itself)."""
        endpoint = self.local.stack.services.settings.aws_endpoint_url  # type: ignore[union-attr]
        return boto3.session.Session(region_name=REGION).client(service, endpoint_url=endpoint)  # type: ignore[call-overload]


def _create_roles(iam: Any, sts: Any, roles: dict[str, Role]) -> dict[str, Credentials]:
    found: dict[str, Credentials] = {}
    for role in roles.values():
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": role.service},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        arn = iam.create_role(RoleName=role.logical_id, AssumeRolePolicyDocument=json.dumps(trust))[
            "Role"
        ]["Arn"]
        for index, document in enumerate(role.documents):
            iam.put_role_policy(
                RoleName=role.logical_id,
                PolicyName=f"policy-{index}",
                PolicyDocument=json.dumps(document),
            )
        session = sts.assume_role(RoleArn=arn, RoleSessionName="iam-tier")["Credentials"]
        found[role.logical_id] = Credentials(
            session["AccessKeyId"], session["SecretAccessKey"], session["SessionToken"]
        )
    iam.create_user(UserName=HARNESS)
    iam.put_user_policy(UserName=HARNESS, PolicyName="admin", PolicyDocument=json.dumps(ADMIN))
    key = iam.create_access_key(UserName=HARNESS)["AccessKey"]
    found[HARNESS] = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    return found


_PRESIGNED_ACTIONS = {
    "GetObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
}


@pytest.fixture(scope="module")
def enforced(embedded: Local, template: dict[str, Any]) -> Iterator[Enforced]:  # noqa: F811
    embedded.stack.activate()
    resources = embedded_resources(embedded)
    roles = deployment_roles(template, resources)
    by_function = function_roles(template)
    by_machine = state_machine_roles(template, resources)
    run_role = by_machine[resources.state_machines["runplane-run"]]
    source_role = by_machine[resources.state_machines["runplane-source"]]
    from functions.tasks.source_handlers import SOURCE_HANDLERS

    invokers = {
        f"runplane-{name}": source_role if name in SOURCE_HANDLERS else run_role
        for name in task_handlers()
    }
    settings = embedded.stack.services.settings  # type: ignore[union-attr]
    session = boto3.session.Session(region_name=REGION)
    iam = session.client("iam", endpoint_url=settings.aws_endpoint_url)
    sts = session.client("sts", endpoint_url=settings.aws_endpoint_url)
    if HARNESS not in {u["UserName"] for u in iam.list_users()["Users"]}:
        credentials = _create_roles(iam, sts, roles)
    else:  # a second module of the tier: the roles are there, take new sessions
        credentials = {}
        for role in roles.values():
            arn = f"arn:aws:iam::{ACCOUNT}:role/{role.logical_id}"
            c = sts.assume_role(RoleArn=arn, RoleSessionName="iam-tier")["Credentials"]
            credentials[role.logical_id] = Credentials(
                c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]
            )
        # A user holds at most two keys: the earlier module's key goes.
        for earlier in iam.list_access_keys(UserName=HARNESS)["AccessKeyMetadata"]:
            iam.delete_access_key(UserName=HARNESS, AccessKeyId=earlier["AccessKeyId"])
        key = iam.create_access_key(UserName=HARNESS)["AccessKey"]
        credentials[HARNESS] = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    policies: dict[str, list[dict[str, Any]]] = {r.logical_id: r.documents for r in roles.values()}
    policies[HARNESS] = [ADMIN]
    enforcement = Enforcement(policies)
    unattributed: list[str] = []
    nobody = Credentials("AKIANOFUNCTIONNAMED0", "unattributed")

    def principal_of(
        function: str | None, signing: str, operation: str, request: Any
    ) -> str | None:
        if function == HARNESS:
            return HARNESS
        if function is not None and function.startswith("role:"):
            return function.removeprefix("role:")
        if function is not None:
            return by_function.get(function)
        if signing == "lambda" and operation == "Invoke":
            # moto's interpreter invokes the workflow's tasks: as the state machine's role.
            name = unquote(urlparse(request.url).path).split("/functions/")[1].split("/")[0]
            return invokers.get(name.split(":function:")[-1])
        if threading.current_thread().name in SERVICE_THREADS:
            return HARNESS
        return None

    def resolve(function: str | None, signing: str, operation: str, request: Any) -> Credentials:
        principal = principal_of(function, signing, operation, request)
        if principal is None:
            unattributed.append(
                f"{function or threading.current_thread().name}: {signing}:{operation}"
            )
            return nobody
        if request.context.get("is_presign_request") and signing == "s3":
            path = unquote(urlparse(request.url).path).lstrip("/")
            action = _PRESIGNED_ACTIONS.get(operation, f"s3:{operation}")
            arn = f"arn:aws:s3:::{path}"
            allowed = allows(policies[principal], action, arn, {})
            enforcement.record(Decision(principal, action, arn, allowed, how="presign"))
        return credentials[principal]

    role_credentials.install(resolve)
    try:
        with enforcement.active():
            yield Enforced(
                embedded, roles, by_function, invokers, credentials, enforcement, unattributed
            )
    finally:
        role_credentials.uninstall()
