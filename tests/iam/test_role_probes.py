"""Every role the workload signs as is refused, by a real call, each resource of a kind
it may use that its policy does not name: another table, another bucket and every
object prefix outside its own, the KMS key it is not given, the secrets and state
machines it is not given, the task functions of the other workflow.

Which resources a role is not given is read from its policy; what is proven is that a
real call to each, signed as the role, is refused, while the same call on what it is
given passes (each probe's control)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from runplane.adapters.acting_function import acting_as
from tests.iam.conftest import HARNESS, Enforced
from tests.iam.enforcement import allows
from tests.iam.roles import Role
from tests.iam.test_probes import KEY, refused, settings

# The services a function's or a workflow's role is assumed by (not the sandboxes').
SIGNING_SERVICES = ("lambda.amazonaws.com", "states.amazonaws.com")
OBJECT_PREFIXES = ("artifacts/", "audit/", "inbox/", "elsewhere/")


@dataclass(frozen=True)
class Probe:
    what: str  # the call, as a failure names it
    action: str  # the IAM action it needs
    resource: str  # the ARN it needs it on
    call: Callable[[], Any]
    context: dict[str, list[str]] = field(default_factory=dict)  # its condition keys


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:us-east-1:123456789012:{resource}"


def probes(enforced: Enforced) -> list[Probe]:
    """One real call per resource a role could be given, with the action and ARN it needs."""
    found = settings(enforced)
    dynamodb, kms, s3 = enforced.client("dynamodb"), enforced.client("kms"), enforced.client("s3")
    secrets, sfn = enforced.client("secretsmanager"), enforced.client("stepfunctions")
    lambda_ = enforced.client("lambda")
    table, bucket = found.table_name, found.artifact_bucket
    made = [
        Probe(
            f"dynamodb:GetItem {name}",
            "dynamodb:GetItem",
            _arn("dynamodb", f"table/{name}"),
            partial(dynamodb.get_item, TableName=name, Key=KEY),
            # An item of another partition than a LeadingKeys condition names
            {"dynamodb:LeadingKeys": [KEY["PK"]["S"]]},
        )
        for name in (table, "other")
    ]
    for prefix in OBJECT_PREFIXES:
        key = f"{prefix}probe"
        made.append(
            Probe(
                f"s3:GetObject {key}",
                "s3:GetObject",
                f"arn:aws:s3:::{bucket}/{key}",
                partial(s3.get_object, Bucket=bucket, Key=key),
            )
        )
        made.append(
            Probe(
                f"s3:PutObject {key}",
                "s3:PutObject",
                f"arn:aws:s3:::{bucket}/{key}",
                partial(s3.put_object, Bucket=bucket, Key=key, Body=b""),
            )
        )
    made.append(
        Probe(
            "s3:GetObject another bucket",
            "s3:GetObject",
            "arn:aws:s3:::another-bucket/artifacts/probe",
            partial(s3.get_object, Bucket="another-bucket", Key="artifacts/probe"),
        )
    )
    [signing_key] = found.oidc_signing_keys
    for name, key_id in (("data key", found.kms_key_id), ("signing key", signing_key)):
        arn = kms.describe_key(KeyId=key_id)["KeyMetadata"]["Arn"]
        made.append(
            Probe(
                f"kms:Decrypt {name}",
                "kms:Decrypt",
                arn,
                partial(kms.decrypt, KeyId=arn, CiphertextBlob=b"\0" * 64),
            )
        )
        made.append(
            Probe(
                f"kms:GenerateDataKey {name}",
                "kms:GenerateDataKey",
                arn,
                partial(kms.generate_data_key, KeyId=arn, KeySpec="AES_256"),
            )
        )
        made.append(
            Probe(
                f"kms:Sign {name}",
                "kms:Sign",
                arn,
                partial(
                    kms.sign,
                    KeyId=arn,
                    Message=b"probe",
                    SigningAlgorithm="RSASSA_PKCS1_V1_5_SHA_256",
                ),
            )
        )
    for name in ("github_webhook_secret_arn", "github_app_private_key_secret_arn"):
        arn = str(getattr(found, name))
        made.append(
            Probe(
                f"secretsmanager:GetSecretValue {name}",
                "secretsmanager:GetSecretValue",
                arn,
                partial(secrets.get_secret_value, SecretId=arn),
            )
        )
    for arn in (found.state_machine_arn, found.source_state_machine_arn):
        # Only ever refused: an allowed start would start a workflow, so no control.
        made.append(
            Probe(
                f"states:StartExecution {arn.rsplit(':', 1)[-1]}",
                "states:StartExecution",
                arn,
                partial(sfn.start_execution, stateMachineArn=arn, name="probe", input="{"),
            )
        )
    for function in enforced.invoker_roles:
        made.append(
            Probe(
                f"lambda:InvokeFunction {function}",
                "lambda:InvokeFunction",
                _arn("lambda", f"function:{function}"),
                partial(lambda_.invoke, FunctionName=function, Payload=b"{"),
            )
        )
    return made


# Allowed calls not made as controls: they would change something (start a workflow,
# run a task), or fail on their made-up input for a reason other than IAM.
NO_CONTROL = ("states:StartExecution", "lambda:InvokeFunction", "kms:Decrypt", "kms:Sign")


def outcomes(enforced: Enforced, role: Role, made: list[Probe]) -> list[str]:
    """What went wrong for ``role``: a call it is not given that passed, or a call it
    is given that was refused."""
    wrong = []
    with acting_as(f"role:{role.logical_id}"):
        for probe in made:
            given = allows(role.documents, probe.action, probe.resource, probe.context)
            if given and probe.action in NO_CONTROL:
                continue
            if refused(probe.call) == given:
                wrong.append(f"{probe.what}: {'refused' if given else 'allowed'}")
    return wrong


def test_every_role_is_refused_every_resource_its_policy_does_not_name(
    enforced: Enforced,
) -> None:
    # Given every role a function or a workflow runs under, and one call per resource
    with acting_as(HARNESS):
        made = probes(enforced)
    signing = [r for r in enforced.roles.values() if r.service in SIGNING_SERVICES]
    assert len(signing) > 20
    # When each role makes each call, Then it is refused exactly what it is not given
    wrong = {role.logical_id: outcomes(enforced, role, made) for role in signing}
    assert {role: found for role, found in wrong.items() if found} == {}
    # And every role was refused something (no role is given everything probed)
    refusals = [d for d in enforced.denials() if d.principal in {r.logical_id for r in signing}]
    assert {d.principal for d in refusals} == {r.logical_id for r in signing}
