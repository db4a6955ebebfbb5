"""The embedded stack's moto speedups change no reply (``runplane.local.moto_speedups``).

With replies checked, every fast reply is compared with the one moto's own serializer
builds for the same result; a difference raises inside moto and fails the request.
The workload covers every data-plane action the store sends, binary and nested
values, empty results, conditional refusals and the stream the relay reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import requests
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from runplane.local import moto_inprocess, moto_speedups
from runplane.local.stack import free_port
from runplane.store.provision import create_table

TABLE = "speedups"


@dataclass
class Moto:
    dynamodb: Any
    streams: Any


@pytest.fixture
def moto() -> Iterator[Moto]:
    """moto's HTTP server, as the embedded stack runs it (streams are served only there)."""
    moto_speedups.install()
    moto_speedups.check_replies(True)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{server._port}"
    try:
        session = boto3.session.Session(region_name="us-east-1")
        dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        create_table(dynamodb, TABLE)
        yield Moto(dynamodb, session.client("dynamodbstreams", endpoint_url=endpoint))
    finally:
        moto_speedups.check_replies(False)
        # moto's backends are the process's: leave none of this test's tables behind.
        requests.post(f"{endpoint}/moto-api/reset", timeout=30)
        server.stop()


def _item(pk: str, sk: str, **extra: Any) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}, **extra}


def test_data_plane_replies_equal_motos_own(moto: Moto) -> None:
    # Given items with every attribute type the store writes, binary among them
    client = moto.dynamodb
    nested = {
        "M": {"list": {"L": [{"N": "1"}, {"S": "two"}, {"BOOL": True}]}, "gone": {"NULL": True}}
    }
    client.put_item(
        TableName=TABLE,
        Item=_item("RUN#1", "RUN", blob={"B": b"\x00\xffkey"}, nested=nested, n={"N": "7"}),
    )
    client.put_item(
        TableName=TABLE,
        Item=_item("RUN#1", "PART#a", tags={"SS": ["x", "y"]}, blobs={"BS": [b"a", b"b"]}),
    )

    # When each data-plane action runs (the check raises inside moto on a difference)
    got = client.get_item(TableName=TABLE, Key=_item("RUN#1", "RUN"), ConsistentRead=True)
    missing = client.get_item(TableName=TABLE, Key=_item("RUN#9", "RUN"))
    batch = client.batch_get_item(
        RequestItems={
            TABLE: {"Keys": [_item("RUN#1", "RUN"), _item("RUN#1", "PART#a"), _item("X", "Y")]}
        }
    )
    queried = client.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": "RUN#1"}},
        Limit=1,
    )
    scanned = client.scan(TableName=TABLE)
    updated = client.update_item(
        TableName=TABLE,
        Key=_item("RUN#1", "RUN"),
        UpdateExpression="SET n = n + :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": _item("RUN#2", "RUN")}},
            {"Delete": {"TableName": TABLE, "Key": _item("RUN#1", "PART#a")}},
        ]
    )
    with pytest.raises(ClientError) as refused:
        client.put_item(
            TableName=TABLE,
            Item=_item("RUN#2", "RUN"),
            ConditionExpression="attribute_not_exists(PK)",
        )
    deleted = client.delete_item(TableName=TABLE, Key=_item("RUN#2", "RUN"), ReturnValues="ALL_OLD")

    # Then the replies are what the store expects, values intact
    assert got["Item"]["blob"] == {"B": b"\x00\xffkey"}
    assert got["Item"]["nested"] == nested
    assert "Item" not in missing
    assert len(batch["Responses"][TABLE]) == 2
    assert batch["UnprocessedKeys"] == {}
    assert queried["Count"] == 1
    assert "LastEvaluatedKey" in queried
    assert scanned["Count"] == 2
    assert updated["Attributes"]["n"] == {"N": "8"}
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert deleted["Attributes"]["PK"] == {"S": "RUN#2"}


def test_stream_records_equal_motos_own(moto: Moto) -> None:
    # Given a table whose stream has a record of an item with a binary value
    client = moto.dynamodb
    client.put_item(TableName=TABLE, Item=_item("EVENT#1", "EVENT", body={"B": b"\x01\x02"}))
    arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    streams = moto.streams
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]

    # When the relay's reads run
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]

    # Then the record carries the image and its creation time as moto would send them
    assert records[0]["eventName"] == "INSERT"
    assert records[0]["dynamodb"]["NewImage"]["body"] == {"B": b"\x01\x02"}
    assert records[0]["dynamodb"]["ApproximateCreationDateTime"].year >= 2024


def test_a_reply_that_differs_from_motos_is_reported() -> None:
    # Given moto's reply and a fast one that lost a value
    expected = (200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps({"Count": 1}))
    different = (200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps({"Count": 2}))

    # When they are compared, then the difference is reported with the action
    with pytest.raises(moto_speedups.ReplyMismatch, match="Query"):
        moto_speedups._compare(expected, different, "Query")


def test_an_asl_definition_is_parsed_once_and_each_execution_gets_its_own_program() -> None:
    # Given the speedups and a definition
    moto_speedups.install()
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})

    # When it is parsed twice
    first_program, first_tree = AmazonStateLanguageParser.parse(definition)
    second_program, second_tree = AmazonStateLanguageParser.parse(definition)

    # Then the tree is shared and the evaluation components are not
    assert first_tree is second_tree
    assert first_program is not second_program


def test_the_stacks_json_requests_reach_moto_without_a_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given moto's server, with this process's JSON-protocol requests served in process
    import socketserver

    connections: list[object] = []
    accept = socketserver.ThreadingMixIn.process_request

    def counted(self: Any, request: Any, address: Any) -> None:
        connections.append(address)
        accept(self, request, address)

    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request", counted)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{server._port}"
    assert server._server is not None
    moto_inprocess.serve_in_process(endpoint, server._server.app)
    try:
        session = boto3.session.Session(region_name="us-east-1")
        dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        kms = session.client("kms", endpoint_url=endpoint)
        s3 = session.client("s3", endpoint_url=endpoint)

        # When DynamoDB and KMS are called, a conditional write refused among them
        create_table(dynamodb, TABLE)
        dynamodb.put_item(TableName=TABLE, Item=_item("A", "B", blob={"B": b"\x00"}))
        with pytest.raises(ClientError) as refused:
            dynamodb.put_item(
                TableName=TABLE,
                Item=_item("A", "B"),
                ConditionExpression="attribute_not_exists(PK)",
            )
        got = dynamodb.get_item(TableName=TABLE, Key=_item("A", "B"), ConsistentRead=True)
        key = kms.create_key()["KeyMetadata"]["KeyId"]
        sealed = kms.encrypt(KeyId=key, Plaintext=b"secret")["CiphertextBlob"]
        opened = kms.decrypt(CiphertextBlob=sealed)["Plaintext"]
        served_in_process = len(connections)

        # And S3, which the sandboxes reach by URL, is called
        s3.create_bucket(Bucket="speedups")

        # Then none of the JSON requests opened a connection, and their replies and
        # errors are moto's; S3 still went over HTTP
        assert served_in_process == 0
        assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert got["Item"]["blob"] == {"B": b"\x00"}
        assert opened == b"secret"
        assert len(connections) == 1
    finally:
        moto_inprocess.stop_serving(endpoint)
        requests.post(f"{endpoint}/moto-api/reset", timeout=30)
        server.stop()


def test_comparable_values_are_motos_for_every_attribute_type() -> None:
    # Given the speedups
    moto_speedups.install()
    from decimal import Decimal

    from moto.dynamodb.models.dynamo_type import DynamoType

    # When each attribute type is made comparable, then it is what moto makes of it
    assert DynamoType({"S": "b"}).cast_value == "b"
    assert DynamoType({"N": "1.50"}).cast_value == Decimal("1.5")
    assert DynamoType({"B": "AAE="}).cast_value == "AAE="
    assert DynamoType({"BOOL": False}).cast_value is False
    assert DynamoType({"NULL": True}).cast_value is None
    assert DynamoType({"NS": ["1", "2"]}).cast_value == {Decimal(1), Decimal(2)}
    assert DynamoType({"L": [{"N": "3"}, {"S": "x"}]}).cast_value == [Decimal(3), "x"]
    assert DynamoType({"M": {"k": {"N": "4"}}}).cast_value == {"k": Decimal(4)}
    # And keys sort as moto sorts them
    assert DynamoType({"S": "QUEUED#a"}) < DynamoType({"S": "QUEUED#b"})
    assert DynamoType({"N": "9"}) < DynamoType({"N": "10"})


def test_a_query_reads_its_partition_in_order_and_an_index_query_the_whole_index(
    moto: Moto,
) -> None:
    # Given items in three partitions, each also listed in the index under one key
    client = moto.dynamodb
    for pk in ("A", "B", "C"):
        for n in (3, 1, 2):
            extra = {"GSI1PK": {"S": "ALL"}, "GSI1SK": {"S": f"{pk}{n}"}}
            client.put_item(TableName=TABLE, Item=_item(pk, f"SK#{n}", **extra))

    def keys(page: dict[str, Any]) -> list[str]:
        return [f"{i['PK']['S']}/{i['SK']['S']}" for i in page["Items"]]

    # When partition B is queried forwards, backwards, paged and by a range condition
    b = {":pk": {"S": "B"}}
    forwards = client.query(
        TableName=TABLE, KeyConditionExpression="PK = :pk", ExpressionAttributeValues=b
    )
    backwards = client.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues=b,
        ScanIndexForward=False,
    )
    first = client.query(
        TableName=TABLE, KeyConditionExpression="PK = :pk", ExpressionAttributeValues=b, Limit=1
    )
    rest = client.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues=b,
        ExclusiveStartKey=first["LastEvaluatedKey"],
    )
    above = client.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk AND SK > :sk",
        ExpressionAttributeValues={**b, ":sk": {"S": "SK#1"}},
    )
    index = client.query(
        TableName=TABLE,
        IndexName="GSI1",
        KeyConditionExpression="GSI1PK = :all",
        ExpressionAttributeValues={":all": {"S": "ALL"}},
    )
    scanned = client.scan(TableName=TABLE)

    # Then each reads exactly its partition, in key order, and the index and a scan see all
    assert keys(forwards) == ["B/SK#1", "B/SK#2", "B/SK#3"]
    assert keys(backwards) == ["B/SK#3", "B/SK#2", "B/SK#1"]
    assert keys(first) + keys(rest) == ["B/SK#1", "B/SK#2", "B/SK#3"]
    assert keys(above) == ["B/SK#2", "B/SK#3"]
    assert [i["GSI1SK"]["S"] for i in index["Items"]] == [
        f"{pk}{n}" for pk in "ABC" for n in (1, 2, 3)
    ]
    assert scanned["Count"] == 9
