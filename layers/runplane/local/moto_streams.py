"""moto's DynamoDB stream, kept bounded as DynamoDB's is.

DynamoDB keeps a stream's records for 24 hours and a shard iterator for 15
minutes; moto keeps both forever, so an embedded stack that runs for days would
grow by every write it ever made and by every iterator its relay was handed (one
per poll). Here a shard keeps its last ``RETAINED_RECORDS`` records (older ones
are trimmed, and their sequence numbers are never reused), and an iterator is
forgotten once read: the relay always reads with the next iterator it was given.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

# Far more than the relay ever lags behind (it reads several times a second).
RETAINED_RECORDS = 10_000
_PATCHED: list[bool] = []


def bound_streams(retained: int = RETAINED_RECORDS) -> None:
    """Patch moto's stream shard and iterators (idempotent)."""
    if _PATCHED:
        return
    from moto.dynamodb.models.table import StreamShard
    from moto.dynamodbstreams.models import DynamoDBStreamsBackend

    add: Callable[..., None] = StreamShard.add
    get_records: Callable[..., dict[str, Any]] = DynamoDBStreamsBackend.get_records

    @functools.wraps(add)
    def add_trimmed(self: Any, old: Any, new: Any) -> None:
        add(self, old, new)
        excess = len(self.items) - retained
        if excess > 0:
            # The next record's number is start + len(items): advancing the start by
            # what is trimmed keeps numbers increasing and TRIM_HORIZON correct.
            del self.items[:excess]
            self.starting_sequence_number += excess

    @functools.wraps(get_records)
    def get_records_once(self: Any, iterator_arn: str, limit: int) -> dict[str, Any]:
        result = get_records(self, iterator_arn, limit)
        self.shard_iterators.pop(iterator_arn, None)
        return result

    StreamShard.add = add_trimmed  # type: ignore[method-assign]
    DynamoDBStreamsBackend.get_records = get_records_once  # type: ignore[method-assign]
    _PATCHED.append(True)
