"""The embedded stack's DynamoDB stream reader: what the stream's Lambda event source
is in AWS. A thread reads every shard of the table's stream (moto's DynamoDB
Streams, over HTTP) and hands each batch of records to the same relay service the
Lambda calls (services/event_relay.py).

It starts at the trim horizon (nothing written since the table was created is
missed), follows each shard's next iterator, and keeps the records the relay could
not queue to hand them again. An iterator that expired or was refused is replaced
by one after the last record handled; shards are listed again now and then, so new
ones are read and closed ones are dropped once read. It reads as soon as it is
woken (``wake``: the stack wakes it after every DynamoDB write), polls often while
records flow, and backs off (to ``max_poll``) while the stream is idle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runplane.adapters.acting_function import acting_as

logger = logging.getLogger("runplane.local.stream_relay")
RELAY_FUNCTION = "functions.events.relay.handler"

Record = Mapping[str, Any]
Relay = Callable[[Sequence[Record]], str | None]
# Shards are listed again after this many polls (and whenever one closes).
_RELIST_EVERY = 50


@dataclass
class _Shard:
    iterator: str | None = None
    last_sequence: str | None = None
    pending: list[Record] = field(default_factory=list)
    closed: bool = False


class StreamRelay:
    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        relay: Relay,
        *,
        min_poll: float = 0.05,
        max_poll: float = 2.0,
    ) -> None:
        self._streams = streams
        self._arn = stream_arn
        self._relay = relay
        self._min_poll = min_poll
        self._max_poll = max_poll
        self._shards: dict[str, _Shard] = {}
        self._polls = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._woken = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_table(cls, dynamodb: Any, streams: Any, table: str, relay: Relay) -> StreamRelay:
        arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        return cls(streams, str(arn), relay)

    def step(self) -> int:
        """Read every shard once and relay what was read; the number of records read."""
        with self._lock:
            if not self._shards or self._polls % _RELIST_EVERY == 0:
                self._list_shards()
            self._polls += 1
            read = 0
            for shard_id, shard in list(self._shards.items()):
                read += self._read(shard_id, shard)
                if shard.closed and not shard.pending:
                    del self._shards[shard_id]
                    self._polls = 0  # a closed shard has children: list them next time
            return read

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="runplane-stream", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Something was written: read the stream now rather than at the next poll."""
        self._woken.set()

    def stop(self) -> None:
        self._stop.set()
        self._woken.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    # -- internals ---------------------------------------------------------------------------

    def _loop(self) -> None:
        # It stands for the relay function's event source mapping, which reads the
        # stream with that function's role.
        with acting_as(RELAY_FUNCTION):
            self._poll()

    def _poll(self) -> None:
        wait = self._min_poll
        while True:
            woken = self._woken.wait(wait)
            self._woken.clear()
            if self._stop.is_set():
                return
            if woken:
                wait = self._min_poll
            try:
                busy = self.step() > 0
            except Exception:
                logger.exception("the stream relay step failed")
                busy = False
            wait = self._min_poll if busy else min(self._max_poll, wait * 2)

    def _list_shards(self) -> None:
        described = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]
        for found in described.get("Shards", []):
            self._shards.setdefault(str(found["ShardId"]), _Shard())

    def _read(self, shard_id: str, shard: _Shard) -> int:
        if shard.pending and not self._handle(shard, shard.pending):
            return 0
        if shard.closed:
            return 0
        if shard.iterator is None:
            shard.iterator = self._iterator(shard_id, shard.last_sequence)
        try:
            page = self._streams.get_records(ShardIterator=shard.iterator, Limit=1000)
        except Exception as error:
            # Expired, trimmed or refused: start again after the last record handled.
            logger.warning("stream iterator replaced", extra={"error": type(error).__name__})
            shard.iterator = None
            return 0
        shard.iterator = page.get("NextShardIterator")
        shard.closed = shard.iterator is None
        records = list(page.get("Records", []))
        if records:
            self._handle(shard, records)
        return len(records)

    def _handle(self, shard: _Shard, records: list[Record]) -> bool:
        """Relay ``records``; keep what was not handled for the next step."""
        failed = self._relay(records)
        handled = records
        if failed is not None:
            at = next(
                (n for n, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] == failed),
                0,
            )
            handled, shard.pending = records[:at], records[at:]
        else:
            shard.pending = []
        if handled:
            shard.last_sequence = str(handled[-1]["dynamodb"]["SequenceNumber"])
        return failed is None

    def _iterator(self, shard_id: str, after: str | None) -> str:
        position: dict[str, str] = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
            if after is not None
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        found = self._streams.get_shard_iterator(StreamArn=self._arn, ShardId=shard_id, **position)
        return str(found["ShardIterator"])
