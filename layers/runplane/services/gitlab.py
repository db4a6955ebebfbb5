"""Runs from GitLab: project bindings, the webhook, and the source workflow's GitLab steps.

Same shape as ``services.github``: the webhook only verifies the binding's secret token,
records the delivery (with its pending ingestion, in one conditional write, in the same
source records GitHub uses) and starts the source workflow with the ingestion's ID. The
steps open the binding's sealed project access token in memory only, download the
commit's archive, record the configuration version, create the run, and post commit
statuses and the plan note for merge requests.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from runplane.adapters.gitlab import GitLabProject
from runplane.adapters.keys import DataKeys
from runplane.adapters.sealed import Sealed, seal, unseal
from runplane.adapters.source_archive import working_directory_archive
from runplane.adapters.workflow import Workflow
from runplane.domain.artifacts import ArtifactKind
from runplane.domain.clock import Clock
from runplane.domain.entities import Run
from runplane.domain.errors import (
    GitHubUnavailable,
    InvalidBody,
    InvalidInput,
    NotFound,
    RunAlreadyExists,
    RunplaneError,
    SourceRefused,
    WebhookTokenInvalid,
    WebhookTooLarge,
)
from runplane.domain.github import (
    Delivery,
    DeliveryAlreadyRecorded,
    FetchedConfiguration,
    Ignored,
    Ingestion,
    IngestionTarget,
    SourceEvent,
    body_digest,
    valid_branch,
    valid_push_kind,
    valid_working_directory,
)
from runplane.domain.gitlab import (
    EVENT_UUID,
    GitLabBinding,
    access_token_context,
    delivery_id,
    gitlab_state,
    hook_secret_matches,
    hook_token_workspace,
    new_hook_token,
    parse_event,
    valid_access_token,
    valid_base_url,
    valid_project,
    workspace_of_delivery,
)
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind, derived_id
from runplane.domain.path_filters import ChangedFiles, valid_patterns
from runplane.domain.run import RunKind
from runplane.runner.archive import ArchiveLimits
from runplane.services.artifacts import ArtifactStore
from runplane.services.audit import AuditTrail
from runplane.services.github import SOURCE_PERMISSIONS, STATUS_CONTEXT
from runplane.services.github_reports import PullRequestReports
from runplane.services.gitlab_path_filters import path_decision, skipped_status
from runplane.services.lifecycle import RunLifecycle
from runplane.services.repositories.github import GitHubSourceStore
from runplane.services.repositories.gitlab import GitLabBindingStore
from runplane.services.runs import Runs
from runplane.services.source_ingestions import (
    WebhookReply,
    adopt_run,
    fail_ingestion,
    refuse_stale,
    repeat_delivery,
    start_ingestion,
)
from runplane.services.workspaces import Workspaces

logger = logging.getLogger("runplane.gitlab")

_SPOOL_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class GitLabConfig:
    delivery_window: timedelta
    webhook_max_bytes: int
    archive_max_bytes: int
    review_url: str
    # http base URLs on loopback (test servers) only; https everywhere else.
    allow_http: bool = False


@dataclass(frozen=True)
class BoundProject:
    """A binding just made, with its webhook token: shown once, never stored."""

    binding: GitLabBinding
    webhook_token: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.binding.to_dict(), "webhook_token": self.webhook_token}


class ProjectClient(Protocol):
    def download_archive(self, sha: str, sink: Any, max_bytes: int) -> Any: ...

    def post_status(self, sha: str, status: Mapping[str, str]) -> None: ...

    def create_note(self, merge_request: int, body: str) -> int: ...

    def edit_note(self, merge_request: int, note_id: int, body: str) -> None: ...

    def find_note(self, merge_request: int, marker: str) -> int | None: ...

    def merge_request_files(self, merge_request: int) -> ChangedFiles: ...

    def compare_files(self, before: str, after: str) -> ChangedFiles: ...


class MergeRequestThread:
    """One merge request's notes as the plan comment's thread (``CommentThread``): the
    project client holds its own token, so the thread's ``token`` is unused."""

    def __init__(self, client: ProjectClient, merge_request: int) -> None:
        self._client = client
        self._merge_request = merge_request

    def create_comment(self, token: str, repository: str, number: int, body: str) -> int:
        return self._client.create_note(self._merge_request, body)

    def edit_comment(self, token: str, repository: str, comment_id: int, body: str) -> None:
        self._client.edit_note(self._merge_request, comment_id, body)

    def find_comment(self, token: str, repository: str, number: int, marker: str) -> int | None:
        return self._client.find_note(self._merge_request, marker)


def gitlab_source_principal(source_id: str, binding: GitLabBinding) -> Principal:
    """What a GitLab ingestion acts as: create and read runs of its bound workspace."""
    return Principal(
        kind=PrincipalKind.SOURCE,
        id=source_id,
        organization_id=binding.organization_id,
        permissions=SOURCE_PERMISSIONS,
        display=f"GitLab source {source_id}",
        workspace_id=binding.workspace_id,
    )


def is_gitlab_ingestion(source: Ingestion | None) -> bool:
    return source is not None and workspace_of_delivery(source.delivery_id) is not None


class GitLabSources:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        runs: Runs,
        lifecycle: RunLifecycle,
        artifacts: ArtifactStore,
        workflow: Workflow | None,
        keys: DataKeys,
        config: GitLabConfig,
        bindings: GitLabBindingStore,
        sources: GitHubSourceStore,
        project: Callable[[str, str, str], ProjectClient] = GitLabProject,
        reports: PullRequestReports | None = None,
        refusals: AuditTrail | None = None,
    ) -> None:
        # Where a refused delivery is recorded (the security audit trail).
        self._refusals = refusals
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._runs = runs
        self._lifecycle = lifecycle
        self._artifacts = artifacts
        self._workflow = workflow
        self._keys = keys
        self._config = config
        self._bindings = bindings
        self._sources = sources
        self._project = project
        self._reports = reports

    # -- bindings ---------------------------------------------------------------------------

    def bind(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        base_url: str,
        project: str,
        branch: str,
        working_directory: str,
        push_run_kind: str,
        access_token: str,
        trigger_patterns: list[str] | None = None,
        ignore_patterns: list[str] | None = None,
    ) -> BoundProject:
        """Bind (or rebind, replacing the whole binding and its webhook token)."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        valid_url = valid_base_url(base_url, allow_http=self._config.allow_http)
        valid = (
            valid_project(project),
            valid_branch(branch),
            valid_working_directory(working_directory),
            valid_push_kind(push_run_kind),
            valid_access_token(access_token),
        )
        filters = (
            valid_patterns(trigger_patterns or [], "trigger_patterns"),
            valid_patterns(ignore_patterns or [], "ignore_patterns"),
        )
        sealed = seal(
            self._keys,
            access_token_context(workspace.id, workspace.organization_id),
            valid[4].encode(),
        )
        token, digest = new_hook_token(workspace.id)
        binding = GitLabBinding(
            workspace_id=workspace.id,
            organization_id=workspace.organization_id,
            base_url=valid_url,
            project=valid[0],
            branch=valid[1],
            working_directory=valid[2],
            push_kind=valid[3],
            access_token_wrapped_key=sealed.wrapped_key,
            access_token_sealed=sealed.ciphertext,
            hook_secret_sha256=digest,
            trigger_patterns=filters[0],
            ignore_patterns=filters[1],
        )
        self._bindings.put(binding, self._bindings.binding(workspace.id))
        return BoundProject(binding, token)

    def binding(self, principal: Principal, workspace_id: str) -> GitLabBinding:
        workspace = self._workspaces.by_id(principal, workspace_id)
        found = self._bindings.binding(workspace.id)
        if found is None or found.organization_id != workspace.organization_id:
            raise NotFound("GitLab binding of workspace", workspace_id)
        return found

    def unbind(self, principal: Principal, workspace_id: str) -> None:
        # The permission before the binding is looked for, as for GitHub.
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        bound = self.binding(principal, workspace.id)
        self._bindings.delete(bound)

    # -- the webhook ------------------------------------------------------------------------

    def receive(
        self, headers: Mapping[str, str], body: bytes, source_address: str | None = None
    ) -> WebhookReply:
        """Verify, deduplicate and record one delivery; start its source workflow. A
        refused delivery writes one refused audit record and nothing else: under the
        organization of the workspace its token names (when that workspace is bound),
        else under the deployment's trail."""
        try:
            return self._receive(headers, body)
        except RunplaneError as refused:
            if self._refusals is not None and 400 <= refused.http_status < 500:
                self._record_refusal(refused, headers, source_address)
            raise

    def _record_refusal(
        self, refused: RunplaneError, headers: Mapping[str, str], source_address: str | None
    ) -> None:
        assert self._refusals is not None
        lowered = {k.lower(): v for k, v in headers.items()}
        named = hook_token_workspace(lowered.get("x-gitlab-token"))
        binding = None if named is None else self._bindings.binding(named[0])
        event_uuid = lowered.get("x-gitlab-event-uuid", "")
        self._refusals.webhook_refused(
            "gitlab",
            refused.code,
            organization_id=binding.organization_id if binding else None,
            object_kind="workspace" if binding else "webhook",
            object_id=binding.workspace_id if binding else "gitlab",
            delivery_id=event_uuid if EVENT_UUID.fullmatch(event_uuid) else None,
            source_address=source_address,
        )

    def _receive(self, headers: Mapping[str, str], body: bytes) -> WebhookReply:
        config = self._config
        if len(body) > config.webhook_max_bytes:
            raise WebhookTooLarge(
                f"webhook bodies are limited to {config.webhook_max_bytes} bytes; "
                "nothing was recorded"
            )
        lowered = {k.lower(): v for k, v in headers.items()}
        binding = self._authenticated(lowered.get("x-gitlab-token"))
        event_uuid = lowered.get("x-gitlab-event-uuid", "")
        event = lowered.get("x-gitlab-event", "")
        if not EVENT_UUID.fullmatch(event_uuid):
            raise InvalidInput("the X-Gitlab-Event-UUID header is missing or malformed")
        if not event or len(event) > 100:
            raise InvalidInput("the X-Gitlab-Event header is missing or malformed")
        recorded_id = delivery_id(binding.workspace_id, event_uuid)
        digest = body_digest(body)
        existing = self._sources.delivery(recorded_id)
        if existing is not None:
            return self._repeat(existing, digest)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            raise InvalidBody("the webhook body is not JSON; nothing was recorded") from None
        parsed = parse_event(event, payload, binding)
        if isinstance(parsed, Ignored):
            return self._record(recorded_id, event, digest, 200, parsed.reason, None, binding)
        refuse_stale(
            recorded_id, parsed.occurred_at, self._clock.now(), self._config.delivery_window
        )
        if parsed.branch != binding.branch:
            reason = f"the bound branch is {binding.branch}, not {parsed.branch[:255]}"
            return self._record(recorded_id, event, digest, 200, reason, None, binding)
        return self._record(recorded_id, event, digest, 202, None, parsed, binding)

    def _authenticated(self, token: str | None) -> GitLabBinding:
        """The binding whose webhook token was presented; any doubt is the same 401."""
        named = hook_token_workspace(token)
        binding = None if named is None else self._bindings.binding(named[0])
        if named is None or binding is None:
            # Compared anyway, so an unknown binding takes as long as a wrong secret.
            hook_secret_matches("0" * 64, "" if named is None else named[1])
            raise WebhookTokenInvalid()
        if not hook_secret_matches(binding.hook_secret_sha256, named[1]):
            raise WebhookTokenInvalid()
        return binding

    def _record(
        self,
        recorded_id: str,
        event: str,
        digest: str,
        status: int,
        reason: str | None,
        parsed: SourceEvent | None,
        binding: GitLabBinding,
    ) -> WebhookReply:
        now = self._clock.now()
        source = None
        outcome: dict[str, Any] = {"delivery_id": recorded_id, "event": event}
        if parsed is None:
            outcome.update(status="ignored", reason=reason)
        else:
            source_id = self._ids.new(IdKind.SOURCE_INGESTION)
            outcome.update(status="accepted", source_id=source_id)
            source = Ingestion.pending(source_id, binding.organization_id, recorded_id, parsed, now)
            if parsed.pull_request is not None:
                source = replace(source, ref=f"refs/merge-requests/{parsed.pull_request}/head")
        delivery = Delivery(recorded_id, event, digest, status, outcome, outcome.get("source_id"))
        try:
            self._sources.record_delivery(delivery, received_at=now, starts=source)
        except DeliveryAlreadyRecorded as seen:
            return self._repeat(seen.recorded, digest)
        if source is not None:
            self._start(source.id)
        return WebhookReply(status, outcome)

    def _repeat(self, recorded: Delivery, digest: str) -> WebhookReply:
        return repeat_delivery(self._sources, recorded, digest, self._start)

    def _start(self, source_id: str) -> None:
        start_ingestion(self._workflow, source_id)

    # -- the source workflow ----------------------------------------------------------------

    def owns(self, source_id: str) -> bool:
        """Whether an ingestion came from GitLab (the workflow's steps ask, then call here)."""
        return is_gitlab_ingestion(self._sources.ingestion(source_id))

    def owns_run(self, run_id: str) -> bool:
        try:
            run = self._lifecycle.runs.get(run_id)
        except NotFound:
            return False
        return self._source_of(run) is not None

    def _bound(self, source: Ingestion) -> GitLabBinding | None:
        workspace_id = workspace_of_delivery(source.delivery_id)
        binding = None if workspace_id is None else self._bindings.binding(workspace_id)
        if binding is None or binding.organization_id != source.organization_id:
            return None
        return binding

    def _client(self, binding: GitLabBinding) -> ProjectClient:
        token = unseal(
            self._keys,
            access_token_context(binding.workspace_id, binding.organization_id),
            Sealed(binding.access_token_wrapped_key, binding.access_token_sealed),
        ).decode()
        return self._project(binding.base_url, binding.project, token)

    def ingest(self, source_id: str) -> dict[str, Any]:
        """Fetch the commit and record the bound workspace's configuration version."""
        source = self._ingestion(source_id)
        if source.status != "pending":
            return {"source_id": source_id, "status": source.status}
        binding = self._bound(source)
        try:
            if binding is None:
                raise SourceRefused("the workspace is no longer bound to this GitLab project")
            return self._ingest(source, binding)
        except SourceRefused as refused:
            self._sources.mark_failed(source_id, refused.message, self._clock.now())
            return {"source_id": source_id, "status": "failed"}

    def _ingestion(self, source_id: str) -> Ingestion:
        source = self._sources.ingestion(source_id)
        if source is None or not is_gitlab_ingestion(source):
            raise NotFound("source ingestion", source_id)
        return source

    def _ingest(self, source: Ingestion, binding: GitLabBinding) -> dict[str, Any]:
        client = self._client(binding)
        decision = path_decision(client, source, binding)
        if not decision.triggered:
            # The binding's path filters skipped the change: nothing to fetch.
            self._sources.record_fetched(
                source.id,
                archive_sha256=None,
                archive_size=None,
                configurations=[],
                targets=[],
                now=self._clock.now(),
                path_decisions=[decision],
            )
            return {"source_id": source.id, "status": "ready", "targets": 0}
        limits = ArchiveLimits(max_total_bytes=self._config.archive_max_bytes)
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as tarball:
            archive = client.download_archive(
                source.commit_sha, tarball, self._config.archive_max_bytes
            )
            packed = working_directory_archive(tarball, binding.working_directory, limits)
        artifact = self._artifacts.put(
            binding.organization_id, ArtifactKind.CONFIGURATION, [packed]
        )
        kind = RunKind.SPECULATIVE if source.pull_request is not None else binding.push_kind
        target = IngestionTarget(
            workspace_id=binding.workspace_id,
            working_directory=binding.working_directory,
            kind=kind,
            configuration_version_id=self._ids.new(IdKind.CONFIGURATION_VERSION),
            configuration_artifact_id=artifact.id,
        )
        fetched = FetchedConfiguration(
            target,
            binding.organization_id,
            sha256=artifact.sha256 or "",
            size=artifact.size or 0,
            speculative=kind is RunKind.SPECULATIVE,
        )
        try:
            self._sources.record_fetched(
                source.id,
                archive_sha256=archive.sha256,
                archive_size=archive.size,
                configurations=[fetched],
                targets=[target],
                now=self._clock.now(),
                path_decisions=[decision],
            )
        except BaseException:
            self._artifacts.discard(artifact.id)
            raise
        return {"source_id": source.id, "status": "ready", "targets": 1}

    def create_runs(self, source_id: str) -> dict[str, Any]:
        """Create the bound workspace's run if it has none yet; a merge request's run
        posts a pending commit status."""
        source = self._ingestion(source_id)
        if source.status != "ready":
            return {"source_id": source_id, "runs": 0}
        binding = self._bound(source)
        targets = list(source.targets)
        created: list[str] = []
        for index, target in enumerate(targets):
            if target.run_id or target.error:
                continue
            if binding is None or binding.workspace_id != target.workspace_id:
                targets[index] = replace(target, error="UNBOUND")
            else:
                try:
                    run_id = self._create_run(source, binding, target)
                except RunplaneError as refused:
                    targets[index] = replace(target, error=refused.code)
                else:
                    targets[index] = replace(target, run_id=run_id)
                    created.append(run_id)
            self._sources.set_targets(source_id, targets, self._clock.now())
        if created and binding is not None and source.pull_request is not None:
            # Read again: the note lists the runs just recorded on the ingestion.
            source = self._ingestion(source_id)
            for run_id in created:
                self._post_status(binding, source, run_id, None, notes_may_fail=True)
        if source.skipped and binding is not None and source.pull_request is not None:
            client = self._client(binding)
            for decision in source.skipped:
                client.post_status(
                    source.commit_sha, skipped_status(decision, source, self._config.review_url)
                )
        return {"source_id": source_id, "runs": len(created)}

    def _create_run(
        self, source: Ingestion, binding: GitLabBinding, target: IngestionTarget
    ) -> str:
        """The run's ID derives from the ingestion and the workspace: a retried step
        adopts the run an earlier try created instead of making a second."""
        run_id = derived_id(IdKind.RUN, source.id, target.workspace_id)
        what = f"!{source.pull_request}" if source.pull_request is not None else source.branch
        try:
            return self._runs.create(
                gitlab_source_principal(source.id, binding),
                target.workspace_id,
                kind=target.kind,
                configuration_version_id=target.configuration_version_id,
                engine_version=None,
                variables={},
                message=f"GitLab {source.event} {source.repository} {what}@{source.commit_sha}",
                run_id=run_id,
            ).id
        except RunAlreadyExists:
            adopted = adopt_run(self._lifecycle, self._runs, run_id, source.id, target.workspace_id)
            if adopted is None:
                raise
            return adopted

    def fail(self, source_id: str, error: str) -> dict[str, Any]:
        return fail_ingestion(self._sources, self._clock.now(), source_id, error)

    def report_status(self, run_id: str) -> dict[str, Any]:
        """Post the commit status of a merge request's run (pending, success or failed)."""
        run = self._lifecycle.runs.get(run_id)
        source = self._source_of(run)
        binding = None if source is None else self._bound(source)
        if source is None or binding is None or source.pull_request is None:
            return {"run_id": run_id, "reported": False}
        ended = run.status.value if run.status.is_terminal else None
        state = self._post_status(binding, source, run.id, ended)
        return {"run_id": run_id, "reported": True, "state": state}

    def _source_of(self, run: Run) -> Ingestion | None:
        if not (run.created_by or "").startswith(f"{PrincipalKind.SOURCE}:"):
            return None
        source = self._sources.ingestion(str(run.created_by).split(":", 1)[1])
        if not is_gitlab_ingestion(source) or source is None:
            return None
        return source if source.organization_id == run.organization_id else None

    def _post_status(
        self,
        binding: GitLabBinding,
        source: Ingestion,
        run_id: str,
        ended: str | None,
        *,
        notes_may_fail: bool = False,
    ) -> str:
        state = gitlab_state(ended)
        description = {
            "pending": "plan queued",
            "success": "plan completed",
        }.get(state, f"run ended {ended}")
        client = self._client(binding)
        client.post_status(
            source.commit_sha,
            {
                "state": state,
                "name": f"{STATUS_CONTEXT}/{binding.workspace_id}",
                "description": description,
                "target_url": f"{self._config.review_url.rstrip('/')}/api/v1/runs/{run_id}",
            },
        )
        if self._reports is not None and source.pull_request is not None:
            thread = MergeRequestThread(client, source.pull_request)
            try:
                self._reports.publish_comment(thread, source, "merge request &#33;")
            except RunplaneError as failure:
                # The message names what failed and GitLab's status code, never the token.
                logger.warning("merge request note not posted", extra={"error": failure.message})
                # Creating a run is not held back by its note (the run's end posts it
                # again); at the run's end a temporary failure retries the step.
                if not notes_may_fail and isinstance(failure, GitHubUnavailable):
                    raise
        return state
