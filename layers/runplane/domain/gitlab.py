"""GitLab sources: project bindings, webhook secret tokens and the events that start runs.

Pure rules only: no HTTP, no storage. A binding names a GitLab instance (gitlab.com or a
self-managed base URL), a project (path or numeric ID), a branch and a working directory;
its project access token is sealed by the service and never leaves it. GitLab does not
sign deliveries: it sends the webhook's secret token in ``X-Gitlab-Token``. Runplane
generates one token per binding, ``rpgl_<workspace ID>_<secret>``, so the token itself
names the binding it is checked against (before the body is even parsed), and keeps only
the secret's SHA-256, compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runplane.domain.errors import InvalidInput
from runplane.domain.github import (
    SHA,
    Ignored,
    SourceEvent,
    payload_at,
    payload_text,
)
from runplane.domain.path_filters import PathFilters
from runplane.domain.run import RunKind

PROVIDER = "gitlab"
GITLAB_COM = "https://gitlab.com"
# Deliveries and ingestions share the GitHub source records; a GitLab delivery's
# recorded ID is ``gitlab:<workspace ID>:<X-Gitlab-Event-UUID>`` (one webhook per
# binding), which no GitHub delivery ID can be (they never hold a colon).
DELIVERY_PREFIX = "gitlab:"
EVENT_UUID = re.compile(r"[A-Za-z0-9-]{1,64}")
HOOK_TOKEN_PREFIX = "rpgl_"
_HOOK_TOKEN = re.compile(r"rpgl_(ws-[A-Za-z0-9]{1,60})_([A-Za-z0-9_-]{32,100})")
_SEGMENT = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,254})"
PROJECT_PATH = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT}){{1,20}}")
PROJECT_ID = re.compile(r"[1-9][0-9]{0,15}")
MAX_BASE_URL = 200
MAX_ACCESS_TOKEN = 255
# GitLab usernames: letters, digits, underscores, dashes and dots, at most 255.
USERNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
# merge_request actions that carry code to plan (``update`` only with new commits).
PLANNED_MR_ACTIONS = frozenset({"open", "reopen", "update"})
PUSH_HOOK = "Push Hook"
MERGE_REQUEST_HOOK = "Merge Request Hook"
ZERO_SHA = "0" * 40


@dataclass(frozen=True)
class GitLabBinding:
    """A workspace bound to a GitLab project. ``access_token_sealed`` (with its wrapped
    key) is the project access token as sealed by the service; ``hook_secret_sha256``
    the digest of the webhook token's secret part. Neither is ever shown."""

    workspace_id: str
    organization_id: str
    base_url: str
    project: str
    branch: str
    working_directory: str
    push_kind: RunKind
    access_token_wrapped_key: bytes
    access_token_sealed: bytes
    hook_secret_sha256: str
    # Path filters (``domain.path_filters``), as for GitHub bindings.
    trigger_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"GitLabBinding({self.workspace_id}, {self.base_url}, {self.project})"

    @property
    def path_filters(self) -> PathFilters:
        return PathFilters(self.trigger_patterns, self.ignore_patterns)

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.base_url).netloc

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "provider": PROVIDER,
            "base_url": self.base_url,
            "project": self.project,
            "branch": self.branch,
            "working_directory": self.working_directory,
            "push_run_kind": self.push_kind.value,
            "trigger_patterns": list(self.trigger_patterns),
            "ignore_patterns": list(self.ignore_patterns),
        }

    def project_matches(self, project_id: Any, project_path: Any) -> bool:
        """Whether a delivery's project is this binding's (by numeric ID or by path)."""
        if PROJECT_ID.fullmatch(self.project):
            return isinstance(project_id, int) and str(project_id) == self.project
        return isinstance(project_path, str) and project_path.lower() == self.project


def access_token_context(workspace_id: str, organization_id: str) -> dict[str, str]:
    """What a binding's sealed access token is bound to: it opens for no other binding."""
    return {
        "purpose": "gitlab-project-access-token",
        "workspace_id": workspace_id,
        "organization_id": organization_id,
    }


def valid_base_url(value: str, *, allow_http: bool = False) -> str:
    """An https URL of a GitLab instance (no credentials, query or fragment), normalised
    without a trailing slash. ``allow_http`` admits http for loopback test servers only."""
    candidate = (value or GITLAB_COM).strip()
    try:
        parts = urllib.parse.urlsplit(candidate)
        port = parts.port
    except ValueError:
        parts, port = None, None
    loopback = parts is not None and parts.hostname in {"127.0.0.1", "localhost"}
    scheme_ok = parts is not None and (
        parts.scheme == "https" or (allow_http and loopback and parts.scheme == "http")
    )
    if (
        parts is None
        or len(candidate) > MAX_BASE_URL
        or not scheme_ok
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.query
        or parts.fragment
        or any(ord(c) < 0x21 or ord(c) == 0x7F for c in candidate)
    ):
        raise InvalidInput(
            "base_url must be the https URL of a GitLab instance (no credentials, query "
            "or fragment)",
            "/base_url",
        )
    netloc = parts.hostname.lower() + (f":{port}" if port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def valid_project(value: str) -> str:
    """A project's numeric ID, or its full path (``group/subgroup/project``, lower case:
    GitLab paths are case-insensitive)."""
    if PROJECT_ID.fullmatch(value):
        return value
    if (
        not PROJECT_PATH.fullmatch(value)
        or len(value) > 500
        or ".." in value
        or value.endswith((".git", ".atom", "."))
    ):
        raise InvalidInput(
            "project must be a GitLab project ID or its full path (group/project)", "/project"
        )
    return value.lower()


def valid_access_token(value: str) -> str:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_ACCESS_TOKEN
        or any(ord(c) < 0x21 or ord(c) > 0x7E for c in value)
    ):
        raise InvalidInput(
            "access_token must be a GitLab project access token (printable, no spaces)",
            "/access_token",
        )
    return value


# -- the webhook token ------------------------------------------------------------------


def new_hook_token(workspace_id: str) -> tuple[str, str]:
    """A new webhook token for a binding, and the digest of its secret to keep."""
    secret = secrets.token_urlsafe(32)
    return f"{HOOK_TOKEN_PREFIX}{workspace_id}_{secret}", secret_digest(secret)


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def hook_token_workspace(token: str | None) -> tuple[str, str] | None:
    """The workspace a presented token names, and its secret part; None when malformed."""
    if not token or len(token) > 200:
        return None
    match = _HOOK_TOKEN.fullmatch(token)
    return None if match is None else (match.group(1), match.group(2))


def hook_secret_matches(stored_sha256: str, presented_secret: str) -> bool:
    """Compared in constant time (digests of equal length, whatever was presented)."""
    return hmac.compare_digest(stored_sha256.encode(), secret_digest(presented_secret).encode())


def delivery_id(workspace_id: str, event_uuid: str) -> str:
    return f"{DELIVERY_PREFIX}{workspace_id}:{event_uuid}"


def workspace_of_delivery(recorded_delivery_id: str) -> str | None:
    """The bound workspace a GitLab delivery's recorded ID names; None for GitHub's."""
    if not recorded_delivery_id.startswith(DELIVERY_PREFIX):
        return None
    parts = recorded_delivery_id.split(":")
    return parts[1] if len(parts) == 3 else None


# -- events -----------------------------------------------------------------------------


def _username(value: Any) -> str | None:
    return value if isinstance(value, str) and USERNAME.fullmatch(value) else None


def gitlab_time(value: Any) -> datetime | None:
    """GitLab writes ISO 8601 (``2024-05-01T10:00:00Z``, ``...+02:00``) or, in older
    payloads, ``2024-05-01 10:00:00 UTC``; anything else (or no zone) is no time."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    text = value.strip()
    if text.endswith(" UTC"):
        text = text[: -len(" UTC")].replace(" ", "T") + "+00:00"
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else None


def parse_event(event: str, payload: Any, binding: GitLabBinding) -> SourceEvent | Ignored:
    """The source event a delivery for ``binding`` carries, or why it is ignored. The
    event's ``repository`` is ``<host>/<project path>``; ``installation_id`` is 0."""
    if event not in {PUSH_HOOK, MERGE_REQUEST_HOOK}:
        return Ignored(f"event {event[:100]!r} does not start runs")
    if not isinstance(payload, dict):
        return Ignored("the payload is not a JSON object")
    project_id = payload_at(payload, "project", "id")
    path = payload_at(payload, "project", "path_with_namespace")
    if not isinstance(path, str) or not PROJECT_PATH.fullmatch(path):
        return Ignored("the payload names no project")
    if not binding.project_matches(project_id, path):
        return Ignored(
            f"the delivery is for project {path[:200]}, not the bound project {binding.project}"
        )
    repository = f"{binding.host}/{path.lower()}"
    if event == PUSH_HOOK:
        return _push(payload, repository)
    return _merge_request(payload, repository, project_id)


def _push(payload: dict[str, Any], repository: str) -> SourceEvent | Ignored:
    if payload.get("object_kind") != "push":
        return Ignored("only pushes to branches start runs (not tags)")
    ref = payload.get("ref")
    sha = payload.get("after")
    if sha == ZERO_SHA:
        return Ignored("a deleted branch has no code to plan")
    if not isinstance(ref, str) or not ref.startswith("refs/heads/"):
        return Ignored("only pushes to branches start runs (not tags)")
    if not isinstance(sha, str) or not SHA.fullmatch(sha):
        return Ignored("the push names no commit")
    commits = payload.get("commits")
    head = None
    if isinstance(commits, list):
        head = next((c for c in commits if isinstance(c, dict) and c.get("id") == sha), None)
    before = payload.get("before")
    return SourceEvent(
        event="push",
        action=None,
        repository=repository,
        branch=ref.removeprefix("refs/heads/"),
        commit_sha=sha,
        installation_id=0,
        occurred_at=gitlab_time(payload_at(head, "timestamp")),
        sender=_username(payload.get("user_username")),
        commit_message=payload_text(payload_at(head, "message")),
        # The previous head, for the path filters' comparison (all zeros: a new branch).
        before_sha=before if isinstance(before, str) and SHA.fullmatch(before) else None,
    )


def _merge_request(
    payload: dict[str, Any], repository: str, project_id: Any
) -> SourceEvent | Ignored:
    attributes = payload.get("object_attributes")
    if payload.get("object_kind") != "merge_request" or not isinstance(attributes, dict):
        return Ignored("the payload is not a merge request event")
    action = attributes.get("action")
    iid = attributes.get("iid")
    if not isinstance(iid, int) or isinstance(iid, bool) or iid <= 0:
        return Ignored("the merge request has no number")
    if action not in PLANNED_MR_ACTIONS or (action == "update" and not attributes.get("oldrev")):
        return Ignored(f"merge request action {str(action)[:40]!r} carries no new code to plan")
    source_project = attributes.get("source_project_id")
    if not isinstance(source_project, int) or source_project != project_id:
        # A fork's code would plan with this organization's variables and credentials.
        return Ignored(
            f"merge request !{iid} comes from another project (a fork): runs start only for "
            "the project's own branches, as a fork's code would run with the workspace's "
            "variables"
        )
    base = attributes.get("target_branch")
    sha = payload_at(attributes, "last_commit", "id")
    if not isinstance(base, str) or not isinstance(sha, str) or not SHA.fullmatch(sha):
        return Ignored("the merge request names no target branch or head commit")
    return SourceEvent(
        event="merge_request",
        action=str(action),
        repository=repository,
        branch=base,
        commit_sha=sha,
        installation_id=0,
        occurred_at=gitlab_time(attributes.get("updated_at")),
        pull_request=iid,
        sender=_username(payload_at(payload, "user", "username")),
        pull_request_title=payload_text(attributes.get("title")),
        pull_request_author=None,
    )


def gitlab_state(run_status: str | None) -> str:
    """GitLab's commit status for a run: pending while it runs, then success or failed."""
    if run_status is None:
        return "pending"
    return "success" if run_status == "succeeded" else "failed"
