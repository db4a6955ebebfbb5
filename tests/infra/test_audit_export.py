"""The audit export as the template declares it: a step every ten minutes, a role that
may put only ``audit/`` objects and touch only the trail's index and the watermark,
no other function able to write there, and the retention the context configures."""

from __future__ import annotations

from typing import Any

from infra.constructs.audit_export import WATERMARK_PARTITION
from runplane.domain.audit_export import EXPORT_PREFIX
from tests.infra.synth import Synthesized, as_list, ref

EXPORTER = "functions.audit_export.handler.export"


def _artifact_bucket(stack: Synthesized) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, p) for k, p in stack.of_type("AWS::S3::Bucket").items() if "LoggingConfiguration" in p
    ]
    return found


def _text(value: Any) -> str:
    """A resource's ARN as text, references reduced to their logical IDs."""
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(_text(part) for part in value["Fn::Join"][1])
    found = ref(value)
    return f"<{found}>" if found else str(value)


def test_the_exporter_runs_every_ten_minutes(stack: Synthesized) -> None:
    # Given the template's scheduled rules
    exporter = stack.function(EXPORTER)["LogicalId"]
    rules = [
        rule
        for rule in stack.of_type("AWS::Events::Rule").values()
        if any(ref(t["Arn"]) == exporter for t in rule.get("Targets", []))
    ]
    # Then exactly one targets the exporter, every ten minutes
    (rule,) = rules
    assert rule["ScheduleExpression"] == "rate(10 minutes)"
    assert rule["State"] == "ENABLED"
    # And EventBridge may invoke it (the function's resource policy)
    permissions = [
        p
        for p in stack.of_type("AWS::Lambda::Permission").values()
        if ref(p["FunctionName"]) == exporter
    ]
    assert [p["Principal"] for p in permissions] == ["events.amazonaws.com"]


def test_the_exporter_may_put_only_audit_objects_and_touch_only_its_items(
    stack: Synthesized,
) -> None:
    table, _ = stack.one("AWS::DynamoDB::Table")
    bucket, _ = _artifact_bucket(stack)
    role = stack.role_of(EXPORTER)
    grants = {
        (action, _text(resource), str(condition))
        for action, resource, condition in stack.grants(role)
        if not action.startswith(("logs:", "xray:"))
    }
    watermark = str({"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [WATERMARK_PARTITION]}})
    assert grants == {
        ("dynamodb:Query", f"<{table}>/index/GSI1", "{}"),
        ("dynamodb:GetItem", f"<{table}>", watermark),
        ("dynamodb:PutItem", f"<{table}>", watermark),
        ("dynamodb:DescribeTable", f"<{table}>", "{}"),
        ("s3:PutObject", f"<{bucket}>/{EXPORT_PREFIX}*", "{}"),
    }
    # And it knows the table and the bucket, not the data key
    environment = stack.environment(EXPORTER)
    assert ref(environment["RUNPLANE_TABLE_NAME"]) == table
    assert ref(environment["RUNPLANE_ARTIFACT_BUCKET"]) == bucket
    assert "RUNPLANE_KMS_KEY_ID" not in environment


def test_no_other_role_may_write_the_export(stack: Synthesized) -> None:
    # Given every statement of every policy but the exporter's
    exporter_role = stack.role_of(EXPORTER)
    writes = {"s3:PutObject", "s3:DeleteObject", "s3:*", "*"}
    for role in stack.of_type("AWS::IAM::Role"):
        if role == exporter_role:
            continue
        for action, resource, _ in stack.grants(role):
            if action not in writes:
                continue
            # Then none names the audit prefix or the whole bucket
            arn = _text(resource)
            assert f"/{EXPORT_PREFIX}" not in arn, (role, action, arn)
            assert not arn.endswith(">/*"), (role, action, arn)
            assert arn != "*", (role, action, arn)
    # And the artifact bucket's own policy grants no writes either
    bucket, _ = _artifact_bucket(stack)
    for policy in stack.of_type("AWS::S3::BucketPolicy").values():
        if ref(policy["Bucket"]) != bucket:
            continue
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Allow":
                assert not set(as_list(statement["Action"])) & writes


def test_the_export_is_kept_forever_unless_a_retention_is_configured(
    stack: Synthesized, custom_stack: Synthesized
) -> None:
    # Given the default deployment / Then no rule expires current objects under audit/
    _, default_bucket = _artifact_bucket(stack)
    for rule in default_bucket["LifecycleConfiguration"]["Rules"]:
        if "ExpirationInDays" in rule:
            assert rule.get("Prefix") not in (None, "", EXPORT_PREFIX), rule
    # Given auditRetentionDays=2555 / Then the audit prefix expires after that many days
    _, bucket = _artifact_bucket(custom_stack)
    (rule,) = [
        r for r in bucket["LifecycleConfiguration"]["Rules"] if r.get("Prefix") == EXPORT_PREFIX
    ]
    assert (rule["ExpirationInDays"], rule["Status"]) == (2555, "Enabled")
