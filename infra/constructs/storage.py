"""Durable storage: the single DynamoDB table, the artifact bucket and the KMS key.

The table is built from ``runplane.store.table``, the definition the store and the
embedded stack create their table from, so the three cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs.nag import acknowledge
from runplane.store import table as definition

# Object key prefixes (runplane.services.artifacts): encrypted artifacts, and the
# inbox that configuration uploads land in before they are ingested.
ARTIFACTS_PREFIX = "artifacts/"
INBOX_PREFIX = "inbox/"
# An inbox upload is ingested (and deleted) within minutes; leftovers are abandoned.
INBOX_EXPIRY = Duration.days(1)
NONCURRENT_EXPIRY = Duration.days(30)
# CloudWatch alarms publish to the alarm topic, which the key encrypts. (EventBridge,
# which publishes run-failure events to the same topic, is granted by its target.)
ALARM_SERVICE = "cloudwatch.amazonaws.com"


def _attribute(name: str, request: dict[str, Any]) -> dynamodb.Attribute:
    kinds = {a["AttributeName"]: a["AttributeType"] for a in request["AttributeDefinitions"]}
    kind = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}[kinds[name]]
    return dynamodb.Attribute(name=name, type=kind)


def _key(schema: list[dict[str, str]], key_type: str) -> str:
    return next(k["AttributeName"] for k in schema if k["KeyType"] == key_type)


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: RunplaneConfig) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY

        self.key = kms.Key(
            self,
            "Key",
            alias=f"alias/{config.prefix}",
            description="Runplane: envelope encryption of run artifacts and state, alarms",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        account = Stack.of(self).account
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmDelivery",
                principals=[iam.ServicePrincipal(ALARM_SERVICE)],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            )
        )

        request = definition.create_table_request(config.prefix)
        schema = request["KeySchema"]
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_attribute(_key(schema, "HASH"), request),
            sort_key=_attribute(_key(schema, "RANGE"), request),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=definition.time_to_live_request(config.prefix)[
                "TimeToLiveSpecification"
            ]["AttributeName"],
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=config.table_deletion_protection,
            # Items hold hashes, IDs and metadata; secrets and state live in artifacts,
            # which are envelope-encrypted under the customer-managed key.
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # The outbox relay reads new outbox items from the stream (events.py).
            stream=dynamodb.StreamViewType(request["StreamSpecification"]["StreamViewType"]),
            removal_policy=removal,
        )
        assert request["BillingMode"] == "PAY_PER_REQUEST"
        for index in request["GlobalSecondaryIndexes"]:
            self.table.add_global_secondary_index(
                index_name=index["IndexName"],
                partition_key=_attribute(_key(index["KeySchema"], "HASH"), request),
                sort_key=_attribute(_key(index["KeySchema"], "RANGE"), request),
                projection_type=dynamodb.ProjectionType(index["Projection"]["ProjectionType"]),
            )
        self.index_names = tuple(i["IndexName"] for i in request["GlobalSecondaryIndexes"])

        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(config.log_retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=removal,
        )
        acknowledge(
            self.access_logs,
            "AwsSolutions-S1",
            "This bucket receives the artifact bucket's server access logs; logging "
            "its own access would log the log deliveries.",
        )

        self.bucket = s3.Bucket(
            self,
            "Artifacts",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            # Every object is already AES-256-GCM ciphertext under a data key the
            # customer-managed key wraps (envelope encryption); SSE-S3 adds encryption at
            # rest without coupling presigned sandbox transfers to key permissions.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="artifacts/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                s3.LifecycleRule(
                    id="expire-abandoned-inbox-uploads",
                    prefix=INBOX_PREFIX,
                    expiration=INBOX_EXPIRY,
                ),
                s3.LifecycleRule(
                    id="expire-replaced-versions",
                    noncurrent_version_expiration=NONCURRENT_EXPIRY,
                    expired_object_delete_marker=True,
                ),
            ],
            removal_policy=removal,
        )

    @property
    def index_arns(self) -> list[str]:
        return [f"{self.table.table_arn}/index/{name}" for name in self.index_names]
