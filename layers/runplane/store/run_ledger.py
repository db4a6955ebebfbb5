"""The DynamoDB run ledger (``services.repositories.RunLedger``): a run's creation and
its plain moves over ``RunRepository``, each one transaction with its outbox events."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

from runplane.domain.entities import Run, Workspace
from runplane.domain.run import RunStatus, Transitioned
from runplane.domain.run_events import RunEvent
from runplane.store import run_parts
from runplane.store.runs import Announce, RunRepository
from runplane.store.transaction import Transaction


class Announcer(Protocol):
    """The outbox writes of run events (``services.run_events.RunEvents``)."""

    def status_moved(
        self,
        run: Run,
        target: RunStatus,
        version: int,
        at: datetime,
        *,
        reason: str | None = None,
        approval_expires_at: datetime | None = None,
        workspace: Workspace | None = None,
    ) -> list[Transaction]: ...

    def announce(self, event: RunEvent) -> Transaction: ...


def announcer(
    events: Announcer | None,
    run: Run,
    target: RunStatus,
    reason: str | None,
    run_updates: Mapping[str, Any] | None,
    also: Callable[[Transitioned], Iterable[RunEvent]] | None,
    workspace: Workspace | None = None,
) -> Announce | None:
    """The outbox writes of a move of ``run`` to ``target``: its own event and those
    ``also`` makes of it, built from the move (its version and time). None without
    ``events`` (a lifecycle built without them announces nothing)."""
    if events is None:
        return None
    expires_at = (run_updates or {}).get("approval_expires_at")

    def announce(moved: Transitioned) -> list[Transaction]:
        writes = events.status_moved(
            run,
            target,
            moved.version,
            moved.at,
            reason=reason,
            approval_expires_at=expires_at,
            workspace=workspace,
        )
        writes += [events.announce(event) for event in (also(moved) if also else ())]
        return writes

    return announce


class DynamoRunLedger:
    """``events`` is read at each move: whoever owns the ledger may set its events
    after building it (as tests of the outbox do). Without them a move announces
    nothing; as deployed (``wiring``) the lifecycle always has them."""

    def __init__(
        self, runs: RunRepository, events: Callable[[], Announcer | None] = lambda: None
    ) -> None:
        self._runs = runs
        self._events = events

    def create(self, run: Run, *, actor: str, input: Mapping[str, Any]) -> None:
        self._runs.create(
            run,
            actor=actor,
            extra_writes=[
                run_parts.put(run.id, "input", state="recorded", body=input, now=run.created_at)
            ],
        )

    def move(
        self,
        run: Run,
        target: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
    ) -> Transitioned:
        return self._runs.transition(
            run,
            target,
            actor=actor,
            reason=reason,
            run_updates=run_updates,
            announce=announcer(self._events(), run, target, reason, run_updates, also_announce),
        )
