"""The audit trail's export (docs/audit.md, "Export"): a Lambda that runs one export
step every ten minutes, writing JSON lines under ``audit/`` of the artifact bucket,
kept for ``auditRetentionDays`` (a lifecycle rule on that prefix; 0 keeps them).

Least privilege: the exporter may query only the table's index (where each day's
records are listed), read and put only the export's watermark item (a condition on
the partition key), describe the table (its creation bounds the first export's walk),
and put only objects under ``audit/``. No other function's grants reach ``audit/``.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.functions import Access, Platform, RunplaneFunction
from infra.constructs.nag import acknowledge, logical_id
from runplane.domain.audit_export import EXPORT_PREFIX
from runplane.store.table import GSI1

# How often a step runs; with the 15-minute settle margin a record is exported within
# about 25 minutes of being written.
EXPORT_RATE = Duration.minutes(10)
# The watermark's partition key (store/security_records.py).
WATERMARK_PARTITION = "AUDITEXPORT"


class AuditExport(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, platform: Platform) -> None:
        super().__init__(scope, construct_id)
        storage = platform.storage
        self.function = RunplaneFunction(
            self,
            "Exporter",
            platform=platform,
            name="audit-export",
            handler="functions.audit_export.handler.export",
            description="Runplane: export settled audit records as JSON lines by day",
            # Grants are written below: narrower than Access can say.
            access=Access(),
            # A step is one batch (1000 records): a few queries and puts.
            timeout=Duration.seconds(120),
        )
        role = self.function.role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="AuditRecordsByDay",
                actions=["dynamodb:Query"],
                resources=[f"{storage.table.table_arn}/index/{GSI1.name}"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ExportWatermark",
                actions=["dynamodb:GetItem", "dynamodb:PutItem"],
                resources=[storage.table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [WATERMARK_PARTITION]}
                },
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="TrailStart",
                actions=["dynamodb:DescribeTable"],
                resources=[storage.table.table_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ExportObjects",
                actions=["s3:PutObject"],
                resources=[storage.bucket.arn_for_objects(f"{EXPORT_PREFIX}*")],
            )
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{logical_id(storage.bucket)}.Arn>/{EXPORT_PREFIX}*]",
            "Export objects are named by organization, day and first record; the grant is "
            f"PutObject only, limited to the {EXPORT_PREFIX} prefix of the Runplane bucket.",
        )
        self.function.function.add_environment("RUNPLANE_TABLE_NAME", storage.table.table_name)
        self.function.function.add_environment(
            "RUNPLANE_ARTIFACT_BUCKET", storage.bucket.bucket_name
        )
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runplane: one audit export step",
            schedule=events.Schedule.rate(EXPORT_RATE),
            targets=[
                targets.LambdaFunction(
                    self.function.function,
                    # A missed step is not retried late: the next one exports the same.
                    max_event_age=Duration.minutes(10),
                    retry_attempts=2,
                )
            ],
        )
        days = platform.config.audit_retention_days
        if days:
            storage.bucket.add_lifecycle_rule(
                id="expire-audit-export",
                prefix=EXPORT_PREFIX,
                expiration=Duration.days(days),
            )
