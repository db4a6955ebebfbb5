"""Create the table from its one definition (the embedded stack and tests; CDK in AWS)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runplane.store.table import create_table_request, time_to_live_request

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def create_table(client: DynamoDBClient, table_name: str) -> None:
    client.create_table(**create_table_request(table_name))
    client.get_waiter("table_exists").wait(TableName=table_name)
    client.update_time_to_live(**time_to_live_request(table_name))
