"""The standby pool: runner tasks started ahead of any run, so a phase starts on a task
that is already running (docs/standby.md).

``StandbyPool`` is a ``Launcher``: a launch assigns a waiting standby to the attempt
(one conditional write; the launch environment sealed on the standby's record) and
starts one replacement; with none waiting it launches as the wrapped launcher always
did. ``StandbyClaims`` answers a standby's poll: with its ticket, once, the
environment a launch would have passed the task. ``top_up`` (a schedule) clears what
ended and starts standbys until the pool holds its size again.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from runplane.adapters.launchers import LaunchRequest, runner_environment
from runplane.adapters.sealed import Sealed, seal, unseal
from runplane.domain import standby as rules
from runplane.domain.clock import Clock
from runplane.domain.standby import SealedEnvironment, Standby, StandbyRefused, StandbyStatus

if TYPE_CHECKING:
    from runplane.adapters.keys import DataKeys

logger = logging.getLogger("runplane.standby")

# The standby runner's own deadline is its wait plus this: its record refuses claims
# first, so it never exits while a claim could still be assigned to it.
RUNNER_GRACE = timedelta(seconds=60)


class StandbyStore(Protocol):
    """The pool's records (``store/standby.py``); each change one conditional write.

    - ``put_starting`` writes a new standby (status starting).
    - ``mark_waiting`` records its task: starting -> waiting; False if it is gone.
    - ``pool`` reads every record (the pool's one partition, a few items a standby).
    - ``get`` reads one, consistently, or None.
    - ``assign`` moves a started, waiting standby that waits past ``waiting_past`` to
      assigned, with the sealed environment; False (nothing written) otherwise.
    - ``take`` deletes an assigned record whose claim window is open; False (nothing
      written) otherwise.
    - ``remove`` deletes a record still in the state it was read in.
    """

    def put_starting(self, standby: Standby) -> None: ...

    def mark_waiting(self, standby_id: str, task: str) -> bool: ...

    def pool(self) -> list[Standby]: ...

    def get(self, standby_id: str) -> Standby | None: ...

    def assign(
        self,
        standby_id: str,
        sandbox_id: str,
        sealed: SealedEnvironment,
        *,
        waiting_past: datetime,
        claim_by: datetime,
    ) -> bool: ...

    def take(self, standby_id: str, sandbox_id: str, now: datetime) -> bool: ...

    def remove(self, standby: Standby) -> bool: ...


class StandbyTasks(Protocol):
    """Where standbys run (``adapters/launchers.py``): the launcher that starts a
    phase's task also starts a standby's, with nothing but its ticket and where to
    claim, and stops either by its reference."""

    def launch(self, request: LaunchRequest) -> str: ...

    def stop(self, reference: str) -> None: ...

    def start_standby(self, standby_id: str, environment: Mapping[str, str]) -> str: ...

    def assigned(self, reference: str, request: LaunchRequest) -> None:
        """The standby ``reference`` now runs ``request``'s phase (a launcher that
        names a sandbox's exit by what it was launched for notes it)."""
        ...

    def ended(self, references: Sequence[str]) -> set[str]:
        """Which of ``references`` stopped (or are unknown)."""
        ...


def standby_environment(
    ticket: str, control_plane_url: str, wait: timedelta, poll_seconds: int
) -> dict[str, str]:
    """What a standby task is started with: no run, no handle, only its ticket."""
    return {
        "RUNPLANE_STANDBY_TICKET": ticket,
        "RUNPLANE_CONTROL_PLANE_URL": control_plane_url,
        "RUNPLANE_STANDBY_SECONDS": str(int((wait + RUNNER_GRACE).total_seconds())),
        "RUNPLANE_STANDBY_POLL_SECONDS": str(poll_seconds),
    }


class StandbyPool:
    """A ``Launcher`` that starts phases on standbys when one waits (see the module)."""

    def __init__(
        self,
        clock: Clock,
        store: StandbyStore,
        tasks: StandbyTasks,
        keys: DataKeys,
        *,
        size: int,
        wait: timedelta,
        poll_seconds: int,
        control_plane_url: str,
    ) -> None:
        self._clock = clock
        self._store = store
        self._tasks = tasks
        self._keys = keys
        self._size = size
        self._wait = wait
        self._poll_seconds = poll_seconds
        self._control_plane_url = control_plane_url

    # -- Launcher -------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> str:
        assigned = self._assign(request)
        if assigned is None:
            # The pool never blocks a run: none waiting, the phase starts as always.
            return self._tasks.launch(request)
        self._tasks.assigned(assigned, request)
        try:
            self.start_one()
        except Exception as error:  # the schedule's top-up starts it later
            logger.warning("standby replacement failed", extra={"error": type(error).__name__})
        return assigned

    def stop(self, reference: str) -> None:
        self._tasks.stop(reference)

    # -- the pool -------------------------------------------------------------------------

    def _assign(self, request: LaunchRequest) -> str | None:
        """The task of the standby now assigned to ``request``'s attempt, or None."""
        now = self._clock.now()
        waiting = [s for s in self._store.pool() if rules.assignable(s, now)]
        # Concurrent launches try the waiting standbys in different orders, so a lost
        # race costs one refused write, not one per launch.
        random.shuffle(waiting)
        for standby in waiting:
            sealed = self._seal(standby.standby_id, request)
            if self._store.assign(
                standby.standby_id,
                request.sandbox_id,
                sealed,
                waiting_past=now + rules.ASSIGN_MARGIN,
                claim_by=now + rules.CLAIM_WINDOW,
            ):
                return standby.task
        return None

    def _seal(self, standby_id: str, request: LaunchRequest) -> SealedEnvironment:
        context = rules.environment_context(standby_id, request.sandbox_id)
        plaintext = json.dumps(runner_environment(request)).encode()
        sealed = seal(self._keys, context, plaintext)
        return SealedEnvironment(sealed.wrapped_key, sealed.ciphertext)

    def start_one(self) -> str:
        """Start one standby: its record first (so its claims are answered), then its
        task; a task that did not start leaves no record."""
        now = self._clock.now()
        standby_id = f"sby-{secrets.token_hex(13)}"
        ticket = rules.ticket(standby_id, secrets.token_urlsafe(32))
        standby = Standby(
            standby_id=standby_id,
            ticket_hash=rules.ticket_hash(ticket),
            status=StandbyStatus.STARTING,
            started_at=now,
            waits_until=now + self._wait,
        )
        self._store.put_starting(standby)
        environment = standby_environment(
            ticket, self._control_plane_url, self._wait, self._poll_seconds
        )
        try:
            task = self._tasks.start_standby(standby_id, environment)
        except BaseException:
            self._store.remove(standby)
            raise
        self._store.mark_waiting(standby_id, task)
        return standby_id

    def top_up(self) -> dict[str, int]:
        """Clear the records that ended (a wait or a claim window over, a task that
        stopped while waiting) and start standbys until the pool holds its size."""
        now = self._clock.now()
        pool = self._store.pool()
        started = [s.task for s in pool if s.status is StandbyStatus.WAITING and s.task]
        ended = self._tasks.ended(started) if started else set()
        cleared = 0
        live = 0
        for standby in pool:
            crashed = standby.status is StandbyStatus.WAITING and standby.task in ended
            if rules.stale(standby, now) or crashed:
                cleared += self._store.remove(standby)
                if standby.status is StandbyStatus.WAITING and standby.task and not crashed:
                    self._tasks.stop(standby.task)
            elif rules.live(standby, now):
                live += 1
        started_now = 0
        for _ in range(max(0, self._size - live)):
            self.start_one()
            started_now += 1
        return {"cleared": cleared, "live": live, "started": started_now}

    def retire(self) -> int:
        """Stop every standby not assigned (the pool is turned off or replaced): its
        record goes first, so no launch assigns it meanwhile, and a standby still
        starting then finds its ticket refused and exits. The number retired."""
        retired = 0
        for standby in self._store.pool():
            if standby.status is StandbyStatus.ASSIGNED or not self._store.remove(standby):
                continue
            if standby.task:
                self._tasks.stop(standby.task)
            retired += 1
        return retired


class StandbyClaims:
    """A standby's poll: nothing yet (None), or its assigned environment, once."""

    def __init__(self, clock: Clock, store: StandbyStore, keys: DataKeys) -> None:
        self._clock = clock
        self._store = store
        self._keys = keys

    def claim(self, presented: str) -> dict[str, str] | None:
        standby_id = rules.standby_of(presented)
        if standby_id is None:
            raise StandbyRefused("unknown ticket")
        now = self._clock.now()
        standby = self._store.get(standby_id)
        if not rules.check_claim(standby, presented, now):
            return None
        if standby is None or standby.sandbox_id is None or standby.environment is None:
            raise StandbyRefused("the assignment holds no environment")
        # Opened before the record goes: a refused key leaves the claim to retry.
        context = rules.environment_context(standby_id, standby.sandbox_id)
        sealed = Sealed(standby.environment.wrapped_key, standby.environment.ciphertext)
        environment = json.loads(unseal(self._keys, context, sealed))
        if not self._store.take(standby_id, standby.sandbox_id, now):
            raise StandbyRefused("the assignment was claimed already")
        return {str(k): str(v) for k, v in environment.items()}
