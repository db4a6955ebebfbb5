"""Launch controls: the switches, allowlists and sandbox limit of one scope.

A scope is the platform (``GLOBAL``) or an organization (its ID). A scope whose
controls were never set reads as ``Controls()``: everything allowed, no limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GLOBAL = "GLOBAL"


@dataclass(frozen=True)
class Controls:
    launches_enabled: bool = True
    suspended: bool = False
    allowed_regions: tuple[str, ...] = ()
    runner_releases: tuple[str, ...] = ()
    policy_runtimes: tuple[str, ...] = field(default=())
    max_sandboxes: int | None = None


@dataclass(frozen=True)
class Clearance:
    """What a passed check read: each scope's label and sandbox limit (a sandbox
    start takes a slot in each, within its limit)."""

    limits: dict[str, tuple[str, int | None]]
