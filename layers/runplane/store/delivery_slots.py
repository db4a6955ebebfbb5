"""In-flight slots of notification deliveries, shared by every worker process.

The embedded worker bounds the deliveries it runs at once in memory (``FairLanes``),
but in AWS every Lambda invocation is a process of its own: only the table can say
how many of one organization's deliveries are being sent right now. So each slot is
an item, and a delivery takes one of its destination's and one of its
organization's in ONE transaction before it claims its attempt:

- ``DELIVERYSLOTS#ORG#<org-id>`` / ``SLOT#<n>``, n below the per-organization bound
- ``DELIVERYSLOTS#DEST#<destination-id>`` / ``SLOT#<n>``, n below the per-destination bound

Each is put only if free: absent, or its lease has run out. A lease is how a slot
held by a holder that stopped (a crashed or timed-out invocation, which never gives
it back) frees itself; DynamoDB's TTL removes such an item a day later. A holder
gives its slots back by deleting them, only while they are still its own (its
random holder token), so a holder that outlived its lease never frees a slot that
another delivery has taken since.
"""

from __future__ import annotations

import contextlib
import random
import secrets
from datetime import datetime, timedelta

from pynamodb.attributes import UnicodeAttribute, UTCDateTimeAttribute

from runplane.domain.errors import ConcurrentChange
from runplane.domain.notifications import SlotLease
from runplane.store.models import TableItem
from runplane.store.transaction import Item, Transaction

PREFIX = "DELIVERYSLOTS#"
# A slot item outlives its lease by this much before TTL removes it: a slot given back
# is deleted at once, so only a stopped holder's is ever left.
RETENTION = timedelta(days=1)
# Two transactions racing for the same slots may both be cancelled (DynamoDB's
# TransactionConflict): try the same slots again this often before deferring.
CONFLICT_RETRIES = 2


class DeliverySlotItem(TableItem):
    holder = UnicodeAttribute()
    lease_until = UTCDateTimeAttribute()


def organization_slot_key(organization_id: str, index: int) -> tuple[str, str]:
    return f"{PREFIX}ORG#{organization_id}", f"SLOT#{index}"


def destination_slot_key(destination_id: str, index: int) -> tuple[str, str]:
    return f"{PREFIX}DEST#{destination_id}", f"SLOT#{index}"


class _Held(Exception):
    """A slot of the transaction is held by another delivery (internal: which one
    decides the next slot to try)."""

    def __init__(self, key: tuple[str, str]) -> None:
        super().__init__(f"slot {key[0]}/{key[1]} is held")
        self.key = key


class DynamoDeliverySlots:
    """``services.repositories.DeliverySlots`` on the table."""

    def __init__(self, *, per_organization: int, per_destination: int) -> None:
        if per_organization < 1 or per_destination < 1:
            raise ValueError("a delivery needs at least one slot per organization and destination")
        self._per_organization = per_organization
        self._per_destination = per_destination

    def acquire(
        self, organization_id: str, destination_id: str, now: datetime, until: datetime
    ) -> SlotLease | None:
        """A free destination slot and a free organization slot, both held until
        ``until``; None when every slot of either is held (nothing written then)."""
        holder = secrets.token_hex(16)
        destinations = _rotated(self._per_destination)
        organizations = _rotated(self._per_organization)
        d = o = conflicts = 0
        while d < len(destinations) and o < len(organizations):
            keys = (
                destination_slot_key(destination_id, destinations[d]),
                organization_slot_key(organization_id, organizations[o]),
            )
            try:
                _take(keys, holder, now, until).commit()
            except _Held as held:
                # The first refused write of the two is named: try that scope's next slot.
                if held.key == keys[0]:
                    d += 1
                else:
                    o += 1
                continue
            except ConcurrentChange:
                conflicts += 1
                if conflicts > CONFLICT_RETRIES:
                    return None
                continue
            return SlotLease(holder, keys, until)
        return None

    def release(self, lease: SlotLease) -> None:
        """Give the slots back, those still ``lease``'s own (one taken over after the
        lease ran out is the new holder's, and stays)."""
        try:
            _give_back(lease, lease.keys).commit()
            return
        except ConcurrentChange:
            pass
        # One of them was taken over: give back the other alone.
        for key in lease.keys:
            with contextlib.suppress(ConcurrentChange):
                _give_back(lease, (key,)).commit()


def _rotated(count: int) -> list[int]:
    """Slot indexes from a random one on, so that deliveries arriving together do not
    all try the same slot first (a lost race costs a transaction)."""
    start = random.randrange(count)  # noqa: S311 (spreading load, not a secret)
    return [(start + n) % count for n in range(count)]


def _take(
    keys: tuple[tuple[str, str], ...], holder: str, now: datetime, until: datetime
) -> Transaction:
    transaction = Transaction()
    for key in keys:

        def held(current: Item | None, key: tuple[str, str] = key) -> Exception:
            return _Held(key)

        transaction.put(
            DeliverySlotItem(*key, holder=holder, lease_until=until, expires_at=until + RETENTION),
            condition=DeliverySlotItem.pk.does_not_exist() | (DeliverySlotItem.lease_until < now),
            on_refused=held,
        )
    return transaction


def _give_back(lease: SlotLease, keys: tuple[tuple[str, str], ...]) -> Transaction:
    transaction = Transaction()
    for key in keys:
        transaction.delete(
            DeliverySlotItem(*key), condition=DeliverySlotItem.holder == lease.holder
        )
    return transaction
