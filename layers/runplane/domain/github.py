"""GitHub sources: workspace bindings, webhook signatures and the events that start runs.

Pure rules only: no HTTP, no storage. A binding names a repository, a branch, a
working directory inside the repository and the GitHub App installation that may
read it; a webhook delivery is accepted only with a valid HMAC-SHA256 signature,
and only push and pull_request events can become runs.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from runplane.domain.errors import Conflict, InvalidInput
from runplane.domain.path_filters import PathDecision, PathFilters
from runplane.domain.run import RunKind

PROVIDER = "github"
SIGNATURE_PREFIX = "sha256="
# GitHub's own limits: an owner login is at most 39 characters, a repository name 100.
_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_NAME = r"[A-Za-z0-9._-]{1,100}"
REPOSITORY = re.compile(rf"{_OWNER}/{_NAME}")
SHA = re.compile(r"[0-9a-f]{40}")
DELIVERY_ID = re.compile(r"[A-Za-z0-9-]{1,100}")
MAX_BRANCH = 255
MAX_WORKING_DIRECTORY = 500
MAX_INSTALLATION_ID = 2**53
# A GitHub login (39 characters), or an App's bot account (``name[bot]``).
LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")
# Commit messages and pull request titles are kept for policies and the review, cut
# at this many characters: enough for any summary line and most bodies.
MAX_TEXT = 4096
# pull_request actions that carry new code to plan.
PLANNED_PR_ACTIONS = frozenset({"opened", "synchronize", "reopened"})
# The pull_request action (merged or not) that ends a pull request's preview workspace.
CLOSED_PR_ACTION = "closed"
# A preview workspace's name: ``<bound workspace>-pr-<number>`` (workspace names are at
# most 90 characters: a long bound name is cut to fit).
MAX_WORKSPACE_NAME = 90
# A closed pull request's preview is due for destruction this long after the close.
PREVIEW_DESTROY_DELAY = timedelta(minutes=1)
PUSH_KINDS = frozenset({RunKind.PLAN_AND_APPLY, RunKind.PLAN_ONLY})


@dataclass(frozen=True)
class Binding:
    workspace_id: str
    organization_id: str
    repository: str
    branch: str
    working_directory: str
    installation_id: int
    push_kind: RunKind
    # A pull request against the branch gets its own preview workspace (created on its
    # first event, planned and applied on each new commit, destroyed when it closes)
    # instead of a speculative plan on this workspace.
    pull_request_workspaces: bool = False
    # The preview's destroy run, once its pull request closes, applies without a
    # person's approval.
    pull_request_auto_apply_destroy: bool = False
    # Path filters (``domain.path_filters``): which changed files start a run.
    trigger_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()

    @property
    def path_filters(self) -> PathFilters:
        return PathFilters(self.trigger_patterns, self.ignore_patterns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "provider": PROVIDER,
            "repository": self.repository,
            "branch": self.branch,
            "working_directory": self.working_directory,
            "installation_id": self.installation_id,
            "push_run_kind": self.push_kind.value,
            "pull_request_workspaces": self.pull_request_workspaces,
            "pull_request_auto_apply_destroy": self.pull_request_auto_apply_destroy,
            "trigger_patterns": list(self.trigger_patterns),
            "ignore_patterns": list(self.ignore_patterns),
        }


def preview_name(bound_name: str, pull_request: int) -> str:
    """The preview workspace of a bound workspace's pull request: ``<name>-pr-<number>``."""
    suffix = f"-pr-{pull_request}"
    return bound_name[: MAX_WORKSPACE_NAME - len(suffix)] + suffix


@dataclass(frozen=True)
class PreviewWorkspace:
    """The workspace a pull request got from a binding with ``pull_request_workspaces``:
    which one (``workspace_id``), whose pull request, and the bound workspace it was
    made for. Recorded once per bound workspace and pull request, before the workspace
    is created under that ID (``workspace_created`` once it was: a recorded workspace
    missing after that was deleted, and the next event makes a new one under a new ID);
    ``closed_at`` is set when the pull request closes (and cleared when it reopens)."""

    workspace_id: str
    organization_id: str
    parent_workspace_id: str
    repository: str
    pull_request: int
    created_by: str
    created_at: datetime
    workspace_created: bool = False
    closed_at: datetime | None = None

    def description(self, parent_name: str) -> str:
        return (
            f"Preview of pull request #{self.pull_request} of {self.repository}, made from "
            f"workspace {parent_name} ({self.parent_workspace_id}); destroyed when the pull "
            "request closes."
        )


def valid_repository(value: str) -> str:
    if not REPOSITORY.fullmatch(value) or value.endswith((".git",)) or "/." in value:
        raise InvalidInput("repository must be owner/name as GitHub spells it", "/repository")
    # GitHub names are case-insensitive: bindings and events compare in lower case.
    return value.lower()


def valid_branch(value: str) -> str:
    """A branch name git accepts (the rules of git check-ref-format that matter here)."""
    bad = (
        not value
        or len(value) > MAX_BRANCH
        or value.startswith(("/", "-", "refs/"))
        or value.endswith(("/", ".", ".lock"))
        or ".." in value
        or "//" in value
        or "@{" in value
        or any(ord(c) < 0x21 or ord(c) == 0x7F or c in "~^:?*[\\" for c in value)
    )
    if bad:
        raise InvalidInput("branch is not a valid git branch name", "/branch")
    return value


def valid_working_directory(value: str) -> str:
    """A relative directory inside the repository, normalised ("" is its root)."""
    if len(value) > MAX_WORKING_DIRECTORY:
        raise InvalidInput("working_directory is too long", "/working_directory")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value) or "\\" in value:
        raise InvalidInput(
            "working_directory has control characters or backslashes", "/working_directory"
        )
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if value.startswith("/") or ".." in parts:
        raise InvalidInput(
            "working_directory must be a relative path inside the repository (no '..')",
            "/working_directory",
        )
    return "/".join(parts)


def valid_installation_id(value: int) -> int:
    if isinstance(value, bool) or not 0 < value < MAX_INSTALLATION_ID:
        raise InvalidInput("installation_id must be a positive integer", "/installation_id")
    return value


def valid_push_kind(value: str) -> RunKind:
    try:
        kind = RunKind(value)
    except ValueError:
        kind = None
    if kind not in PUSH_KINDS:
        raise InvalidInput("push_run_kind must be plan_and_apply or plan_only", "/push_run_kind")
    assert kind is not None
    return kind


# -- webhooks ---------------------------------------------------------------------------


def signature_matches(secret: bytes, body: bytes, header: str | None) -> bool:
    """``header`` is ``sha256=<hex HMAC-SHA256 of body>``; compared in constant time."""
    if not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header[len(SIGNATURE_PREFIX) :].encode())


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class SourceEvent:
    """What a push or pull_request delivery asks for: code at one commit of one branch."""

    event: str  # push | pull_request
    action: str | None
    repository: str
    branch: str  # pushed branch, or the pull request's base branch
    commit_sha: str
    installation_id: int
    occurred_at: datetime | None
    pull_request: int | None = None
    sender: str | None = None
    """The GitHub account whose action sent the delivery (the pusher, or whoever opened
    or updated the pull request): GitHub authenticated it, unlike a commit's author
    line, which anyone can write."""
    commit_message: str | None = None
    pull_request_title: str | None = None
    pull_request_author: str | None = None
    # A push's previous head (all zeros for a new branch) and whether it was forced:
    # what the changed files are compared against, for path filters.
    before_sha: str | None = None
    forced: bool = False

    @property
    def ref(self) -> str:
        if self.pull_request is not None:
            return f"refs/pull/{self.pull_request}/head"
        return f"refs/heads/{self.branch}"

    @property
    def speculative(self) -> bool:
        return self.event == "pull_request"

    @property
    def closes(self) -> bool:
        """A pull request closed (merged or not): its preview workspaces are destroyed."""
        return self.event == "pull_request" and self.action == CLOSED_PR_ACTION


@dataclass(frozen=True)
class Delivery:
    """A webhook delivery as recorded once: what it was, what it was answered, and the
    source ingestion it started (if any)."""

    delivery_id: str
    event: str
    body_sha256: str
    status_code: int
    outcome: dict[str, Any]
    source_id: str | None


class DeliveryAlreadyRecorded(Conflict):
    """The delivery ID was recorded before: ``recorded`` is that first record, which
    stands (nothing else was written)."""

    code = "DELIVERY_ALREADY_RECORDED"

    def __init__(self, recorded: Delivery) -> None:
        super().__init__(f"delivery {recorded.delivery_id} was already received")
        self.recorded = recorded


@dataclass(frozen=True)
class IngestionTarget:
    """One bound workspace an ingestion recorded a configuration version for, and the
    run made of it (or why none could be: ``error``, a refusal's code). For a pull
    request's preview, ``workspace_id`` is the preview workspace and
    ``bound_workspace_id`` the bound workspace it was made for."""

    workspace_id: str
    working_directory: str
    kind: RunKind
    configuration_version_id: str
    configuration_artifact_id: str
    run_id: str | None = None
    error: str | None = None
    bound_workspace_id: str | None = None

    @property
    def binding_workspace_id(self) -> str:
        """The workspace whose binding this target follows."""
        return self.bound_workspace_id or self.workspace_id


@dataclass(frozen=True)
class Ingestion:
    """A source ingestion: the commit one accepted delivery names, fetched for the
    workspaces bound to it. ``status`` is pending until the commit is fetched, then
    ready (with ``targets``) or failed (with ``reason``); never tokens or content."""

    id: str
    organization_id: str
    delivery_id: str
    event: str
    action: str | None
    repository: str
    branch: str
    ref: str
    commit_sha: str
    installation_id: int
    pull_request: int | None
    sender: str | None
    commit_message: str | None
    pull_request_title: str | None
    pull_request_author: str | None
    status: str
    workflow_id: str
    created_at: datetime
    updated_at: datetime
    archive_sha256: str | None = None
    archive_size: int | None = None
    targets: tuple[IngestionTarget, ...] = ()
    reason: str | None = None
    before_sha: str | None = None
    forced: bool = False
    # What each bound workspace's path filters made of the change (recorded when the
    # ingestion is ready; a skipped workspace has no target).
    path_decisions: tuple[PathDecision, ...] = ()

    @classmethod
    def pending(
        cls,
        source_id: str,
        organization_id: str,
        delivery_id: str,
        event: SourceEvent,
        now: datetime,
    ) -> Ingestion:
        """The ingestion an accepted delivery starts (its workflow named after it)."""
        return cls(
            id=source_id,
            organization_id=organization_id,
            delivery_id=delivery_id,
            event=event.event,
            action=event.action,
            repository=event.repository,
            branch=event.branch,
            ref=event.ref,
            commit_sha=event.commit_sha,
            installation_id=event.installation_id,
            pull_request=event.pull_request,
            sender=event.sender,
            commit_message=event.commit_message,
            pull_request_title=event.pull_request_title,
            pull_request_author=event.pull_request_author,
            status="pending",
            workflow_id=source_id,
            created_at=now,
            updated_at=now,
            before_sha=event.before_sha,
            forced=event.forced,
        )

    @property
    def speculative(self) -> bool:
        return self.event == "pull_request"

    @property
    def skipped(self) -> tuple[PathDecision, ...]:
        """The bound workspaces whose path filters skipped this change."""
        return tuple(d for d in self.path_decisions if not d.triggered)


@dataclass(frozen=True)
class FetchedConfiguration:
    """A target's configuration cut from the fetched commit and stored as an artifact:
    the configuration version an ingestion records for it."""

    target: IngestionTarget
    organization_id: str
    sha256: str
    size: int
    speculative: bool


@dataclass(frozen=True)
class Ignored:
    """A delivery acknowledged without doing anything, and why."""

    reason: str


def payload_at(payload: Any, *path: str) -> Any:
    """The value at ``path`` in a webhook payload, or None where its shape differs."""
    for key in path:
        if not isinstance(payload, dict):
            return None
        payload = payload.get(key)
    return payload


def _login(value: Any) -> str | None:
    return value if isinstance(value, str) and LOGIN.fullmatch(value) else None


def payload_text(value: Any) -> str | None:
    """A payload's string, bounded; None for anything else."""
    return value[:MAX_TEXT] if isinstance(value, str) else None


def _time(value: Any) -> datetime | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        from datetime import UTC

        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else None
    return None


def parse_event(event: str, payload: Any) -> SourceEvent | Ignored:
    """The source event a delivery carries, or why it is ignored."""
    if event == "ping":
        return Ignored("ping: the webhook is reachable")
    if event not in {"push", "pull_request"}:
        return Ignored(f"event {event!r} does not start runs")
    if not isinstance(payload, dict):
        return Ignored("the payload is not a JSON object")
    repository = payload_at(payload, "repository", "full_name")
    installation = payload_at(payload, "installation", "id")
    if not isinstance(repository, str) or not REPOSITORY.fullmatch(repository):
        return Ignored("the payload names no repository")
    if not isinstance(installation, int) or isinstance(installation, bool):
        return Ignored("the delivery comes from no GitHub App installation")
    if event == "push":
        return _push(payload, repository.lower(), installation)
    return _pull_request(payload, repository.lower(), installation)


def _push(payload: dict[str, Any], repository: str, installation: int) -> SourceEvent | Ignored:
    ref = payload.get("ref")
    sha = payload.get("after")
    if payload.get("deleted") is True:
        return Ignored("a deleted branch has no code to plan")
    if not isinstance(ref, str) or not ref.startswith("refs/heads/"):
        return Ignored("only pushes to branches start runs (not tags)")
    if not isinstance(sha, str) or not SHA.fullmatch(sha):
        return Ignored("the push names no commit")
    before = payload.get("before")
    occurred = _time(payload_at(payload, "head_commit", "timestamp")) or _time(
        payload_at(payload, "repository", "pushed_at")
    )
    return SourceEvent(
        event="push",
        action=None,
        repository=repository,
        branch=ref.removeprefix("refs/heads/"),
        commit_sha=sha,
        installation_id=installation,
        occurred_at=occurred,
        sender=_login(payload_at(payload, "sender", "login")),
        commit_message=payload_text(payload_at(payload, "head_commit", "message")),
        before_sha=before if isinstance(before, str) and SHA.fullmatch(before) else None,
        forced=payload.get("forced") is True,
    )


def _pull_request(
    payload: dict[str, Any], repository: str, installation: int
) -> SourceEvent | Ignored:
    action = payload.get("action")
    if action not in PLANNED_PR_ACTIONS and action != CLOSED_PR_ACTION:
        return Ignored(f"pull_request action {action!r} carries no new code to plan")
    base = payload_at(payload, "pull_request", "base", "ref")
    sha = payload_at(payload, "pull_request", "head", "sha")
    number = payload_at(payload, "pull_request", "number")
    if not isinstance(base, str) or not isinstance(sha, str) or not SHA.fullmatch(sha):
        return Ignored("the pull request names no base branch or head commit")
    if not isinstance(number, int) or isinstance(number, bool):
        return Ignored("the pull request has no number")
    head_repository = payload_at(payload, "pull_request", "head", "repo", "full_name")
    if not isinstance(head_repository, str) or head_repository.lower() != repository:
        # A fork's code would plan (and, in a preview workspace, apply) with this
        # organization's variables and credentials: only the repository's own branches.
        source = head_repository if isinstance(head_repository, str) else "a deleted fork"
        return Ignored(
            f"pull request #{number} comes from {str(source)[:MAX_TEXT]}, not a branch of "
            f"{repository}: runs start only for the repository's own branches, as a fork's "
            "code would run with the workspace's variables"
        )
    return SourceEvent(
        event="pull_request",
        action=str(action),
        repository=repository,
        branch=base,
        commit_sha=sha,
        installation_id=installation,
        occurred_at=_time(payload_at(payload, "pull_request", "updated_at")),
        pull_request=number,
        sender=_login(payload_at(payload, "sender", "login")),
        pull_request_title=payload_text(payload_at(payload, "pull_request", "title")),
        pull_request_author=_login(payload_at(payload, "pull_request", "user", "login")),
    )


def status_execution_name(event_id: str) -> str:
    """The source-workflow execution that reports the commit status of a run's ending
    event (``<run ID>.<version>-status``): one per event, whatever redelivers it."""
    return f"{event_id}-status"


def commit_state(run_status: str) -> str:
    """The commit status a finished run reports: success only for a completed plan."""
    return "success" if run_status == "succeeded" else "failure"
