"""The table, the artifact bucket and the key, as the template declares them."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

from runplane.store import table as definition
from tests.infra.synth import Synthesized, ref


def _schema(entries: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(e["AttributeName"], e["KeyType"]) for e in entries]


def test_the_table_is_the_stores_definition(stack: Synthesized) -> None:
    # Given the store's table definition (what the embedded stack creates)
    expected = definition.create_table_request("any")
    _, table = stack.one("AWS::DynamoDB::Table")
    # Then keys, attribute types, billing and every index are the same
    assert _schema(table["KeySchema"]) == _schema(expected["KeySchema"])
    assert sorted(map(tuple, (a.values() for a in table["AttributeDefinitions"]))) == sorted(
        map(tuple, (a.values() for a in expected["AttributeDefinitions"]))
    )
    assert table["BillingMode"] == expected["BillingMode"]
    indexes = {
        i["IndexName"]: (_schema(i["KeySchema"]), i["Projection"])
        for i in table["GlobalSecondaryIndexes"]
    }
    assert indexes == {
        i["IndexName"]: (_schema(i["KeySchema"]), i["Projection"])
        for i in expected["GlobalSecondaryIndexes"]
    }
    assert {i.name for i in definition.GLOBAL_INDEXES} == set(indexes)
    # And items expire on the same TTL attribute
    ttl = definition.time_to_live_request("any")["TimeToLiveSpecification"]
    assert table["TimeToLiveSpecification"] == ttl
    assert ttl["AttributeName"] == definition.TTL_ATTRIBUTE


def test_the_table_is_recoverable_and_protected(stack: Synthesized) -> None:
    logical_id, table = stack.one("AWS::DynamoDB::Table")
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["DeletionProtectionEnabled"] is True
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert stack.resources[logical_id]["DeletionPolicy"] == "Retain"


def test_table_protection_follows_the_context(custom_stack: Synthesized) -> None:
    # Given tableDeletionProtection=false and retainData=false
    logical_id, table = custom_stack.one("AWS::DynamoDB::Table")
    assert table["DeletionProtectionEnabled"] is False
    assert custom_stack.resources[logical_id]["DeletionPolicy"] == "Delete"


def _artifact_bucket(stack: Synthesized) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, p) for k, p in stack.of_type("AWS::S3::Bucket").items() if "LoggingConfiguration" in p
    ]
    return found


def test_the_artifact_bucket_is_private_versioned_and_logged(stack: Synthesized) -> None:
    logical_id, bucket = _artifact_bucket(stack)
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    (encryption,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    # Server access logs go to the other bucket, which keeps them for the log retention
    target = ref(bucket["LoggingConfiguration"]["DestinationBucketName"])
    assert target is not None
    logs = stack.of_type("AWS::S3::Bucket")[target]
    (expiry,) = [r for r in logs["LifecycleConfiguration"]["Rules"] if "ExpirationInDays" in r]
    assert expiry["ExpirationInDays"] == stack.config.log_retention_days
    assert stack.resources[logical_id]["DeletionPolicy"] == "Retain"


def test_abandoned_uploads_and_replaced_versions_expire(stack: Synthesized) -> None:
    _, bucket = _artifact_bucket(stack)
    rules = {r["Id"]: r for r in bucket["LifecycleConfiguration"]["Rules"]}
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 1
    }
    assert rules["expire-abandoned-inbox-uploads"]["Prefix"] == "inbox/"
    assert rules["expire-abandoned-inbox-uploads"]["ExpirationInDays"] == 1
    assert "NoncurrentVersionExpiration" in rules["expire-replaced-versions"]
    # Nothing expires current artifacts: runs and state versions refer to them
    assert all(r.get("Prefix") == "inbox/" for r in rules.values() if "ExpirationInDays" in r)


def test_both_buckets_refuse_anything_but_tls_1_2(stack: Synthesized) -> None:
    for bucket in stack.of_type("AWS::S3::Bucket"):
        (policy,) = [
            p for p in stack.of_type("AWS::S3::BucketPolicy").values() if ref(p["Bucket"]) == bucket
        ]
        denials = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        conditions = [s["Condition"] for s in denials if s["Principal"] == {"AWS": "*"}]
        assert {"Bool": {"aws:SecureTransport": "false"}} in conditions
        assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in conditions
        # And no statement opens the bucket to anyone
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Allow":
                assert statement["Principal"] != {"AWS": "*"}


def test_the_key_rotates_and_serves_only_this_account(stack: Synthesized) -> None:
    stack.assertions.has_resource_properties(
        "AWS::KMS::Key", {"EnableKeyRotation": True, "KeyPolicy": Match.any_value()}
    )
    _, key = stack.data_key()
    for statement in key["KeyPolicy"]["Statement"]:
        principal = statement["Principal"]
        assert principal != "*"
        assert principal != {"AWS": "*"}
        services = principal.get("Service")
        if services is None:
            continue
        # Services may only use the key for the alarm topic and its dead-letter queue
        services = services if isinstance(services, list) else [services]
        assert set(services) <= {"cloudwatch.amazonaws.com", "events.amazonaws.com"}
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        assert set(actions) <= {"kms:Decrypt", "kms:GenerateDataKey", "kms:GenerateDataKey*"}


def test_functions_are_pointed_at_the_key_they_may_use(stack: Synthesized) -> None:
    key, _ = stack.data_key()
    for handler in stack.functions():
        env = stack.environment(handler)
        if "RUNPLANE_KMS_KEY_ID" in env:
            assert env["RUNPLANE_KMS_KEY_ID"] == {"Fn::GetAtt": [key, "Arn"]}
