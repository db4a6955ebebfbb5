"""Workspace writer authority: the FIFO reservation, the apply lock, and the fence.

A ``plan_and_apply`` run holds the workspace's writer reservation from before
it plans until it ends (or, when its outcome is uncertain, until recovery).
Runs that find it held wait in a per-workspace FIFO queue with an opaque
token (a Step Functions task token); whoever releases the reservation hands it
to the oldest waiter in the same write and gets that waiter's token back to
resume it. Apply takes the workspace lock with the next fence value; every
write made with that authority is conditioned on the exact lock and fence.

The authority is a seam: the table's (``store.writer.DynamoWriterAuthority``) builds
each write from a fresh read and rebuilds it when the queue moved, a bounded number of
times; no decision is ever taken on a read alone. A move's release of the reservation is
part of the move itself (``services.lifecycle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from runplane.domain.entities import ApplyLock, Handoff, Reservation, Run
from runplane.domain.errors import ReservationNotNeeded

__all__ = ["Reservation", "ReservationNotNeeded", "Resumes", "WriterAuthority", "hand_off"]


class WriterAuthority(Protocol):
    """The reservation and the apply lock of a run's workspace.

    - ``reserve`` takes the reservation for ``run`` or queues it FIFO, safe to repeat: a
      repeat by the holder reports it held; a repeat by a waiter keeps its place and
      stores the new token (a retried wait carries a new one). Only runs that may apply
      take it (``ReservationNotNeeded``).
    - ``waiter_token`` is the token of ``run``'s wait, if it is waiting.
    - ``release`` ends the run's hold (handing it to the oldest waiter, whose hand-off it
      returns) or its place in the queue, outside any move; ``NotWriter`` if it neither
      holds nor waits. A holder's apply lock goes with it: exactly ``lock`` if given
      (``StaleFence`` if it is no longer current), else whatever lock the run holds.
    - ``acquire_apply_lock`` locks the workspace for ``run``'s apply with the next fence,
      safe to repeat; ``held_apply_lock`` is the lock ``run`` holds, if any.
    """

    def reserve(self, run: Run, token: str) -> Reservation: ...

    def waiter_token(self, run: Run) -> str | None: ...

    def release(
        self, workspace_id: str, run_id: str, lock: ApplyLock | None = None
    ) -> Handoff | None: ...

    def acquire_apply_lock(self, run: Run) -> ApplyLock: ...

    def held_apply_lock(self, run: Run) -> ApplyLock | None: ...


class Resumes(Protocol):
    def resume(self, token: str, output: Mapping[str, Any]) -> bool: ...


def hand_off(workflow: Resumes, handoff: Handoff | None) -> None:
    """Wake the run a committed release handed the reservation to: it now holds it."""
    if handoff is not None:
        workflow.resume(handoff.token, {"held": True})
