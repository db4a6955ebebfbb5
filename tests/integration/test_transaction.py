"""The transaction builder names the refused write, whatever its kind or position."""

from __future__ import annotations

import pytest

from runplane.domain.errors import ConcurrentChange, ItemTooLarge
from runplane.store.models import NameClaimItem
from runplane.store.transaction import Item, Transaction
from tests.integration.conftest import Stack


class Refused(Exception):
    def __init__(self, label: str, current: Item | None) -> None:
        super().__init__(label)
        self.label = label
        self.current = current


def refuse(label: str):  # type: ignore[no-untyped-def]
    return lambda current: Refused(label, current)


def claim(name: str, owner: str = "owner") -> NameClaimItem:
    return NameClaimItem(f"CLAIM#{name}", "CLAIM", owner_id=owner)


def one_of_each(failing: str) -> Transaction:
    """A check, a delete, a put and an update, added in a different order than
    DynamoDB receives them; only ``failing`` has a false condition."""
    ok = NameClaimItem.owner_id == "owner"
    bad = NameClaimItem.owner_id == "someone else"
    return (
        Transaction()
        .update(
            claim("u"),
            [NameClaimItem.owner_id.set("owner")],
            condition=bad if failing == "update" else ok,
            on_refused=refuse("update"),
        )
        .put(
            claim("p", "new"), condition=bad if failing == "put" else None, on_refused=refuse("put")
        )
        .delete(
            claim("d"), condition=bad if failing == "delete" else ok, on_refused=refuse("delete")
        )
        .check(
            NameClaimItem,
            ("CLAIM#c", "CLAIM"),
            bad if failing == "check" else ok,
            on_refused=refuse("check"),
        )
    )


@pytest.fixture
def claims(stack: Stack) -> Stack:
    for name in ("u", "p", "d", "c"):
        Transaction().put_new(claim(name)).commit()
    return stack


@pytest.mark.parametrize("failing", ["check", "delete", "put", "update"])
def test_the_refused_write_raises_its_own_error_with_the_current_item(
    claims: Stack, failing: str
) -> None:
    before = claims.scan()

    with pytest.raises(Refused) as refused:
        one_of_each(failing).commit()

    assert refused.value.label == failing
    assert refused.value.current == {
        "PK": f"CLAIM#{failing[0]}",
        "SK": "CLAIM",
        "owner_id": "owner",
    }
    assert claims.scan() == before


def test_all_conditions_holding_commits_every_write(claims: Stack) -> None:
    one_of_each("none").commit()

    keys = [(item["PK"]["S"], item.get("owner_id", {}).get("S")) for item in claims.scan()]
    assert keys == [("CLAIM#c", "owner"), ("CLAIM#p", "new"), ("CLAIM#u", "owner")]


def test_a_refused_write_on_a_missing_item_reports_no_current_item(stack: Stack) -> None:
    with pytest.raises(Refused) as refused:
        Transaction().update(
            claim("missing"),
            [NameClaimItem.owner_id.set("x")],
            condition=NameClaimItem.owner_id == "owner",
            on_refused=refuse("update"),
        ).commit()
    assert refused.value.current is None


def test_writes_without_their_own_error_raise_a_concurrent_change(stack: Stack) -> None:
    Transaction().put_new(claim("x")).commit()
    with pytest.raises(ConcurrentChange, match="CLAIM#x"):
        Transaction().put_new(claim("x")).commit()


def test_one_item_twice_in_a_transaction_is_refused_before_sending(stack: Stack) -> None:
    tx = Transaction().put_new(claim("x")).put_new(claim("x", "other"))
    with pytest.raises(ValueError, match="once"):
        tx.commit()
    assert stack.scan() == []


@pytest.mark.parametrize("kind", ["put", "update"])
def test_an_item_over_the_size_limit_is_a_typed_413_that_writes_nothing(
    claims: Stack, kind: str
) -> None:
    # Given a transaction whose put or update makes an item larger than 400 KB
    before = claims.scan()
    oversized = "x" * 410 * 1024
    tx = Transaction().put_new(claim("small"))
    if kind == "put":
        tx.put_new(claim("big", oversized))
    else:
        tx.update(claim("u"), [NameClaimItem.owner_id.set(oversized)])
    # When it is committed / Then it is refused as too large, and nothing was written
    with pytest.raises(ItemTooLarge) as refused:
        tx.commit()
    assert refused.value.http_status == 413
    assert refused.value.to_body()["code"] == "ITEM_TOO_LARGE"
    assert claims.scan() == before


def test_transactions_leave_no_table_copies_behind(claims: Stack) -> None:
    # Given moto, which deep-copies every table for each transaction's rollback
    from moto.dynamodb.models.table import Table

    # When many transactions are refused and rolled back
    for _ in range(20):
        with pytest.raises(Refused):
            one_of_each("check").commit()

    # Then moto remembers none of those copies: the embedded stack does not grow per run
    # (moto's metaclass sets the attribute on each model class, out of its type's sight)
    assert len(vars(Table)["instances_tracked"]) == 0
