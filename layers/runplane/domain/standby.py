"""Standby runners: sandbox tasks started ahead of any run, each waiting for one phase.

A standby is started with a single-use ticket (its ID and 256 random bits; only the
ticket's hash is stored) and is bound to nothing. A launch assigns it to one attempt
with a conditional write (waiting -> assigned); the standby's claim, with its ticket,
then takes the attempt's launch environment once (assigned -> gone). Everything after
the claim is an ordinary runner phase: its bootstrap is bound to the attempt's sandbox
ID, so every session and attempt check applies unchanged (docs/standby.md).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from runplane.domain.errors import RunplaneError

TICKET_PREFIX = "rsb_"
# A launch does not assign a standby about to give up waiting: it must still be
# polling when its claim comes (a poll is at most a few seconds apart).
ASSIGN_MARGIN = timedelta(seconds=60)
# How long an assigned standby has to claim its run before the assignment is void
# (the attempt's heartbeat window then ends the run's wait, as for a task that never
# started).
CLAIM_WINDOW = timedelta(seconds=120)


class StandbyStatus(StrEnum):
    # Its record is written, its task not yet known: a claim is told to wait.
    STARTING = "starting"
    WAITING = "waiting"
    ASSIGNED = "assigned"


class StandbyRefused(RunplaneError):
    """A claim that takes nothing: an unknown or wrong ticket, a standby whose wait or
    claim window ended, or one claimed already. Nothing is written."""

    code = "STANDBY_REFUSED"
    http_status = 401

    def __init__(self, why: str) -> None:
        super().__init__(f"the standby ticket is not valid: {why}")


@dataclass(frozen=True)
class SealedEnvironment:
    """A launch environment sealed for one standby as one sandbox (its data key wrapped
    by KMS, the environment under AES-GCM): what the pool's record holds."""

    wrapped_key: bytes
    ciphertext: bytes

    def __repr__(self) -> str:
        return f"SealedEnvironment({len(self.ciphertext)} bytes)"


@dataclass(frozen=True)
class Standby:
    standby_id: str
    ticket_hash: str = field(repr=False)
    status: StandbyStatus
    started_at: datetime
    # The standby gives up waiting (and its ticket any claim) at this instant.
    waits_until: datetime
    # The task's reference (its ARN in AWS), once it was started.
    task: str | None = None
    # Once assigned: the sandbox it now is, and the latest instant its claim counts.
    sandbox_id: str | None = None
    claim_by: datetime | None = None
    environment: SealedEnvironment | None = field(default=None, repr=False)


def ticket(standby_id: str, secret: str) -> str:
    return f"{TICKET_PREFIX}{standby_id}.{secret}"


def standby_of(presented: str) -> str | None:
    """The standby ID a presented ticket names, or None if it is not a ticket's shape."""
    if not presented.startswith(TICKET_PREFIX):
        return None
    standby_id, dot, secret = presented.removeprefix(TICKET_PREFIX).partition(".")
    if not dot or not standby_id or not secret:
        return None
    return standby_id


def ticket_hash(presented: str) -> str:
    """Tickets carry 256 random bits: a plain SHA-256 is a safe stored form."""
    return hashlib.sha256(presented.encode("utf-8")).hexdigest()


def ticket_matches(standby: Standby, presented: str) -> bool:
    return hmac.compare_digest(standby.ticket_hash, ticket_hash(presented))


def assignable(standby: Standby, now: datetime) -> bool:
    """Waiting, started, and far enough from the end of its wait to claim in time."""
    return (
        standby.status is StandbyStatus.WAITING
        and standby.task is not None
        and standby.waits_until > now + ASSIGN_MARGIN
    )


def live(standby: Standby, now: datetime) -> bool:
    """Counts toward the pool: waiting (or starting) and not at the end of its wait."""
    return standby.status is not StandbyStatus.ASSIGNED and standby.waits_until > now


def stale(standby: Standby, now: datetime) -> bool:
    """Its record serves nothing any more: its wait or its claim window is over."""
    if standby.status is StandbyStatus.ASSIGNED:
        return standby.claim_by is not None and standby.claim_by <= now
    return standby.waits_until <= now


def check_claim(standby: Standby | None, presented: str, now: datetime) -> bool:
    """Whether the claim takes the assignment now (True) or is told to poll again
    (False); raises ``StandbyRefused`` for a claim that must end the standby."""
    if standby is None or not ticket_matches(standby, presented):
        raise StandbyRefused("unknown ticket")
    if standby.status is StandbyStatus.ASSIGNED:
        if standby.claim_by is None or standby.claim_by <= now:
            raise StandbyRefused("the assignment's claim window ended")
        return True
    if standby.waits_until <= now:
        raise StandbyRefused("the standby's wait ended")
    return False


def environment_context(standby_id: str, sandbox_id: str) -> dict[str, str]:
    """The encryption context the assigned environment is sealed under: it opens for
    this standby as this sandbox only."""
    return {"runplane:standby": standby_id, "runplane:sandbox": sandbox_id}
