"""The standby pool's rules: a launch takes a waiting standby with one conditional
write (or starts its own task when none waits), and a standby claims its assignment
with its ticket, once, within its windows (docs/standby.md)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from runplane.adapters.launchers import LaunchRequest, runner_environment
from runplane.domain.standby import CLAIM_WINDOW, StandbyRefused, StandbyStatus
from runplane.services.standby import StandbyClaims, StandbyPool
from tests.fakes import FakeClock, LocalDataKeys
from tests.fakes_standby import InMemoryStandbys, RecordingStandbyTasks

WAIT = timedelta(hours=1)


class Pool:
    def __init__(self, size: int = 1) -> None:
        self.clock = FakeClock()
        self.store = InMemoryStandbys()
        self.tasks = RecordingStandbyTasks()
        keys = LocalDataKeys()
        self.pool = StandbyPool(
            self.clock,
            self.store,
            self.tasks,
            keys,
            size=size,
            wait=WAIT,
            poll_seconds=2,
            control_plane_url="https://control.example",
        )
        self.claims = StandbyClaims(self.clock, self.store, keys)

    def ticket_of(self, task: str) -> str:
        return self.tasks.standbys[task]["RUNPLANE_STANDBY_TICKET"]


def request(n: int = 1) -> LaunchRequest:
    return LaunchRequest(
        run_id=f"run-{n}",
        attempt_id=f"att-{n}",
        phase="plan",
        sandbox_id=f"sbx-{n}",
        control_plane_url="https://control.example",
        bootstrap=f"rpc_bootstrap-secret-{n}",
        credentials=f"rpc_credentials-{n}",
        inputs=(f"art-{n}",),
    )


def test_a_launch_starts_on_a_waiting_standby_which_claims_exactly_the_launch_environment() -> None:
    # Given a pool of one standby, started and waiting
    given = Pool()
    assert given.pool.top_up()["started"] == 1
    (task,) = given.tasks.standbys
    ticket = given.ticket_of(task)
    # (it was started with its ticket and nothing of any run)
    assert set(given.tasks.standbys[task]) == {
        "RUNPLANE_STANDBY_TICKET",
        "RUNPLANE_CONTROL_PLANE_URL",
        "RUNPLANE_STANDBY_SECONDS",
        "RUNPLANE_STANDBY_POLL_SECONDS",
    }
    # And its poll before any launch gets nothing yet
    assert given.claims.claim(ticket) is None
    # When a phase is launched
    reference = given.pool.launch(request())
    # Then it runs on the standby's task, no task was started for it
    assert reference == task
    assert given.tasks.launched == []
    # (and the launcher was told which sandbox that task now is)
    assert given.tasks.assignments == {task: "sbx-1"}
    # And one replacement was started
    assert len(given.tasks.standbys) == 2
    # And the standby's claim returns the environment a launch would have passed
    assert given.claims.claim(ticket) == runner_environment(request())
    # And the record holds no environment in clear
    assert all(
        b"bootstrap-secret" not in (s.environment.ciphertext if s.environment else b"")
        for s in given.store.items.values()
    )


def test_a_second_claim_is_refused_and_writes_nothing() -> None:
    given = Pool()
    given.pool.top_up()
    (task,) = given.tasks.standbys
    ticket = given.ticket_of(task)
    given.pool.launch(request())
    given.claims.claim(ticket)
    before = dict(given.store.items)
    # When the same ticket claims again
    with pytest.raises(StandbyRefused):
        given.claims.claim(ticket)
    # Then nothing changed
    assert given.store.items == before


def test_two_launches_never_get_the_same_standby_the_second_starts_its_own_task() -> None:
    # Given one waiting standby
    given = Pool(size=1)
    given.pool.top_up()
    (task,) = given.tasks.standbys
    # (its replacement cannot start: the second launch finds nothing waiting)
    given.pool.start_one = lambda: "none"  # type: ignore[method-assign]
    # When two launches come
    first = given.pool.launch(request(1))
    second = given.pool.launch(request(2))
    # Then the first took the standby and the second fell back to its own task
    assert first == task
    assert second == "sandbox-1"
    assert [r.sandbox_id for r in given.tasks.launched] == ["sbx-2"]


def test_with_no_standby_waiting_the_launch_starts_its_task_as_always() -> None:
    given = Pool(size=0)
    reference = given.pool.launch(request())
    assert reference == "sandbox-1"
    assert given.tasks.launched == [request()]
    assert given.tasks.standbys == {}


def test_a_standby_whose_task_is_not_known_yet_is_not_assigned() -> None:
    # Given a standby whose record is written but whose task has not started
    given = Pool()
    given.pool.top_up()
    (standby,) = given.store.items.values()
    given.store.items[standby.standby_id] = dataclasses.replace(
        standby, status=StandbyStatus.STARTING, task=None
    )
    given.pool.start_one = lambda: "none"  # type: ignore[method-assign]
    # When a phase is launched: it starts its own task
    assert given.pool.launch(request()) == "sandbox-1"


def test_a_standby_at_the_end_of_its_wait_is_not_assigned_and_its_ticket_is_refused_after() -> None:
    given = Pool()
    given.pool.top_up()
    (task,) = given.tasks.standbys
    ticket = given.ticket_of(task)
    given.pool.start_one = lambda: "none"  # type: ignore[method-assign]
    # When the launch comes within a minute of the standby's end of wait
    given.clock.advance(WAIT - timedelta(seconds=30))
    assert given.pool.launch(request()) == "sandbox-1"
    # And once its wait is over, its poll is refused (it exits) and writes nothing
    given.clock.advance(timedelta(seconds=31))
    before = dict(given.store.items)
    with pytest.raises(StandbyRefused):
        given.claims.claim(ticket)
    assert given.store.items == before


def test_a_claim_after_the_claim_window_is_refused_and_writes_nothing() -> None:
    given = Pool()
    given.pool.top_up()
    (task,) = given.tasks.standbys
    ticket = given.ticket_of(task)
    given.pool.launch(request())
    given.clock.advance(CLAIM_WINDOW)
    before = dict(given.store.items)
    with pytest.raises(StandbyRefused):
        given.claims.claim(ticket)
    assert given.store.items == before


def test_a_wrong_or_malformed_ticket_is_refused() -> None:
    given = Pool()
    given.pool.top_up()
    (task,) = given.tasks.standbys
    standby_id = given.ticket_of(task).split(".")[0]
    for presented in ("nonsense", f"{standby_id}.not-the-secret", "rsb_sby-unknown.x"):
        with pytest.raises(StandbyRefused):
            given.claims.claim(presented)


def test_canceling_a_run_on_a_standby_stops_the_standbys_task() -> None:
    given = Pool()
    given.pool.top_up()
    reference = given.pool.launch(request())
    # When the run is canceled (or recovered): the launcher stops what launch returned
    given.pool.stop(reference)
    assert given.tasks.stopped == [reference]


def test_the_top_up_replaces_standbys_that_crashed_or_ended_their_wait() -> None:
    # Given a pool of two, one of whose tasks crashed
    given = Pool(size=2)
    given.pool.top_up()
    first, _ = given.tasks.standbys
    given.tasks.crashed.add(first)
    # When the schedule tops the pool up
    outcome = given.pool.top_up()
    # Then the crashed one's record is gone and a new standby started
    assert outcome == {"cleared": 1, "live": 1, "started": 1}
    assert len(given.store.items) == 2
    # And once every wait is over, the next top-up replaces them all
    given.clock.advance(WAIT)
    assert given.pool.top_up() == {"cleared": 2, "live": 0, "started": 2}
