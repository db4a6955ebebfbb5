"""The single DynamoDB table, defined once.

CDK (``infra/``), the embedded stack and the tests all build the table from
this definition, and a test checks the pynamodb models agree with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PARTITION_KEY = "PK"
SORT_KEY = "SK"
TTL_ATTRIBUTE = "expires_at"
# The stream carries each new outbox item (store/outbox.py) to the event relay; the
# relay needs only the new image.
STREAM_VIEW_TYPE = "NEW_IMAGE"


@dataclass(frozen=True)
class GlobalIndex:
    name: str
    partition_key: str
    sort_key: str


# GSI1 lists children in order: a workspace's runs by creation time, an
# organization's workspaces by name, an organization's audit trail by time.
GSI1 = GlobalIndex("GSI1", "GSI1PK", "GSI1SK")
GLOBAL_INDEXES: tuple[GlobalIndex, ...] = (GSI1,)


def create_table_request(table_name: str) -> dict[str, Any]:
    """Arguments for DynamoDB ``CreateTable`` (on-demand capacity)."""
    key_attributes = [PARTITION_KEY, SORT_KEY] + [
        attr for index in GLOBAL_INDEXES for attr in (index.partition_key, index.sort_key)
    ]
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"} for name in key_attributes
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.partition_key, "KeyType": "HASH"},
                    {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for index in GLOBAL_INDEXES
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": STREAM_VIEW_TYPE},
    }


def time_to_live_request(table_name: str) -> dict[str, Any]:
    return {
        "TableName": table_name,
        "TimeToLiveSpecification": {"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    }
