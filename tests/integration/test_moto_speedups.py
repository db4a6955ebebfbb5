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

from runplane.local import moto_index_window, moto_inprocess, moto_query_window, moto_speedups
from runplane.local.stack import free_port
from runplane.store.provision import create_table
from tests.integration.server_connections import accepted_connections

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


def test_an_asl_definition_is_built_once_with_every_heap_key_drawn() -> None:
    # Given the speedups and a definition with a retried task
    moto_speedups.install()
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    retried = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": "f", "Payload.$": "$"},
        "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 2}],
        "End": True,
    }
    definition = json.dumps({"StartAt": "Task", "States": {"Task": retried}})

    # When it is parsed twice
    first_program, first_tree = AmazonStateLanguageParser.parse(definition)
    second_program, second_tree = AmazonStateLanguageParser.parse(definition)

    # Then both executions get the one program, whose components already hold the keys
    # under which each execution files its own values (a retry's attempt count among them)
    assert (first_program, first_tree) == (second_program, second_tree)
    components = moto_speedups._eval_components(first_program)
    retries = [c for c in components if type(c).__name__ == "MaxAttemptsDecl"]
    assert retries
    assert all(c._EvalComponent__heap_key for c in components)


def test_a_json_path_is_compiled_once() -> None:
    # Given the speedups
    moto_speedups.install()
    from moto.stepfunctions.parser.asl.utils import json_path

    # When one path is extracted from two inputs
    values = [json_path.extract_json("$.run.id", {"run": {"id": n}}) for n in (1, 2)]

    # Then each input gave its own value, from the one compiled path
    assert values == [1, 2]
    compile_path = getattr(json_path, "parse")  # noqa: B009 (not exported to type checkers)
    assert compile_path("$.run.id") is compile_path("$.run.id")


def test_an_expression_text_is_parsed_once_and_each_write_applies_its_own_values(
    moto: Moto,
) -> None:
    # Given two items, and one update with one condition text for both
    for pk in ("a", "b"):
        moto.dynamodb.put_item(TableName=TABLE, Item=_item(pk, "x", n={"N": "1"}))
    update: dict[str, Any] = {
        "UpdateExpression": "SET n = n + :step, #s = :state",
        "ConditionExpression": "attribute_exists(PK) AND n < :limit",
        "ExpressionAttributeNames": {"#s": "state"},
    }

    # When each is updated with its own values, the first twice, in a transaction and alone
    def values(step: str, state: str, limit: str = "10") -> dict[str, Any]:
        return {":step": {"N": step}, ":state": {"S": state}, ":limit": {"N": limit}}

    moto.dynamodb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": _item("a", "x"),
                    **update,
                    "ExpressionAttributeValues": values("2", "first"),
                }
            },
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": _item("b", "x"),
                    **update,
                    "ExpressionAttributeValues": values("5", "second"),
                }
            },
        ]
    )
    moto.dynamodb.update_item(
        TableName=TABLE,
        Key=_item("a", "x"),
        **update,
        ExpressionAttributeValues=values("3", "again"),
    )
    # And a write whose condition no longer holds is refused
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        moto.dynamodb.update_item(
            TableName=TABLE,
            Key=_item("b", "x"),
            **update,
            ExpressionAttributeValues=values("1", "never", limit="6"),
        )

    # Then every write applied its own values to its own item
    def read(pk: str) -> tuple[str, str]:
        item = moto.dynamodb.get_item(TableName=TABLE, Key=_item(pk, "x"))["Item"]
        return item["n"]["N"], item["state"]["S"]

    assert read("a") == ("6", "again")
    assert read("b") == ("6", "second")
    # And each text was parsed once, into what is only read afterwards
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing import expressions

    make = getattr(expressions, "UpdateExpressionParser").make  # noqa: B009 (untyped)
    assert make(update["UpdateExpression"]) is make(update["UpdateExpression"])
    condition = update["ConditionExpression"]
    lexed = [
        ConditionExpressionParser(condition, None, None)._lex_condition_expression()
        for _ in range(2)
    ]
    assert lexed[0] == lexed[1]
    assert all(a is b for a, b in zip(*lexed, strict=True))


def test_the_stacks_json_requests_reach_moto_without_a_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given moto's server, with this process's JSON-protocol requests served in process
    connections = accepted_connections(monkeypatch)
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

        # And S3 is called by this process, then by URL, as a sandbox calls it
        s3.create_bucket(Bucket="speedups")
        s3.put_object(Bucket="speedups", Key="a", Body=b"object")
        by_url = requests.get(
            s3.generate_presigned_url("get_object", {"Bucket": "speedups", "Key": "a"}),
            timeout=30,
        )

        # Then none of this process's requests opened a connection, and their replies
        # and errors are moto's; only the transfer by URL went over HTTP
        assert served_in_process == 0
        assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert got["Item"]["blob"] == {"B": b"\x00"}
        assert opened == b"secret"
        assert by_url.content == b"object"
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


NUMBERS = "numbers"

# Key conditions on the range key, as (expression, values); each is also run reversed,
# with a filter, and paged at several limits.
_STRING_CONDITIONS = [
    ("PK = :pk", {}),
    ("PK = :pk AND SK = :a", {":a": {"S": "WAIT#0005"}}),
    ("PK = :pk AND SK = :a", {":a": {"S": "WAIT#0004x"}}),
    ("PK = :pk AND SK < :a", {":a": {"S": "WAIT#0005"}}),
    ("PK = :pk AND SK <= :a", {":a": {"S": "WAIT#0005"}}),
    ("PK = :pk AND SK > :a", {":a": {"S": "WAIT#0005"}}),
    ("PK = :pk AND SK >= :a", {":a": {"S": "WAIT#0005"}}),
    ("PK = :pk AND SK BETWEEN :a AND :b", {":a": {"S": "QUEUED#"}, ":b": {"S": "WAIT#0003"}}),
    ("PK = :pk AND SK BETWEEN :a AND :b", {":a": {"S": "WAIT#0009"}, ":b": {"S": "WAIT#0002"}}),
    ("PK = :pk AND begins_with(SK, :a)", {":a": {"S": "WAIT#"}}),
    ("PK = :pk AND begins_with(SK, :a)", {":a": {"S": "QUEUED#"}}),
    ("PK = :pk AND begins_with(SK, :a)", {":a": {"S": "NONE#"}}),
]
_NUMBER_CONDITIONS = [
    ("PK = :pk", {}),
    ("PK = :pk AND N = :a", {":a": {"N": "9"}}),
    ("PK = :pk AND N < :a", {":a": {"N": "10"}}),
    ("PK = :pk AND N <= :a", {":a": {"N": "10.0"}}),
    ("PK = :pk AND N > :a", {":a": {"N": "-2.5"}}),
    ("PK = :pk AND N >= :a", {":a": {"N": "100"}}),
    ("PK = :pk AND N BETWEEN :a AND :b", {":a": {"N": "-1"}, ":b": {"N": "20"}}),
]


def _numbers_table(client: Any) -> None:
    client.create_table(
        TableName=NUMBERS,
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "N", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "N", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _every_page(client: Any, **query: Any) -> list[dict[str, Any]]:
    """Each page of a query, following LastEvaluatedKey (moto's own path runs beside
    each one while replies are checked, and a difference fails the request)."""
    pages = [client.query(**query)]
    while "LastEvaluatedKey" in pages[-1]:
        pages.append(client.query(**query, ExclusiveStartKey=pages[-1]["LastEvaluatedKey"]))
        assert len(pages) < 100
    return pages


def _run_every_query(
    client: Any, table: str, partition: str, conditions: list[tuple[str, dict[str, Any]]]
) -> dict[tuple[int, bool, int | None, bool], list[dict[str, Any]]]:
    """Every page of each condition, by (condition, forwards, limit, filtered)."""
    runs = {}
    for at, (expression, values) in enumerate(conditions):
        for forward in (True, False):
            for limit in (None, 1, 2, 5):
                for filtered in (False, True):
                    query: dict[str, Any] = {
                        "TableName": table,
                        "KeyConditionExpression": expression,
                        "ExpressionAttributeValues": {":pk": {"S": partition}, **values},
                        "ScanIndexForward": forward,
                        "ConsistentRead": True,
                    }
                    if limit is not None:
                        query["Limit"] = limit
                    if filtered:
                        query["FilterExpression"] = "attribute_exists(odd)"
                    runs[at, forward, limit, filtered] = _every_page(client, **query)
    return runs


def _keys(pages: list[dict[str, Any]], range_key: str = "SK") -> list[str]:
    return [next(iter(i[range_key].values())) for page in pages for i in page["Items"]]


def test_a_partitions_queries_answer_as_moto_does_through_every_kind_of_write(
    moto: Moto,
) -> None:
    # Given a queue's partition (place and waiter items) among other partitions
    client = moto.dynamodb
    for n in range(10):
        odd = {"odd": {"BOOL": True}} if n % 2 else {}
        client.put_item(TableName=TABLE, Item=_item("WS#q", f"WAIT#{n:04}", **odd))
        client.put_item(TableName=TABLE, Item=_item("WS#q", f"QUEUED#{n:04}"))
        client.put_item(TableName=TABLE, Item=_item("WS#other", f"WAIT#{n:04}"))
    client.put_item(TableName=TABLE, Item=_item("WS#q", "WORKSPACE"))
    first = _run_every_query(client, TABLE, "WS#q", _STRING_CONDITIONS)

    # When the partition changes through every kind of write, its order already kept
    client.put_item(TableName=TABLE, Item=_item("WS#q", "WAIT#0004x", odd={"BOOL": True}))
    client.put_item(TableName=TABLE, Item=_item("WS#q", "WAIT#0003", odd={"BOOL": True}))
    client.delete_item(TableName=TABLE, Key=_item("WS#q", "WAIT#0000"))
    client.update_item(
        TableName=TABLE,
        Key=_item("WS#q", "WAIT#0010"),
        UpdateExpression="SET odd = :t",
        ExpressionAttributeValues={":t": {"BOOL": True}},
    )
    client.batch_write_item(
        RequestItems={
            TABLE: [
                {"PutRequest": {"Item": _item("WS#q", "WAIT#0011")}},
                {"DeleteRequest": {"Key": _item("WS#q", "QUEUED#0001")}},
            ]
        }
    )
    client.transact_write_items(
        TransactItems=[
            {"Delete": {"TableName": TABLE, "Key": _item("WS#q", "WAIT#0001")}},
            {"Delete": {"TableName": TABLE, "Key": _item("WS#q", "QUEUED#0000")}},
            {"Put": {"TableName": TABLE, "Item": _item("WS#q", "WAIT#0012")}},
        ]
    )
    with pytest.raises(ClientError) as cancelled:
        client.transact_write_items(
            TransactItems=[
                {"Delete": {"TableName": TABLE, "Key": _item("WS#q", "WAIT#0002")}},
                {"Put": {"TableName": TABLE, "Item": _item("WS#q", "WAIT#0013")}},
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": _item("WS#q", "WORKSPACE"),
                        "ConditionExpression": "attribute_not_exists(PK)",
                    }
                },
            ]
        )
    after = _run_every_query(client, TABLE, "WS#q", _STRING_CONDITIONS)

    # Then every query, page and order matched moto's own path (checked per request),
    # and the answers are the partition's as the writes left it
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _keys(first[0, True, None, False]) == sorted(
        [f"WAIT#{n:04}" for n in range(10)] + [f"QUEUED#{n:04}" for n in range(10)] + ["WORKSPACE"]
    )
    whole, waiters = after[0, True, None, False], after[9, True, 1, False]
    assert waiters[0]["Items"][0]["SK"] == {"S": "WAIT#0002"}
    assert _keys(waiters) == [
        "WAIT#0002",
        "WAIT#0003",
        "WAIT#0004",
        "WAIT#0004x",
        *[f"WAIT#{n:04}" for n in range(5, 13)],
    ]
    assert _keys(after[0, False, 2, False]) == list(reversed(_keys(whole)))
    assert "QUEUED#0000" not in _keys(whole)
    assert "QUEUED#0001" not in _keys(whole)


def test_numeric_range_keys_answer_as_moto_does(moto: Moto) -> None:
    # Given a partition keyed by numbers, some of which sort apart as strings
    client = moto.dynamodb
    _numbers_table(client)
    for n in ("-3", "-2.5", "0", "1", "2", "9", "10", "10.5", "100", "1e3"):
        odd = {"odd": {"BOOL": True}} if n in {"-2.5", "9", "100"} else {}
        client.put_item(TableName=NUMBERS, Item={"PK": {"S": "P"}, "N": {"N": n}, **odd})
        client.put_item(TableName=NUMBERS, Item={"PK": {"S": "Q"}, "N": {"N": n}})

    # When every query runs (and again after a delete and a put)
    first = _run_every_query(client, NUMBERS, "P", _NUMBER_CONDITIONS)
    client.delete_item(TableName=NUMBERS, Key={"PK": {"S": "P"}, "N": {"N": "9"}})
    client.put_item(TableName=NUMBERS, Item={"PK": {"S": "P"}, "N": {"N": "9.5"}})
    after = _run_every_query(client, NUMBERS, "P", _NUMBER_CONDITIONS)

    # Then each matched moto's own path, in numeric order
    numbers = ["-3", "-2.5", "0", "1", "2", "9", "10", "10.5", "100", "1e3"]
    assert _keys(first[0, True, None, False], "N") == numbers
    assert _keys(after[0, True, None, False], "N") == [n if n != "9" else "9.5" for n in numbers]


def test_a_query_that_differs_from_motos_path_is_reported(moto: Moto) -> None:
    # Given a partition whose kept order has lost a key (as a missed write would)
    client = moto.dynamodb
    for sk in ("A", "B", "C"):
        client.put_item(TableName=TABLE, Item=_item("P", sk))
    query = {
        "TableName": TABLE,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": "P"}},
    }
    client.query(**query)
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    table = dynamodb_backends["123456789012"]["us-east-1"].tables[TABLE]
    partition = table.items[DynamoType({"S": "P"})]
    assert isinstance(partition, moto_query_window.SortedPartition)
    partition.sorted_keys().pop(1)

    # When it is queried with replies checked, then the difference is reported
    with pytest.raises(moto_speedups.ReplyMismatch, match="Query"):
        # (moto types its limit and start key as required; it takes None for neither)
        table.query(DynamoType({"S": "P"}), None, [], None, None, True, None)  # type: ignore[arg-type]
    with pytest.raises(ClientError) as failed:
        client.query(**query)
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def _comparisons_to_read_the_head(waiting: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many key comparisons moto makes to answer a queue's head, ``waiting`` long."""
    from moto import mock_aws
    from moto.dynamodb.models.dynamo_type import DynamoType

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        for n in range(waiting):
            client.put_item(TableName=TABLE, Item=_item("WS#q", f"WAIT#{n:06}"))
            client.put_item(TableName=TABLE, Item=_item("WS#q", f"QUEUED#{n:06}"))
        head: dict[str, Any] = {
            "TableName": TABLE,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :w)",
            "ExpressionAttributeValues": {":pk": {"S": "WS#q"}, ":w": {"S": "WAIT#"}},
            "ConsistentRead": True,
            "Limit": 1,
        }
        client.query(**head)
        client.delete_item(TableName=TABLE, Key=_item("WS#q", "WAIT#000000"))
        counted = [0]
        with monkeypatch.context() as patch:
            for name in ("__lt__", "__eq__"):
                compare = getattr(DynamoType, name)

                def counting(a: Any, b: Any, compare: Any = compare) -> Any:
                    counted[0] += 1
                    return compare(a, b)

                patch.setattr(DynamoType, name, counting)
            found = client.query(**head)
        assert [i["SK"]["S"] for i in found["Items"]] == ["WAIT#000001"]
        return counted[0]


def test_the_head_of_a_long_queue_is_read_without_visiting_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the speedups, and a queue of 10 and one of 1,000 (waiter and place items)
    moto_speedups.install()

    # When the head of each is read, after a waiter has left
    short = _comparisons_to_read_the_head(10, monkeypatch)
    long = _comparisons_to_read_the_head(1000, monkeypatch)

    # Then the longer queue costs a few more comparisons (a binary search), not a
    # walk of the queue (moto's own path sorts all 2,000 items)
    assert long - short <= 40
    assert long < 100


def _index_conditions() -> list[tuple[str, dict[str, Any]]]:
    """The range key conditions above, on the index's keys."""
    return [
        (expression.replace("PK =", "GSI1PK =").replace("SK", "GSI1SK"), values)
        for expression, values in _STRING_CONDITIONS
    ]


def _run_every_index_query(
    client: Any, partition: str
) -> dict[tuple[int, bool, int | None, bool], list[dict[str, Any]]]:
    runs = {}
    for at, (expression, values) in enumerate(_index_conditions()):
        for forward in (True, False):
            for limit in (None, 1, 2, 5):
                for filtered in (False, True):
                    query: dict[str, Any] = {
                        "TableName": TABLE,
                        "IndexName": "GSI1",
                        "KeyConditionExpression": expression,
                        "ExpressionAttributeValues": {":pk": {"S": partition}, **values},
                        "ScanIndexForward": forward,
                    }
                    if limit is not None:
                        query["Limit"] = limit
                    if filtered:
                        query["FilterExpression"] = "attribute_exists(odd)"
                    runs[at, forward, limit, filtered] = _every_page(client, **query)
    return runs


def _indexed(pk: str, sk: str, partition: str, sort: str, **extra: Any) -> dict[str, Any]:
    return _item(pk, sk, GSI1PK={"S": partition}, GSI1SK={"S": sort}, **extra)


def _set_index_keys(partition: str, sort: str) -> dict[str, Any]:
    return {
        "UpdateExpression": "SET GSI1PK = :p, GSI1SK = :s",
        "ExpressionAttributeValues": {":p": {"S": partition}, ":s": {"S": sort}},
    }


def test_index_queries_answer_as_moto_does_through_every_kind_of_write(moto: Moto) -> None:
    # Given an index partition (a workspace's runs and waiters, some sort keys shared by
    # several items) beside another partition and items outside the index
    client = moto.dynamodb
    for n in range(10):
        odd = {"odd": {"BOOL": True}} if n % 2 else {}
        client.put_item(
            TableName=TABLE, Item=_indexed(f"RUN#{n}", "RUN", "WS#q", f"WAIT#{n:04}", **odd)
        )
        client.put_item(
            TableName=TABLE, Item=_indexed(f"RUN#{n}", "PART", "WS#q", f"QUEUED#{n // 3:04}")
        )
        client.put_item(TableName=TABLE, Item=_indexed(f"RUN#{n}", "X", "WS#other", f"WAIT#{n:04}"))
        client.put_item(TableName=TABLE, Item=_item(f"RUN#{n}", "PLAIN"))
    first = _run_every_index_query(client, "WS#q")

    # When the partition changes through every kind of write, its index already built:
    # puts (new and overwriting), updates that move an item within it, out of it and
    # into it, drop its index key or create the item, a delete, a batch, a transaction,
    # and a cancelled transaction whose update had already moved an item
    client.put_item(
        TableName=TABLE, Item=_indexed("RUN#a", "RUN", "WS#q", "WAIT#0004x", odd={"BOOL": True})
    )
    client.put_item(
        TableName=TABLE, Item=_indexed("RUN#3", "RUN", "WS#q", "WAIT#0003", odd={"BOOL": True})
    )
    client.put_item(TableName=TABLE, Item=_indexed("RUN#4", "RUN", "WS#other", "WAIT#0004"))
    client.update_item(
        TableName=TABLE, Key=_item("RUN#5", "RUN"), **_set_index_keys("WS#q", "WAIT#0000")
    )
    client.update_item(
        TableName=TABLE, Key=_item("RUN#6", "RUN"), **_set_index_keys("WS#other", "A")
    )
    client.update_item(
        TableName=TABLE, Key=_item("RUN#6", "X"), **_set_index_keys("WS#q", "WAIT#0006")
    )
    client.update_item(TableName=TABLE, Key=_item("RUN#7", "RUN"), UpdateExpression="REMOVE GSI1SK")
    client.update_item(
        TableName=TABLE, Key=_item("RUN#b", "RUN"), **_set_index_keys("WS#q", "WAIT#0011")
    )
    client.delete_item(TableName=TABLE, Key=_item("RUN#0", "RUN"))
    client.batch_write_item(
        RequestItems={
            TABLE: [
                {"PutRequest": {"Item": _indexed("RUN#c", "RUN", "WS#q", "QUEUED#0001")}},
                {"DeleteRequest": {"Key": _item("RUN#1", "PART")}},
            ]
        }
    )
    client.transact_write_items(
        TransactItems=[
            {"Delete": {"TableName": TABLE, "Key": _item("RUN#2", "PART")}},
            {"Put": {"TableName": TABLE, "Item": _indexed("RUN#d", "RUN", "WS#q", "WAIT#0012")}},
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": _item("RUN#8", "RUN"),
                    **_set_index_keys("WS#q", "QUEUED#0002"),
                }
            },
        ]
    )
    with pytest.raises(ClientError) as cancelled:
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _item("RUN#9", "RUN"),
                        **_set_index_keys("WS#other", "Z"),
                    }
                },
                {"Delete": {"TableName": TABLE, "Key": _item("RUN#3", "PART")}},
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": _item("RUN#1", "PLAIN"),
                        "ConditionExpression": "attribute_not_exists(PK)",
                    }
                },
            ]
        )
    after = _run_every_index_query(client, "WS#q")
    elsewhere = _run_every_index_query(client, "WS#other")

    # Then every query, page and order matched moto's own path (checked per request),
    # and the answers are the partition's as the writes left it
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert len(_keys(first[0, True, None, False], "GSI1SK")) == 20
    waiters = _keys(after[9, True, 1, False], "GSI1SK")
    assert waiters == [
        "WAIT#0000",
        "WAIT#0001",
        "WAIT#0002",
        "WAIT#0003",
        "WAIT#0004x",
        "WAIT#0006",
        "WAIT#0009",
        "WAIT#0011",
        "WAIT#0012",
    ]
    queued = [
        (item["GSI1SK"]["S"], item["PK"]["S"], item["SK"]["S"])
        for page in after[10, False, 2, False]
        for item in page["Items"]
    ]
    assert [sort for sort, _, _ in queued] == ["QUEUED#0003"] + ["QUEUED#0002"] * 4 + [
        "QUEUED#0001"
    ] * 4 + ["QUEUED#0000"]
    # (items sharing an index sort key follow in the table's key order, here reversed)
    assert queued[1:5] == [
        ("QUEUED#0002", "RUN#8", "RUN"),
        ("QUEUED#0002", "RUN#8", "PART"),
        ("QUEUED#0002", "RUN#7", "PART"),
        ("QUEUED#0002", "RUN#6", "PART"),
    ]
    assert "A" in _keys(elsewhere[0, True, None, False], "GSI1SK")
    assert "Z" not in _keys(elsewhere[0, True, None, False], "GSI1SK")


def test_an_index_query_that_differs_from_motos_path_is_reported(moto: Moto) -> None:
    # Given an index partition whose kept entries have lost one (as a missed write would)
    client = moto.dynamodb
    for sk in ("A", "B", "C"):
        client.put_item(TableName=TABLE, Item=_indexed(f"RUN#{sk}", "RUN", "WS#q", sk))
    query = {
        "TableName": TABLE,
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": "WS#q"}},
    }
    client.query(**query)
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    table = dynamodb_backends["123456789012"]["us-east-1"].tables[TABLE]
    index = moto_index_window._indexes(table)
    assert index is not None
    index.by_name["GSI1"].partitions[DynamoType({"S": "WS#q"})].entries.pop(1)

    # When it is queried with replies checked, then the difference is reported
    with pytest.raises(ClientError) as failed:
        client.query(**query)
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def _comparisons_to_read_the_newest(runs: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many key comparisons moto makes to answer a workspace's newest run, with
    ``runs`` runs in the table (half of them the workspace's)."""
    from moto import mock_aws
    from moto.dynamodb.models.dynamo_type import DynamoType

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        for n in range(runs):
            workspace = "WS#a" if n % 2 else "WS#b"
            client.put_item(
                TableName=TABLE, Item=_indexed(f"RUN#{n:06}", "RUN", workspace, f"{n:06}")
            )
            client.put_item(TableName=TABLE, Item=_item(f"RUN#{n:06}", "PART"))
        newest: dict[str, Any] = {
            "TableName": TABLE,
            "IndexName": "GSI1",
            "KeyConditionExpression": "GSI1PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": "WS#a"}},
            "ScanIndexForward": False,
            "Limit": 1,
        }
        client.query(**newest)
        client.put_item(TableName=TABLE, Item=_indexed("RUN#new", "RUN", "WS#a", "999999"))
        counted = [0]
        with monkeypatch.context() as patch:
            for name in ("__lt__", "__eq__", "__ne__"):
                compare = getattr(DynamoType, name)

                def counting(a: Any, b: Any, compare: Any = compare) -> Any:
                    counted[0] += 1
                    return compare(a, b)

                patch.setattr(DynamoType, name, counting)
            found = client.query(**newest)
        assert [i["PK"]["S"] for i in found["Items"]] == ["RUN#new"]
        return counted[0]


def test_a_workspaces_newest_run_is_read_without_visiting_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the speedups, and tables of 20 and of 2,000 runs
    moto_speedups.install()

    # When a workspace's newest run is read from the index, after a run was added
    short = _comparisons_to_read_the_newest(20, monkeypatch)
    long = _comparisons_to_read_the_newest(2000, monkeypatch)

    # Then the bigger table costs no more comparisons (moto's own path sorts all 4,000
    # items and compares each one's index key)
    assert long == short
    assert long < 50
