"""The standby runner's wait: it polls with its ticket until a phase is assigned, gives
up when its wait ends or its ticket is refused, and runs the phase in the environment
a launched task would hold, without its ticket."""

from __future__ import annotations

from runplane.runner.standby_pool import Refused, phase_environment, wait_for_run

ENVIRON = {
    "RUNPLANE_STANDBY_TICKET": "rsb_sby-1.secret",
    "RUNPLANE_CONTROL_PLANE_URL": "https://control.example",
    "RUNPLANE_STANDBY_SECONDS": "10",
    "RUNPLANE_STANDBY_POLL_SECONDS": "2",
    "PATH": "/usr/bin",
}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_it_polls_until_a_phase_is_assigned() -> None:
    clock = Clock()
    replies: list[dict[str, str] | None] = [None, None, {"RUNPLANE_RUN_ID": "run-1"}]
    asked: list[tuple[str, str]] = []

    def claim(url: str, ticket: str) -> dict[str, str] | None:
        asked.append((url, ticket))
        return replies.pop(0)

    assigned = wait_for_run(ENVIRON, claim=claim, sleep=clock.sleep, monotonic=lambda: clock.now)
    assert assigned == {"RUNPLANE_RUN_ID": "run-1"}
    assert asked == [("https://control.example", "rsb_sby-1.secret")] * 3
    assert clock.now == 4.0


def test_it_gives_up_when_its_wait_ends_or_its_ticket_is_refused() -> None:
    clock = Clock()
    nothing = wait_for_run(
        ENVIRON, claim=lambda u, t: None, sleep=clock.sleep, monotonic=lambda: clock.now
    )
    assert nothing is None
    assert clock.now == 10.0

    def refused(url: str, ticket: str) -> dict[str, str] | None:
        raise Refused("401")

    assert (
        wait_for_run(ENVIRON, claim=refused, sleep=clock.sleep, monotonic=lambda: clock.now) is None
    )


def test_the_phase_runs_in_the_claimed_environment_without_the_standby_settings() -> None:
    environment = phase_environment(
        ENVIRON, {"RUNPLANE_BOOTSTRAP": "rpc_x", "RUNPLANE_RUN_ID": "r"}
    )
    assert environment == {
        "PATH": "/usr/bin",
        "RUNPLANE_BOOTSTRAP": "rpc_x",
        "RUNPLANE_RUN_ID": "r",
        "RUNPLANE_CONTROL_PLANE_URL": "https://control.example",
    }
