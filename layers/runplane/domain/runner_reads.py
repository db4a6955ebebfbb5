"""What authenticating a runner's call, or redeeming a capability, reads in one request:
the session or capability, its attempt, and what the call reads next (its
``ReadAhead``)."""

from __future__ import annotations

from dataclasses import dataclass

from runplane.domain.capabilities import CapabilityRecord, RunnerSession
from runplane.domain.entities import Run
from runplane.domain.parts import RunPart
from runplane.domain.read_ahead import NOTHING_READ, ReadAhead
from runplane.domain.state import StateVersion


@dataclass(frozen=True)
class SessionRead:
    """A runner session, its attempt and what its call reads next, as one consistent
    read found them: ``ahead`` for the call to be served, and, among them, the run
    (when asked for and found) and the state versions found, for who authenticates."""

    session: RunnerSession | None
    attempt: RunPart | None
    ahead: ReadAhead = NOTHING_READ
    run: Run | None = None
    versions: tuple[StateVersion, ...] = ()


@dataclass(frozen=True)
class CapabilityRead:
    """A capability, the attempt it is redeemed for and what its redemption reads next,
    as one consistent read found them: ``ahead`` for the redemption to be served, and,
    among them, the run (when asked for and found) and the state versions found, for
    what the redemption names from them."""

    capability: CapabilityRecord | None
    attempt: RunPart | None
    ahead: ReadAhead = NOTHING_READ
    run: Run | None = None
    versions: tuple[StateVersion, ...] = ()
