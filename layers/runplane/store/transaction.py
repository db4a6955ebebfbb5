"""One TransactWriteItems call, with every refused condition mapped to a typed error.

Each write names the error it raises when its condition is refused, so the
caller learns which fact was stale (the run, the fence, the queue) without a
second read. DynamoDB returns the refused item (``ALL_OLD``) and it is handed
to that error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import IntEnum
from typing import Any, cast

from boto3.dynamodb.types import TypeDeserializer
from pynamodb.exceptions import TransactWriteError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from runplane.domain.errors import ConcurrentChange, ItemTooLarge
from runplane.store.models import TableItem
from runplane.store.request_reads import REQUEST
from runplane.store.table import PARTITION_KEY, SORT_KEY

Item = dict[str, Any]
OnRefused = Callable[[Item | None], Exception]

# DynamoDB allows at most 100 items in one transaction.
MAX_TRANSACTION_ITEMS = 100


class _Kind(IntEnum):
    """pynamodb sends checks, then deletes, then puts, then updates: sort the same way."""

    CHECK = 0
    DELETE = 1
    PUT = 2
    UPDATE = 3


@dataclass(frozen=True)
class _Write:
    kind: _Kind
    request: dict[str, Any]
    on_refused: OnRefused

    @property
    def key(self) -> tuple[str, str]:
        attributes = self.request.get("Key") or self.request["Item"]
        return attributes[PARTITION_KEY]["S"], attributes[SORT_KEY]["S"]


def _conflict(description: str) -> OnRefused:
    def refuse(current: Item | None) -> Exception:
        return ConcurrentChange(f"{description} changed concurrently; nothing was written")

    return refuse


class Transaction:
    """Collects writes; ``commit`` sends them as ONE TransactWriteItems."""

    def __init__(self) -> None:
        self._writes: list[_Write] = []

    def __len__(self) -> int:
        return len(self._writes)

    def put(
        self,
        item: TableItem,
        *,
        condition: Condition | None = None,
        on_refused: OnRefused | None = None,
    ) -> Transaction:
        request = item.get_save_kwargs_from_instance(
            condition=condition, return_values_on_condition_failure="ALL_OLD"
        )
        return self._add(_Kind.PUT, request, on_refused or _conflict(f"item {item.pk}/{item.sk}"))

    def put_new(self, item: TableItem, on_refused: OnRefused | None = None) -> Transaction:
        """Put immutable evidence: refused if an item with the same key exists."""
        return self.put(item, condition=TableItem.pk.does_not_exist(), on_refused=on_refused)

    def update(
        self,
        item: TableItem,
        actions: Sequence[Action],
        *,
        condition: Condition | None = None,
        on_refused: OnRefused | None = None,
    ) -> Transaction:
        request = item.get_update_kwargs_from_instance(
            actions=list(actions),
            condition=condition,
            return_values_on_condition_failure="ALL_OLD",
            add_version_condition=False,
        )
        return self._add(
            _Kind.UPDATE, request, on_refused or _conflict(f"item {item.pk}/{item.sk}")
        )

    def delete(
        self,
        item: TableItem,
        *,
        condition: Condition | None = None,
        on_refused: OnRefused | None = None,
    ) -> Transaction:
        request = item.get_delete_kwargs_from_instance(
            condition=condition,
            return_values_on_condition_failure="ALL_OLD",
            add_version_condition=False,
        )
        return self._add(
            _Kind.DELETE, request, on_refused or _conflict(f"item {item.pk}/{item.sk}")
        )

    def check(
        self,
        model: type[TableItem],
        key: tuple[str, str],
        condition: Condition,
        on_refused: OnRefused,
    ) -> Transaction:
        request = model.get_operation_kwargs_from_class(key[0], key[1], condition=condition)
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return self._add(_Kind.CHECK, request, on_refused)

    def touches(self, key: tuple[str, str]) -> bool:
        """Whether one of the writes is to the item with this (partition, sort) key."""
        return any(write.key == key for write in self._writes)

    def extend(self, writes: Iterable[Transaction]) -> Transaction:
        for other in writes:
            self._writes.extend(other._writes)
        return self

    def refused_as(self, wrap: Callable[[Exception], Exception]) -> Transaction:
        """The same writes, each refusal's error passed through ``wrap``."""

        def wrapped(refuse: OnRefused) -> OnRefused:
            return lambda current: wrap(refuse(current))

        other = Transaction()
        other._writes = [
            replace(write, on_refused=wrapped(write.on_refused)) for write in self._writes
        ]
        return other

    def commit(self) -> None:
        if not self._writes:
            return
        # No read after a write may be served what was read before it: whatever made
        # this write, the request's identity map forgets what it read ahead.
        REQUEST.forget()
        if len(self._writes) > MAX_TRANSACTION_ITEMS:
            raise ValueError(f"a transaction holds at most {MAX_TRANSACTION_ITEMS} writes")
        keys = [write.key for write in self._writes]
        if len(set(keys)) != len(keys):
            twice = sorted({key for key in keys if keys.count(key) > 1})
            raise ValueError(f"a transaction may touch each item once; {twice} appear twice")
        ordered = sorted(self._writes, key=lambda write: write.kind)
        by_kind = {kind: [w.request for w in ordered if w.kind is kind] for kind in _Kind}
        connection = TableItem._get_connection().connection
        try:
            connection.transact_write_items(
                condition_check_items=by_kind[_Kind.CHECK],
                delete_items=by_kind[_Kind.DELETE],
                put_items=by_kind[_Kind.PUT],
                update_items=by_kind[_Kind.UPDATE],
            )
        except TransactWriteError as error:
            raise _refusal(error, ordered, self._writes) from None

    def _add(self, kind: _Kind, request: dict[str, Any], on_refused: OnRefused) -> Transaction:
        self._writes.append(_Write(kind, request, on_refused))
        return self


def _refusal(error: TransactWriteError, ordered: list[_Write], added: list[_Write]) -> Exception:
    """The error of the first-added write whose condition was refused.

    Several conditions can fail at once (a stale run also finds its audit key
    taken); the caller's order says which one explains the refusal best.
    """
    if _too_large(error):
        return ItemTooLarge()
    reasons = error.cancellation_reasons or []
    refused = {
        id(write): reason
        for write, reason in zip(ordered, reasons, strict=False)
        if reason is not None and reason.code == "ConditionalCheckFailed"
    }
    for write in added:
        if id(write) in refused:
            return write.on_refused(plain_item(refused[id(write)].raw_item))
    if any(reason is not None and reason.code == "TransactionConflict" for reason in reasons):
        return ConcurrentChange("another transaction touched the same items; nothing was written")
    return error


def _too_large(error: TransactWriteError) -> bool:
    """DynamoDB refused an item over its 400 KB limit (Put: "Item size has exceeded the
    maximum allowed size"; Update: "Item size to update has exceeded ...")."""
    return error.cause_response_code == "ValidationException" and "maximum allowed size" in (
        error.cause_response_message or ""
    )


_deserializer = TypeDeserializer()


def plain_item(raw: dict[str, dict[str, Any]] | None) -> Item | None:
    """DynamoDB JSON -> plain Python values (integral numbers become int)."""
    if raw is None:
        return None
    return {
        name: _plain(_deserializer.deserialize(cast(Any, value))) for name, value in raw.items()
    }


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
