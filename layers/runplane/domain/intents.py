"""Values of the unit of work (``services.unit_of_work``): what its intents are given and
what its commit returns, shared by the port and its implementations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from runplane.domain.entities import Handoff, Run
from runplane.domain.run import Transitioned


class Keep(Enum):
    """A part change that leaves the part's token as it is."""

    TOKEN = "keep"


KEEP = Keep.TOKEN

# The error a refused part intent raises, given the state the part holds at commit
# (None: the run has no such part).
Refused = Callable[[str | None], Exception]


@dataclass(frozen=True)
class MovedRun:
    """A committed move: the transition, the run as the move wrote it (what a consistent
    read right after would return), and the run the workspace writer reservation was
    handed to by the move's release, if any (its wait is the caller's to resume)."""

    transition: Transitioned
    run: Run
    handoff: Handoff | None
