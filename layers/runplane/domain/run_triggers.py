"""Run triggers: a workspace names source workspaces whose applied runs queue a run in it.

Pure rules: the limit, no self-reference, no cycle (a cycle would queue runs forever);
and the entities: a workspace's trigger list, and what a source run did in a dependent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from runplane.domain.errors import RunTriggerRefused
from runplane.domain.run import RunKind

MAX_SOURCES: Final = 20
# How many workspaces a cycle check may walk: every one read is re-checked when the
# change commits, and a transaction holds at most 100 items.
MAX_WALK: Final = 90
# A trigger whose launch is refused by launch controls (which say "retry later") is
# tried this many times in all, backing off from the base, then recorded as skipped:
# 1, 2, 4 and 8 minutes apart: a quarter of an hour of refusals.
MAX_LAUNCH_TRIES: Final = 5
LAUNCH_RETRY_BASE_SECONDS: Final = 60


def launch_retry_delay(tries: int, base_seconds: int) -> int:
    """Seconds before try ``tries + 1`` after ``tries`` refused launches."""
    return int(min(900, base_seconds * 2 ** (tries - 1)))


def check_new_source(dependent: str, source: str, current: Iterable[str]) -> None:
    sources = set(current)
    if source == dependent:
        raise RunTriggerRefused("a workspace cannot trigger itself", "/source_workspace_id")
    if source not in sources and len(sources) >= MAX_SOURCES:
        raise RunTriggerRefused(
            f"a workspace has at most {MAX_SOURCES} source workspaces", "/source_workspace_id"
        )


def find_cycle(
    dependent: str, source: str, sources_of: Callable[[str], Iterable[str]]
) -> tuple[bool, list[str]]:
    """Would ``source -> dependent`` close a cycle? Walks from ``source`` through its own
    sources; returns (cycle found, the workspaces read on the way)."""
    seen: list[str] = []
    frontier = [source]
    visited = {source}
    while frontier:
        current = frontier.pop()
        seen.append(current)
        if len(seen) > MAX_WALK:
            raise RunTriggerRefused(
                f"the trigger chain above this source is longer than {MAX_WALK} workspaces",
                "/source_workspace_id",
            )
        for upstream in sources_of(current):
            if upstream == dependent:
                return True, seen
            if upstream not in visited:
                visited.add(upstream)
                frontier.append(upstream)
    return False, seen


@dataclass(frozen=True)
class Triggers:
    """A workspace's trigger sources and the kind of run they queue in it."""

    workspace_id: str
    sources: tuple[str, ...]
    run_kind: RunKind
    version: int  # 0: never configured


@dataclass(frozen=True)
class Triggered:
    """What a source run did in a dependent workspace: the run it queued, or why none
    (``skipped``)."""

    dependent_workspace_id: str
    run_id: str | None
    skipped: str | None
