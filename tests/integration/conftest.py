from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest
from moto import mock_aws

from runplane.domain.entities import Organization, Workspace
from runplane.local.moto_serial import serialize_requests
from runplane.services.lifecycle import RunLifecycle
from runplane.services.tenancy import Tenancy
from runplane.store import models
from runplane.store.provision import create_table
from tests.fakes import FakeClock, SeededIds

TABLE = "runplane-test"


@dataclass
class Stack:
    clock: FakeClock
    ids: SeededIds
    tenancy: Tenancy
    lifecycle: RunLifecycle
    dynamodb: object

    def scan(self) -> list[dict[str, object]]:
        """Every item of the table, in key order: a byte-for-byte snapshot."""
        items: list[dict[str, object]] = []
        kwargs: dict[str, object] = {"TableName": TABLE, "ConsistentRead": True}
        while True:
            page = self.dynamodb.scan(**kwargs)  # type: ignore[attr-defined]
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(items, key=lambda item: (item["PK"]["S"], item["SK"]["S"]))


@pytest.fixture
def stack() -> Iterator[Stack]:
    serialize_requests("dynamodb")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        models.bind(TABLE, "us-east-1")
        clock, ids = FakeClock(), SeededIds()
        yield Stack(clock, ids, Tenancy(clock, ids), RunLifecycle(clock, ids), client)


@pytest.fixture
def org(stack: Stack) -> Organization:
    return stack.tenancy.create_organization("acme")


@pytest.fixture
def workspace(stack: Stack, org: Organization) -> Workspace:
    return stack.tenancy.create_workspace(org.id, "network")
