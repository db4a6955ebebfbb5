"""What a request read ahead of the reads it makes next, by what each item is.

A runner's call authenticates with one consistent read, which also reads what the
call reads anyway (its run, its workspace, the state version its run pinned, ...).
That read is a ``ReadAhead``: each item it names (a ``Read``: the run ``r1``, the
attempt part of ``r1``, ...) found, or found absent. The request serves each to its
first read of it, then forgets it (the store's identity map, opened per request).

A found item is kept as the store recorded it, which only the store reads: a service
hands a read-ahead on without looking into it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

Recorded = Mapping[str, Any]
"""An item as the store recorded it (only the store reads it)."""


class ReadKind(StrEnum):
    RUN = "run"
    RUN_PART = "run_part"
    WORKSPACE = "workspace"
    STATE_VERSION = "state_version"
    ARTIFACT = "artifact"
    DRIFT = "drift"
    CONFIGURATION_VERSION = "configuration_version"


@dataclass(frozen=True, order=True)
class Read:
    """One item a request reads, by what it is: ``kind`` and its ID (a run part's is
    its run's, with the part's ``name``)."""

    kind: ReadKind
    id: str
    name: str = ""

    @classmethod
    def run(cls, run_id: str) -> Read:
        return cls(ReadKind.RUN, run_id)

    @classmethod
    def run_part(cls, run_id: str, name: str) -> Read:
        return cls(ReadKind.RUN_PART, run_id, name)

    @classmethod
    def workspace(cls, workspace_id: str) -> Read:
        return cls(ReadKind.WORKSPACE, workspace_id)

    @classmethod
    def state_version(cls, sv_id: str) -> Read:
        return cls(ReadKind.STATE_VERSION, sv_id)

    @classmethod
    def artifact(cls, artifact_id: str) -> Read:
        return cls(ReadKind.ARTIFACT, artifact_id)

    @classmethod
    def drift(cls, workspace_id: str) -> Read:
        """A workspace's drift record."""
        return cls(ReadKind.DRIFT, workspace_id)

    @classmethod
    def configuration_version(cls, cv_id: str) -> Read:
        return cls(ReadKind.CONFIGURATION_VERSION, cv_id)


@dataclass(frozen=True)
class ReadAhead:
    """Items one consistent read found (``found``) or found absent (``absent``)."""

    found: Mapping[Read, Recorded] = field(default_factory=lambda: MappingProxyType({}))
    absent: frozenset[Read] = frozenset()

    @classmethod
    def of(cls, found: Mapping[Read, Recorded], asked: Iterable[Read] = ()) -> ReadAhead:
        """What a read of ``asked`` found: ``found``, and each other one absent."""
        return cls(
            MappingProxyType(dict(found)),
            frozenset(read for read in asked if read not in found),
        )

    def __bool__(self) -> bool:
        return bool(self.found) or bool(self.absent)

    def reads(self) -> frozenset[Read]:
        """Every item read, found or not."""
        return frozenset(self.found) | self.absent

    def with_(self, other: ReadAhead) -> ReadAhead:
        """Both, ``other``'s reads replacing this one's of the same items."""
        found = {read: item for read, item in self.found.items() if read not in other.absent}
        found.update(other.found)
        absent = (self.absent - frozenset(other.found)) | other.absent
        return ReadAhead(MappingProxyType(found), absent)


NOTHING_READ = ReadAhead()
