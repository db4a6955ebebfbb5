"""Standby runner items: one partition holding the pool (a few items per standby the
deployment keeps, never one per run: a claimed standby's item is deleted).

``DynamoStandbys`` is the ``StandbyStore`` seam (``services/standby.py``). Every
change of state is one conditional write, so two launches never assign the same
standby and a ticket is claimed once."""

from __future__ import annotations

from datetime import datetime, timedelta

from pynamodb.attributes import BinaryAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.exceptions import DeleteError, PutError, UpdateError

from runplane.domain.standby import SealedEnvironment, Standby, StandbyStatus
from runplane.store.models import TableItem

POOL = "STANDBY"
# Items outlive their use a little, then DynamoDB TTL removes what a top-up did not.
RETENTION = timedelta(days=1)


class StandbyItem(TableItem):
    standby_id = UnicodeAttribute()
    ticket_hash = UnicodeAttribute()
    status = UnicodeAttribute()
    started_at = UTCDateTimeAttribute()
    waits_until = UTCDateTimeAttribute()
    task = UnicodeAttribute(null=True)
    sandbox_id = UnicodeAttribute(null=True)
    claim_by = UTCDateTimeAttribute(null=True)
    # The assigned launch environment, sealed (services/standby.py): never in clear.
    wrapped_key = BinaryAttribute(null=True, legacy_encoding=False)
    sealed_environment = BinaryAttribute(null=True, legacy_encoding=False)


def standby_key(standby_id: str) -> tuple[str, str]:
    return POOL, f"STANDBY#{standby_id}"


def _refused(error: PutError | UpdateError | DeleteError) -> bool:
    return error.cause_response_code == "ConditionalCheckFailedException"


def _standby(item: StandbyItem) -> Standby:
    return Standby(
        standby_id=item.standby_id,
        ticket_hash=item.ticket_hash,
        status=StandbyStatus(item.status),
        started_at=item.started_at,
        waits_until=item.waits_until,
        task=item.task,
        sandbox_id=item.sandbox_id,
        claim_by=item.claim_by,
        environment=(
            SealedEnvironment(item.wrapped_key, item.sealed_environment)
            if item.wrapped_key is not None and item.sealed_environment is not None
            else None
        ),
    )


class DynamoStandbys:
    def put_starting(self, standby: Standby) -> None:
        StandbyItem(
            *standby_key(standby.standby_id),
            standby_id=standby.standby_id,
            ticket_hash=standby.ticket_hash,
            status=StandbyStatus.STARTING.value,
            started_at=standby.started_at,
            waits_until=standby.waits_until,
            expires_at=standby.waits_until + RETENTION,
        ).save(condition=StandbyItem.pk.does_not_exist())

    def mark_waiting(self, standby_id: str, task: str) -> bool:
        """Its task is started: it may be assigned. False if its item is gone."""
        try:
            StandbyItem(*standby_key(standby_id)).update(
                actions=[
                    StandbyItem.status.set(StandbyStatus.WAITING.value),
                    StandbyItem.task.set(task),
                ],
                condition=StandbyItem.status == StandbyStatus.STARTING.value,
            )
        except UpdateError as error:
            if _refused(error):
                return False
            raise
        return True

    def pool(self) -> list[Standby]:
        return [_standby(item) for item in StandbyItem.query(POOL, consistent_read=True)]

    def get(self, standby_id: str) -> Standby | None:
        try:
            return _standby(StandbyItem.get(*standby_key(standby_id), consistent_read=True))
        except StandbyItem.DoesNotExist:
            return None

    def assign(
        self,
        standby_id: str,
        sandbox_id: str,
        sealed: SealedEnvironment,
        *,
        waiting_past: datetime,
        claim_by: datetime,
    ) -> bool:
        """Waiting -> assigned to ``sandbox_id``, if it is still waiting, was started,
        and waits past ``waiting_past``; False (nothing written) otherwise."""
        try:
            StandbyItem(*standby_key(standby_id)).update(
                actions=[
                    StandbyItem.status.set(StandbyStatus.ASSIGNED.value),
                    StandbyItem.sandbox_id.set(sandbox_id),
                    StandbyItem.claim_by.set(claim_by),
                    StandbyItem.wrapped_key.set(sealed.wrapped_key),
                    StandbyItem.sealed_environment.set(sealed.ciphertext),
                ],
                condition=(StandbyItem.status == StandbyStatus.WAITING.value)
                & StandbyItem.task.exists()
                & (StandbyItem.waits_until > waiting_past),
            )
        except UpdateError as error:
            if _refused(error):
                return False
            raise
        return True

    def take(self, standby_id: str, sandbox_id: str, now: datetime) -> bool:
        """Delete the assigned item: the claim, once (assigned to ``sandbox_id``, its
        claim window open); False if the condition failed (nothing written)."""
        try:
            StandbyItem(*standby_key(standby_id)).delete(
                condition=(StandbyItem.status == StandbyStatus.ASSIGNED.value)
                & (StandbyItem.sandbox_id == sandbox_id)
                & (StandbyItem.claim_by > now)
            )
        except DeleteError as error:
            if _refused(error):
                return False
            raise
        return True

    def remove(self, standby: Standby) -> bool:
        """Delete ``standby``'s item if it is still in the state it was read in."""
        try:
            StandbyItem(*standby_key(standby.standby_id)).delete(
                condition=StandbyItem.status == standby.status.value
            )
        except DeleteError as error:
            if _refused(error):
                return False
            raise
        return True
