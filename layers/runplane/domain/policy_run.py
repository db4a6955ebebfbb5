"""What the input shapes say about the run, in each imitated tool's own field names.

Pure: standard library only. ``RunMetadata`` is what the control plane knows for
free when it builds a run's policy inputs (workspace, kind, tags); ``RunOrigin`` is
what needs reading (the run's message, whether a drift schedule started it, the
commit it came from) and is asked for only when a set of a tool's shape reads it.

Nothing here is a secret: tags, a commit's message, logins and identifiers. A value
Runplane does not have is left out, never invented, except where the imitated tool
always sets a field (a Spacelift run always has a commit): there it is empty, so a
policy comparing it against an allow list denies rather than passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.domain.errors import InvalidInput
from runplane.domain.policy_plan import known_fields
from runplane.domain.run import RunKind
from runplane.domain.run_options import RunOptions


@dataclass(frozen=True)
class VcsOrigin:
    """The commit a run's configuration came from (``docs/github.md``, provenance)."""

    repository: str
    branch: str
    commit_sha: str
    working_directory: str = ""
    event: str = "push"
    sender: str | None = None
    """The GitHub login whose push or pull request action sent the delivery."""
    commit_message: str | None = None
    pull_request: int | None = None
    pull_request_title: str | None = None
    pull_request_author: str | None = None

    @classmethod
    def from_provenance(cls, source: Mapping[str, Any] | None) -> VcsOrigin | None:
        """From a run review's ``source`` (None when the run has no source)."""
        if not source:
            return None
        return cls(
            repository=str(source["repository"]),
            branch=str(source["branch"]),
            commit_sha=str(source["commit_sha"]),
            working_directory=str(source.get("working_directory") or ""),
            event=str(source.get("event") or "push"),
            sender=source.get("sender"),
            commit_message=source.get("commit_message"),
            pull_request=source.get("pull_request"),
            pull_request_title=source.get("pull_request_title"),
            pull_request_author=source.get("pull_request_author"),
        )


@dataclass(frozen=True)
class RunOrigin:
    """Where the run came from: read from its records only when a shape needs it."""

    message: str | None = None
    drift_detection: bool = False
    """A drift-detection schedule created the run."""
    vcs: VcsOrigin | None = None


@dataclass(frozen=True)
class RunMetadata:
    """What the shapes may say about the run; ``None`` is "not known" and left out."""

    workspace: str
    kind: str
    engine_version: str
    run_id: str | None = None
    created_at: str | None = None
    """ISO 8601."""
    workspace_id: str | None = None
    """The workspace's ID; a local evaluation without one uses the name."""
    tags: tuple[str, ...] = ()
    """The workspace's tags (Spacelift calls them a stack's labels)."""
    options: RunOptions = field(default_factory=RunOptions)
    """Destroy, refresh-only, targets and replacements, as the run asked."""
    origin: Callable[[], RunOrigin] = field(default=RunOrigin, compare=False, repr=False)
    """Reads the run's origin; called at most once per input set, and only for a shape
    that says something about it."""

    @property
    def stable_id(self) -> str:
        return self.workspace_id or self.workspace

    @property
    def dry(self) -> bool:
        """A run that will apply nothing whatever the plan (plan-only, speculative)."""
        return self.kind != "plan_and_apply"


# -- each tool's run document ---------------------------------------------------------------------


def hcp_run(meta: RunMetadata, origin: RunOrigin) -> dict[str, Any]:
    """``input.run`` in HCP Terraform's field names, where Runplane has them."""
    run = known_fields(
        id=meta.run_id,
        created_at=meta.created_at,
        kind=meta.kind,
        message=origin.message or "",
        speculative=meta.dry,
        is_destroy=meta.options.destroy,
        workspace={"id": meta.stable_id, "name": meta.workspace, "tags": list(meta.tags)},
    )
    # Null for a run that did not come from a repository, as HCP Terraform's is.
    run["commit_sha"] = origin.vcs.commit_sha if origin.vcs else None
    if not meta.options.default:
        # Only for a run that asked for any, so a plain run's document keeps its digest.
        run["refresh_only"] = meta.options.refresh_only
        run["target_addrs"] = list(meta.options.targets) or None
        run["replace_addrs"] = list(meta.options.replacements) or None
    return run


def scalr_tfrun(meta: RunMetadata, origin: RunOrigin) -> dict[str, Any]:
    """``input.tfrun`` in Scalr's field names, where Runplane has them: ``vcs`` is null
    for a run that did not come from a repository, as Scalr's is."""
    vcs = origin.vcs
    return known_fields(
        id=meta.run_id,
        created_at=meta.created_at,
        message=origin.message or "",
        is_destroy=meta.options.destroy,
        is_dry=meta.dry,
        # Scalr's workspace tags are an object keyed by tag name.
        workspace={
            "id": meta.stable_id,
            "name": meta.workspace,
            "tags": dict.fromkeys(meta.tags, ""),
        },
    ) | {"vcs": _scalr_vcs(vcs) if vcs else None}


def _scalr_vcs(vcs: VcsOrigin) -> dict[str, Any]:
    commit = known_fields(
        sha=vcs.commit_sha,
        message=vcs.commit_message,
        author=known_fields(username=vcs.sender) if vcs.sender else None,
    )
    pull_request = None
    if vcs.pull_request is not None:
        pull_request = known_fields(
            id=vcs.pull_request, title=vcs.pull_request_title, author=vcs.pull_request_author
        )
    return {
        "repository_id": vcs.repository,
        "path": vcs.working_directory,
        "branch": vcs.branch,
        "commit": commit,
        "pull_request": pull_request,
    }


def spacelift_commit(origin: RunOrigin) -> dict[str, Any]:
    """``input.spacelift.commit``: every field present, empty when the run came from no
    repository (an upload), so an allow list of authors denies it."""
    vcs = origin.vcs
    return {
        "author": (vcs.sender or "") if vcs else "",
        "branch": vcs.branch if vcs else "",
        "hash": vcs.commit_sha if vcs else "",
        "message": (vcs.commit_message or "") if vcs else "",
    }


def spacelift_context(
    meta: RunMetadata, origin: RunOrigin, changes: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``input.spacelift``: the commit, the run and the stack (the workspace)."""
    commit = spacelift_commit(origin)
    run = known_fields(
        id=meta.run_id,
        created_at=meta.created_at,
        # A tracked run may apply; a proposed one never does.
        type="PROPOSED" if meta.dry else "TRACKED",
        state="PLANNING",  # plan policies judge the run while it plans
        commit=commit,
        changes=list(changes),
        drift_detection=origin.drift_detection,
    )
    stack = {"id": meta.stable_id, "name": meta.workspace, "labels": list(meta.tags)}
    if origin.vcs is not None:
        stack |= {
            "repository": origin.vcs.repository,
            "branch": origin.vcs.branch,
            "project_root": origin.vcs.working_directory,
        }
    return {"commit": commit, "run": run, "stack": stack}


_SPACELIFT_ACTIONS: Final[Mapping[tuple[str, ...], str]] = {
    ("create",): "added",
    ("update",): "changed",
    ("delete",): "deleted",
    ("delete", "create"): "destroy-Before-create-replaced",
    ("create", "delete"): "create-Before-destroy-replaced",
}


def spacelift_changes(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``input.spacelift.run.changes`` from the sanitized plan document: one entry per
    resource or output the plan changes, with the values the plan's ``after`` (or, for a
    deletion, ``before``) holds, already masked."""
    changes: list[dict[str, Any]] = []
    for change in plan.get("resource_changes") or []:
        if change.get("mode") != "managed":
            continue
        body = change.get("change") or {}
        action = _SPACELIFT_ACTIONS.get(tuple(body.get("actions") or ()))
        if action is None:
            continue
        values = body.get("before") if action == "deleted" else body.get("after")
        entity = known_fields(
            address=change.get("address"),
            name=change.get("name"),
            type=change.get("type"),
            entity_type="resource",
            entity_vendor="terraform",
            data={"values": values if values is not None else {}},
        )
        changes.append({"action": action, "entity": entity, "phase": "plan"})
    for name, body in sorted((plan.get("output_changes") or {}).items()):
        action = _SPACELIFT_ACTIONS.get(tuple((body or {}).get("actions") or ()))
        if action is None:
            continue
        value = body.get("before") if action == "deleted" else body.get("after")
        entity = {
            "address": f"output.{name}",
            "name": name,
            "type": "output",
            "entity_type": "output",
            "entity_vendor": "terraform",
            "data": {"value": value},
        }
        changes.append({"action": action, "entity": entity, "phase": "plan"})
    return changes


# -- the run context a local ``policy test`` is given ----------------------------------------------

RUN_KINDS: Final = tuple(kind.value for kind in RunKind)
RUN_CONTEXT_FIELDS: Final = frozenset({"workspace", "kind", "tags", "message"}) | {
    "drift_detection",
    "vcs",
}
_VCS_FIELDS: Final = frozenset(
    {"repository", "branch", "commit_sha", "working_directory", "event", "sender"}
    | {"commit_message", "pull_request", "pull_request_title", "pull_request_author"}
)


def run_context(
    document: Any,
    *,
    engine_version: str,
    workspace: str | None = None,
    kind: str | None = None,
) -> RunMetadata:
    """The run a local evaluation stands for, from a ``--run-context`` document
    (``docs/policy.md``): ``workspace``, ``kind``, ``tags``, ``message``,
    ``drift_detection`` and ``vcs`` (the fields of a run review's ``source``). A
    ``workspace`` or ``kind`` given as an argument wins over the document's; without
    either, the workspace is ``local`` and the kind ``plan_and_apply``."""
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise InvalidInput("the run context is not a JSON object")
    unknown = sorted(set(document) - RUN_CONTEXT_FIELDS)
    if unknown:
        raise InvalidInput(
            f"the run context has unknown field(s) {', '.join(unknown)}; it may give "
            f"{', '.join(sorted(RUN_CONTEXT_FIELDS))}"
        )
    tags = document.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidInput("the run context's tags must be a list of strings", "/tags")
    message = document.get("message")
    if message is not None and not isinstance(message, str):
        raise InvalidInput("the run context's message must be a string", "/message")
    drift = document.get("drift_detection", False)
    if not isinstance(drift, bool):
        raise InvalidInput(
            "the run context's drift_detection must be true or false", "/drift_detection"
        )
    origin = RunOrigin(message=message, drift_detection=drift, vcs=_vcs(document.get("vcs")))
    kind = kind or _text(document, "kind", "plan_and_apply")
    if kind not in RUN_KINDS:
        raise InvalidInput(
            f"the run context's kind {kind!r} is not one of {', '.join(RUN_KINDS)}", "/kind"
        )
    return RunMetadata(
        workspace=workspace or _text(document, "workspace", "local"),
        kind=kind,
        engine_version=engine_version,
        tags=tuple(dict.fromkeys(tags)),
        origin=lambda: origin,
    )


def _text(document: Mapping[str, Any], key: str, default: str) -> str:
    value = document.get(key, default)
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"the run context's {key} must be a non-empty string", f"/{key}")
    return value


def _vcs(vcs: Any) -> VcsOrigin | None:
    if vcs is None:
        return None
    if not isinstance(vcs, Mapping):
        raise InvalidInput("the run context's vcs must be an object or null", "/vcs")
    unknown = sorted(set(vcs) - _VCS_FIELDS)
    missing = sorted({"repository", "branch", "commit_sha"} - set(vcs))
    if unknown or missing:
        raise InvalidInput(
            "the run context's vcs "
            + (f"has unknown field(s) {', '.join(unknown)}" if unknown else "")
            + (" and " if unknown and missing else "")
            + (f"lacks {', '.join(missing)}" if missing else ""),
            "/vcs",
        )
    texts = _VCS_FIELDS - {"pull_request"}
    for key in texts & set(vcs):
        if vcs[key] is not None and not isinstance(vcs[key], str):
            raise InvalidInput(f"the run context's vcs.{key} must be a string", f"/vcs/{key}")
    number = vcs.get("pull_request")
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        raise InvalidInput(
            "the run context's vcs.pull_request must be a number", "/vcs/pull_request"
        )
    return VcsOrigin.from_provenance(vcs)
