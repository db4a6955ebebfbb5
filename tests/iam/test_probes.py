"""Each role, signed as itself, is refused what its policy does not grant.

A probe is a real call to moto under the role's own credentials; what is refused is
refused by the enforcement of tests/iam/enforcement.py (moto's authentication, the
role's statements evaluated against the request's real resource ARN)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from runplane.adapters.acting_function import acting_as
from tests.iam.conftest import Enforced

KEY = {"PK": {"S": "probe"}, "SK": {"S": "probe"}}


def refused(call: Callable[[], Any]) -> bool:
    """Whether ``call`` is refused as not allowed (not for any other reason)."""
    try:
        call()
    except ClientError as error:
        found = error.response["Error"]
        # moto answers JSON-protocol services' refusals in XML: botocore reads the
        # status as the code and keeps the XML as the message.
        return found["Code"] in ("AccessDenied", "AccessDeniedException") or (
            found["Code"] == "403" and "<Code>AccessDenied</Code>" in found.get("Message", "")
        )
    return False


def as_role(enforced: Enforced, handler: str) -> Any:
    return acting_as(f"role:{enforced.function_roles[handler]}")


def settings(enforced: Enforced) -> Any:
    return enforced.local.stack.services.settings  # type: ignore[union-attr]


def test_a_function_role_is_refused_another_table_key_bucket_and_state_machine(
    enforced: Enforced,
) -> None:
    # Given the run API's role, which may use the stack's table, key, bucket and workflow
    dynamodb, kms = enforced.client("dynamodb"), enforced.client("kms")
    s3, sfn = enforced.client("s3"), enforced.client("stepfunctions")
    table = settings(enforced).table_name
    other_machine = settings(enforced).state_machine_arn.replace("runplane-run", "other")
    with as_role(enforced, "functions.api.app.handler"):
        # Then it is refused another table, another key, another bucket, another machine
        assert refused(lambda: dynamodb.get_item(TableName="other", Key=KEY))
        assert refused(
            lambda: kms.generate_data_key(KeyId="alias/runplane-oidc", KeySpec="AES_256")
        )
        assert refused(lambda: s3.get_object(Bucket="another-bucket", Key="x"))
        assert refused(lambda: sfn.start_execution(stateMachineArn=other_machine, name="probe"))
        # And an action it lacks on its own table
        assert refused(lambda: dynamodb.delete_table(TableName=table))
        # While what it is granted passes (the probes' control)
        dynamodb.get_item(TableName=table, Key=KEY)
        kms.generate_data_key(KeyId=settings(enforced).kms_key_id, KeySpec="AES_256")


def test_the_authorizer_only_reads(enforced: Enforced) -> None:
    dynamodb = enforced.client("dynamodb")
    table = settings(enforced).table_name
    with as_role(enforced, "functions.authorizer.handler.handler"):
        assert refused(lambda: dynamodb.put_item(TableName=table, Item=KEY))
        dynamodb.get_item(TableName=table, Key=KEY)


def test_the_audit_exporter_reaches_only_its_watermark_partition(enforced: Enforced) -> None:
    dynamodb = enforced.client("dynamodb")
    table = settings(enforced).table_name
    # Given the exporter's LeadingKeys condition on its item reads and writes
    with as_role(enforced, "functions.audit_export.handler.export"):
        # Then an item of another partition is refused, its own partition's is not
        assert refused(lambda: dynamodb.get_item(TableName=table, Key=KEY))
        dynamodb.get_item(TableName=table, Key={"PK": {"S": "AUDITEXPORT"}, "SK": {"S": "x"}})


@pytest.mark.parametrize(
    "handler", ["functions.tasks.handlers.queue_run", "functions.events.handler.handler"]
)
def test_a_task_role_cannot_read_the_github_secrets(enforced: Enforced, handler: str) -> None:
    secrets = enforced.client("secretsmanager")
    key_arn = settings(enforced).github_app_private_key_secret_arn
    with as_role(enforced, handler):
        assert refused(lambda: secrets.get_secret_value(SecretId=key_arn))


def test_every_role_is_refused_an_action_none_is_granted(enforced: Enforced) -> None:
    drop = enforced.client("dynamodb").delete_table
    table = settings(enforced).table_name
    for logical_id in enforced.roles:
        with acting_as(f"role:{logical_id}"):
            assert refused(lambda: drop(TableName=table)), logical_id
