"""Plain snapshots of durable entities, as services see them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from runplane.domain.errors import InvalidInput
from runplane.domain.publications import Publication
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus
from runplane.domain.second_approval import SecondApprovalRule

if TYPE_CHECKING:
    from runplane.domain.transitions import RunFacts

# The names TFE accepts for organizations and workspaces. Always fullmatch: with
# re.match, "$" also matches before a trailing newline.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,90}")
# TFE's workspace tags: lowercase letters, digits, '-', '_' and ':'.
_TAG = re.compile(r"[a-z0-9_:-]{1,255}")
MAX_TAGS = 50


def valid_flag(value: object, pointer: str) -> bool:
    """A JSON boolean, or ``InvalidInput`` naming the field (a string "true" is not one)."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{pointer.lstrip('/')} must be true or false", pointer)
    return value


def valid_name(kind: str, name: str, pointer: str | None = None) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput(
            f"{kind} name {name!r} must be 1-90 letters, digits, '-' or '_'", pointer
        )
    return name


def valid_tags(tags: tuple[str, ...], pointer: str | None = None) -> tuple[str, ...]:
    """Tags as given, without repeats; each must be a TFE tag."""
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"a workspace has at most {MAX_TAGS} tags", pointer)
    for index, tag in enumerate(tags):
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            raise InvalidInput(
                f"tag {tag!r} must be 1-255 lowercase letters, digits, '-', '_' or ':'",
                f"{pointer}/{index}" if pointer else None,
            )
    return tuple(dict.fromkeys(tags))


# How long a plan may wait for a decision (default seven days, set by deployment).
MIN_APPROVAL_WINDOW = 1
MAX_APPROVAL_WINDOW = 30 * 24 * 3600


@dataclass(frozen=True)
class Organization:
    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class Workspace:
    id: str
    organization_id: str
    name: str
    created_at: datetime
    fence: int
    writer_run_id: str | None
    lock_id: str | None
    lock_run_id: str | None
    queue_length: int
    lock_holder: str | None = None
    lock_holder_display: str | None = None
    lock_reason: str | None = None
    locked_at: datetime | None = None
    current_state_version_id: str | None = None
    current_serial: int | None = None
    current_lineage: str | None = None
    # The publication check's facts of the current version, written with the pointer
    # (None on a workspace last moved before they were, or by recovery): see
    # ``publication_at``.
    current_publication: Publication | None = None
    terraform_version: str | None = None
    description: str | None = None
    tag_names: tuple[str, ...] = ()
    approval_window_seconds: int | None = None
    # "local" or "remote" (see runplane.domain.tfe_runs.ExecutionMode).
    execution_mode: str = "local"
    # The two-person rule for destructive runs (domain/second_approval.py).
    second_approval: SecondApprovalRule = field(default_factory=SecondApprovalRule)
    # A pull request's preview: the bound workspace it was made from (set when it is
    # created, never changed), whose policy sets govern it too (docs/github.md).
    preview_of: str | None = None
    # Counts the changes of the settings above (description to second approval): a
    # form that showed version N changes them only while they are still at N.
    settings_version: int = 0
    # How many notification destinations it has, and how many workspaces its applies
    # trigger: counted in the write of each change since the workspace was created
    # (None: a workspace made before they were counted). A run's events carry them.
    destination_count: int | None = None
    dependent_count: int | None = None

    @property
    def locked(self) -> bool:
        return self.lock_id is not None

    def publication_at(self, sv_id: str | None) -> Publication | None:
        """Version ``sv_id``'s publication facts if this workspace carries them: only for
        its current version, and only when they name it (a version's facts never change,
        so facts naming the pointer are that version's; any others are not used)."""
        facts = self.current_publication
        if facts is None or sv_id is None or facts.id != sv_id:
            return None
        return facts if sv_id == self.current_state_version_id else None


@dataclass(frozen=True)
class Run:
    id: str
    organization_id: str
    workspace_id: str
    kind: RunKind
    status: RunStatus
    version: int
    created_at: datetime
    updated_at: datetime
    plan_has_changes: bool | None = None
    status_reason: str | None = None
    definition_version: str | None = None
    build_sha: str | None = None
    created_by: str | None = None
    predecessor_sv_id: str | None = None
    approval_expires_at: datetime | None = None
    runner_release: str | None = None

    @property
    def facts(self) -> RunFacts:
        # The transition table loads where a run is moved, not where one is read.
        from runplane.domain.transitions import RunFacts

        return RunFacts(kind=self.kind, plan_has_changes=self.plan_has_changes)


@dataclass(frozen=True)
class RunStage:
    run_id: str
    stage: Stage
    status: StageStatus
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class AuditEvent:
    id: str
    organization_id: str
    subject_id: str
    type: str
    actor: str
    at: datetime
    details: dict[str, str]


@dataclass(frozen=True)
class ApplyLock:
    """The workspace lock an apply holds: every authorized write names both values."""

    workspace_id: str
    lock_id: str
    fence: int
    run_id: str


@dataclass(frozen=True)
class Handoff:
    """The workspace writer reservation passed to ``run_id`` by a release; ``token``
    resumes that run's wait."""

    workspace_id: str
    run_id: str
    token: str


@dataclass(frozen=True)
class Reservation:
    """The outcome of asking for the writer reservation: held now, or waiting at
    ``position``."""

    workspace_id: str
    run_id: str
    held: bool
    position: int | None = None


@dataclass(frozen=True)
class LockHolder:
    """Who holds a workspace lock: a principal reference, and a name for people."""

    ref: str
    display: str
    run_id: str | None = None

    @classmethod
    def for_run(cls, run_id: str) -> LockHolder:
        return cls(f"run:{run_id}", f"Run {run_id}", run_id)


@dataclass(frozen=True)
class Waiter:
    """A run queued for the writer reservation; ``token`` resumes its workflow."""

    workspace_id: str
    run_id: str
    token: str
    position: int
