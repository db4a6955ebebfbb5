"""Several items of the table in one request (``BatchGetItem``), read consistently.

One request instead of one per item: what a step that needs a few items it can
name up front pays. Reads are strongly consistent, like every ``get`` here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runplane.domain.errors import TooMuchContention
from runplane.store.models import TableItem
from runplane.store.prefetch import IdentityMap
from runplane.store.table import PARTITION_KEY, SORT_KEY

Key = tuple[str, str]
# DynamoDB returns keys it could not serve under load; they are asked again.
_ATTEMPTS = 5


def get_many(keys: Sequence[Key], *, reads: IdentityMap) -> dict[Key, dict[str, Any]]:
    """The raw items found for ``keys`` (absent keys are missing from the result).

    Items ``reads`` holds (the request's identity map: read with its authentication, or
    ahead of a workflow step) are taken from it, found or absent; only the others are
    asked for, and none if there are none."""
    found: dict[Key, dict[str, Any]] = {}
    missing: list[Key] = []
    for key in dict.fromkeys(keys):
        known, raw = reads.take_known(key)
        if not known:
            missing.append(key)
        elif raw is not None:
            found[key] = raw
    if not missing:
        return found
    connection = TableItem._get_connection()
    # pynamodb's client type names only what pynamodb itself calls.
    client: Any = connection.connection.client
    table = connection.table_name
    wanted: list[dict[str, Any]] = [
        {PARTITION_KEY: {"S": pk}, SORT_KEY: {"S": sk}} for pk, sk in missing
    ]
    for _ in range(_ATTEMPTS):
        if not wanted:
            return found
        response = client.batch_get_item(
            RequestItems={table: {"Keys": wanted, "ConsistentRead": True}}
        )
        for raw in response.get("Responses", {}).get(table, []):
            found[(raw[PARTITION_KEY]["S"], raw[SORT_KEY]["S"])] = raw
        wanted = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
    if wanted:
        raise TooMuchContention("DynamoDB left part of a batch read unprocessed")
    return found
