"""Runs from GitHub: workspace bindings, the webhook, and the source workflow's steps.

The webhook only verifies, records the delivery and starts the source workflow
with the ingestion's ID. The workflow's steps exchange an installation token
(kept in the step's memory only), download the commit archive, record a
configuration version per bound workspace, create their runs, and report
commit statuses for pull requests.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol

from runplane.adapters.github import GitHubApp
from runplane.adapters.secrets import Secrets
from runplane.adapters.source_archive import working_directory_archive
from runplane.adapters.workflow import Workflow
from runplane.domain.artifacts import ArtifactKind
from runplane.domain.clock import Clock
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    GitHubNotConfigured,
    InvalidBody,
    InvalidInput,
    NotFound,
    RunAlreadyExists,
    RunplaneError,
    SourceRefused,
    WebhookReplayRefused,
    WebhookSignatureInvalid,
    WebhookTooLarge,
)
from runplane.domain.github import (
    DELIVERY_ID,
    Binding,
    Delivery,
    DeliveryAlreadyRecorded,
    FetchedConfiguration,
    Ignored,
    Ingestion,
    IngestionTarget,
    SourceEvent,
    body_digest,
    commit_state,
    parse_event,
    signature_matches,
    status_execution_name,
    valid_branch,
    valid_installation_id,
    valid_push_kind,
    valid_repository,
    valid_working_directory,
)
from runplane.domain.github_connect import AuditNote
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind, derived_id
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import ENDINGS, RunEvent
from runplane.runner.archive import ArchiveLimits
from runplane.services.artifacts import ArtifactStore
from runplane.services.github_installations import GitHubInstallations
from runplane.services.lifecycle import RunLifecycle
from runplane.services.repositories.github import GitHubSourceStore
from runplane.services.runs import Runs
from runplane.services.workspaces import Workspaces

logger = logging.getLogger("runplane.github")

# One ingestion records every bound workspace's configuration in one transaction.
MAX_BOUND_WORKSPACES = 40
STATUS_CONTEXT = "runplane"
_SPOOL_BYTES = 8 * 1024 * 1024
SOURCE_PERMISSIONS = frozenset(
    {Permission.RUN_CREATE, Permission.RUN_READ, Permission.WORKSPACE_READ}
)


@dataclass(frozen=True)
class GitHubConfig:
    api_url: str
    app_id: str | None
    private_key_secret_arn: str | None
    webhook_secret_arn: str | None
    delivery_window: timedelta
    webhook_max_bytes: int
    archive_max_bytes: int
    review_url: str


@dataclass(frozen=True)
class WebhookReply:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


def source_principal(source_id: str, binding: Binding) -> Principal:
    """What an ingestion acts as: create and read runs of one bound workspace."""
    return Principal(
        kind=PrincipalKind.SOURCE,
        id=source_id,
        organization_id=binding.organization_id,
        permissions=frozenset(
            {Permission.RUN_CREATE, Permission.RUN_READ, Permission.WORKSPACE_READ}
        ),
        display=f"GitHub source {source_id}",
        workspace_id=binding.workspace_id,
    )


class GitHubSources:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        runs: Runs,
        lifecycle: RunLifecycle,
        artifacts: ArtifactStore,
        workflow: Workflow | None,
        secrets: Secrets,
        config: GitHubConfig,
        installations: GitHubInstallations,
        store: GitHubSourceStore,
        app: Callable[[str, str, str], GitHubApp] = GitHubApp,
    ) -> None:
        self._installations = installations
        self._store = store
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._runs = runs
        self._lifecycle = lifecycle
        self._artifacts = artifacts
        self._workflow = workflow
        self._secrets = secrets
        self._config = config
        self._app_factory = app

    # -- bindings ---------------------------------------------------------------------------

    def bind(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        repository: str,
        branch: str,
        working_directory: str,
        installation_id: int,
        push_run_kind: str,
    ) -> Binding:
        principal.require(Permission.WORKSPACE_UPDATE)
        workspace = self._workspaces.by_id(principal, workspace_id)
        binding = Binding(
            workspace_id=workspace.id,
            organization_id=workspace.organization_id,
            repository=valid_repository(repository),
            branch=valid_branch(branch),
            working_directory=valid_working_directory(working_directory),
            installation_id=valid_installation_id(installation_id),
            push_kind=valid_push_kind(push_run_kind),
        )
        previous = self._store.binding(workspace.id)
        self._store.bind(
            binding,
            previous,
            actor=principal.ref,
            now=self._clock.now(),
            release_note=self._release_note(previous, principal.ref),
        )
        return binding

    def binding(self, principal: Principal, workspace_id: str) -> Binding:
        workspace = self._workspaces.by_id(principal, workspace_id)
        found = self._store.binding(workspace.id)
        if found is None or found.organization_id != workspace.organization_id:
            raise NotFound("GitHub binding of workspace", workspace_id)
        return found

    def unbind(self, principal: Principal, workspace_id: str) -> None:
        principal.require(Permission.WORKSPACE_UPDATE)
        bound = self.binding(principal, workspace_id)
        self._store.unbind(
            bound, now=self._clock.now(), release_note=self._release_note(bound, principal.ref)
        )

    def forget_workspace(self, workspace: Workspace, actor: str) -> None:
        """Remove a deleted workspace's binding, if it has one (its deletion, which
        checked who may, has committed: no permission is checked here)."""
        found = self._store.binding(workspace.id)
        if found is None or found.organization_id != workspace.organization_id:
            return
        self._store.unbind(
            found, now=self._clock.now(), release_note=self._release_note(found, actor)
        )

    def _release_note(self, previous: Binding | None, actor: str) -> Callable[[], AuditNote]:
        """The audit note of the previous installation's release, should the binding
        leaving it be its last (its ID drawn only when the store asks for it)."""

        def note() -> AuditNote:
            assert previous is not None
            return AuditNote(
                self._ids.new(IdKind.AUDIT_EVENT),
                "github.installation.released",
                actor,
                {
                    "installation_id": str(previous.installation_id),
                    "reason": "its last binding was removed",
                },
            )

        return note

    # -- the webhook ------------------------------------------------------------------------

    def receive(self, headers: Mapping[str, str], body: bytes) -> WebhookReply:
        """Verify, deduplicate and record one delivery; start its source workflow."""
        config = self._config
        if len(body) > config.webhook_max_bytes:
            raise WebhookTooLarge(
                f"webhook bodies are limited to {config.webhook_max_bytes} bytes; "
                "nothing was recorded"
            )
        lowered = {k.lower(): v for k, v in headers.items()}
        secret = self._secrets.read(config.webhook_secret_arn, "GitHub webhook secret")
        if not signature_matches(secret.encode(), body, lowered.get("x-hub-signature-256")):
            raise WebhookSignatureInvalid()
        delivery_id = lowered.get("x-github-delivery", "")
        event = lowered.get("x-github-event", "")
        if not DELIVERY_ID.fullmatch(delivery_id):
            raise InvalidInput("the X-GitHub-Delivery header is missing or malformed")
        if not event or len(event) > 100:
            raise InvalidInput("the X-GitHub-Event header is missing or malformed")
        digest = body_digest(body)
        existing = self._store.delivery(delivery_id)
        if existing is not None:
            return self._repeat(existing, digest)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            raise InvalidBody("the webhook body is not JSON; nothing was recorded") from None
        parsed = parse_event(event, payload)
        if isinstance(parsed, Ignored):
            return self._record(delivery_id, event, digest, 200, parsed.reason, None)
        self._refuse_stale(delivery_id, parsed)
        targets = self._targets(parsed)
        if not targets:
            reason = f"no workspace is bound to {parsed.repository} branch {parsed.branch}"
            return self._record(delivery_id, event, digest, 200, reason, None)
        return self._record(delivery_id, event, digest, 202, None, parsed, targets[0])

    def _refuse_stale(self, delivery_id: str, parsed: SourceEvent) -> None:
        occurred = parsed.occurred_at
        if occurred is None:
            raise WebhookReplayRefused(
                f"delivery {delivery_id} carries no event time; it cannot be checked for replay"
            )
        if self._clock.now() - occurred > self._config.delivery_window:
            raise WebhookReplayRefused(
                f"delivery {delivery_id} is for an event older than "
                f"{int(self._config.delivery_window.total_seconds())} s; nothing was recorded"
            )

    def _record(
        self,
        delivery_id: str,
        event: str,
        digest: str,
        status: int,
        reason: str | None,
        parsed: SourceEvent | None,
        binding: Binding | None = None,
    ) -> WebhookReply:
        now = self._clock.now()
        source = None
        outcome: dict[str, Any] = {"delivery_id": delivery_id, "event": event}
        if parsed is None or binding is None:
            outcome.update(status="ignored", reason=reason)
        else:
            source_id = self._ids.new(IdKind.SOURCE_INGESTION)
            outcome.update(status="accepted", source_id=source_id)
            source = Ingestion.pending(source_id, binding.organization_id, delivery_id, parsed, now)
        delivery = Delivery(delivery_id, event, digest, status, outcome, outcome.get("source_id"))
        try:
            self._store.record_delivery(delivery, received_at=now, starts=source)
        except DeliveryAlreadyRecorded as seen:
            # The same delivery arrived twice at once: the first record stands.
            return self._repeat(seen.recorded, digest)
        if source is not None:
            self._start(source.id)
        return WebhookReply(status, outcome)

    def _repeat(self, recorded: Delivery, digest: str) -> WebhookReply:
        if recorded.body_sha256 != digest:
            raise WebhookReplayRefused(
                "this delivery ID was received before with a different body; nothing was recorded"
            )
        if recorded.source_id is not None:
            source = self._store.ingestion(recorded.source_id)
            if source is not None and source.status == "pending":
                # The first attempt may have recorded it without starting its workflow.
                self._start(recorded.source_id)
        return WebhookReply(recorded.status_code, {**recorded.outcome, "duplicate": True})

    def _start(self, source_id: str) -> None:
        if self._workflow is None:
            raise GitHubNotConfigured("no source workflow is configured for this deployment")
        self._workflow.start_named(source_id, {"action": "ingest", "source_id": source_id})

    def _targets(self, parsed: SourceEvent | Ingestion) -> list[Binding]:
        """The bindings an event reaches: same repository, branch and installation, of the
        organization holding the installation (proved by a connect flow)."""
        installation = int(parsed.installation_id)
        holder = self._installations.holder_of(installation)
        if holder is None:
            return []
        found = [
            b
            for b in self._store.bound_to(parsed.repository)
            if b.branch == parsed.branch
            and b.installation_id == installation
            and b.organization_id == holder
        ]
        return sorted(found, key=lambda b: b.workspace_id)[:MAX_BOUND_WORKSPACES]

    # -- the source workflow --------------------------------------------------------------------

    def _app(self) -> GitHubApp:
        config = self._config
        if not config.app_id:
            raise GitHubNotConfigured("no GitHub App ID is configured for this deployment")
        key = self._secrets.read(config.private_key_secret_arn, "GitHub App private key")
        return self._app_factory(config.api_url, config.app_id, key)

    def ingest(self, source_id: str) -> dict[str, Any]:
        """Fetch the commit and record a configuration version per bound workspace."""
        source = self._ingestion(source_id)
        if source.status != "pending":
            return {"source_id": source_id, "status": source.status}
        targets = [b for b in self._targets(source) if b.organization_id == source.organization_id]
        try:
            return self._ingest(source, targets)
        except SourceRefused as refused:
            self._store.mark_failed(source_id, refused.message, self._clock.now())
            return {"source_id": source_id, "status": "failed"}

    def _ingestion(self, source_id: str) -> Ingestion:
        source = self._store.ingestion(source_id)
        if source is None:
            raise NotFound("source ingestion", source_id)
        return source

    def _ingest(self, source: Ingestion, targets: list[Binding]) -> dict[str, Any]:
        app = self._app()
        token = app.installation_token(int(source.installation_id), self._clock.now())
        limits = ArchiveLimits(max_total_bytes=self._config.archive_max_bytes)
        archives: dict[str, bytes] = {}
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as tarball:
            archive = app.download_archive(
                token, source.repository, source.commit_sha, tarball, self._config.archive_max_bytes
            )
            del token
            for binding in targets:
                if binding.working_directory not in archives:
                    archives[binding.working_directory] = working_directory_archive(
                        tarball, binding.working_directory, limits
                    )
        now = self._clock.now()
        stored: list[str] = []
        fetched: list[FetchedConfiguration] = []
        try:
            for binding in targets:
                artifact = self._artifacts.put(
                    binding.organization_id,
                    ArtifactKind.CONFIGURATION,
                    [archives[binding.working_directory]],
                )
                stored.append(artifact.id)
                target = IngestionTarget(
                    workspace_id=binding.workspace_id,
                    working_directory=binding.working_directory,
                    kind=RunKind.SPECULATIVE if source.speculative else binding.push_kind,
                    configuration_version_id=self._ids.new(IdKind.CONFIGURATION_VERSION),
                    configuration_artifact_id=artifact.id,
                )
                fetched.append(
                    FetchedConfiguration(
                        target,
                        binding.organization_id,
                        sha256=artifact.sha256 or "",
                        size=artifact.size or 0,
                        speculative=source.speculative,
                    )
                )
            self._store.record_fetched(
                source.id,
                archive_sha256=archive.sha256,
                archive_size=archive.size,
                configurations=fetched,
                targets=[f.target for f in fetched],
                now=now,
            )
        except BaseException:
            for artifact_id in stored:
                self._artifacts.discard(artifact_id)
            raise
        return {"source_id": source.id, "status": "ready", "targets": len(fetched)}

    def create_runs(self, source_id: str) -> dict[str, Any]:
        """Create the run of every target that has none yet; post pending statuses."""
        source = self._ingestion(source_id)
        if source.status != "ready":
            return {"source_id": source_id, "runs": 0}
        targets = list(source.targets)
        created: list[str] = []
        for index, target in enumerate(targets):
            if target.run_id or target.error:
                continue
            binding = self._store.binding(target.workspace_id)
            if binding is None or binding.organization_id != source.organization_id:
                targets[index] = replace(target, error="UNBOUND")
            else:
                try:
                    run_id = self._create_run(source, binding, target)
                except RunplaneError as refused:
                    targets[index] = replace(target, error=refused.code)
                else:
                    targets[index] = replace(target, run_id=run_id)
                    created.append(run_id)
            self._store.set_targets(source_id, targets, self._clock.now())
        if created and source.event == "pull_request":
            self._post_statuses(source, created, "pending")
        return {"source_id": source_id, "runs": len(created)}

    def _create_run(self, source: Ingestion, binding: Binding, target: IngestionTarget) -> str:
        """Create the target's run, or find the one an earlier try created.

        The run's ID derives from the ingestion and the workspace, so a try that
        crashed after creating the run and before recording it cannot make a second
        one: the retry's creation is refused and adopts the first run instead."""
        run_id = derived_id(IdKind.RUN, source.id, binding.workspace_id)
        try:
            return self._runs.create(
                source_principal(source.id, binding),
                binding.workspace_id,
                kind=target.kind,
                configuration_version_id=target.configuration_version_id,
                engine_version=None,
                variables={},
                message=f"GitHub {source.event} {source.repository}@{source.commit_sha}",
                run_id=run_id,
            ).id
        except RunAlreadyExists:
            run = self._lifecycle.runs.get(run_id)
            if run.created_by != f"{PrincipalKind.SOURCE}:{source.id}" or (
                run.workspace_id != binding.workspace_id
            ):
                raise
            # The crashed try may have stopped before starting the run's workflow. The
            # execution is named by the run ID: Step Functions starts it at most once.
            if run.status is RunStatus.DISPATCH_PENDING:
                self._runs.start_workflow(run)
            return run.id

    def fail(self, source_id: str, error: str) -> dict[str, Any]:
        source = self._store.ingestion(source_id)
        if source is not None and source.status == "pending":
            self._store.mark_failed(
                source_id, f"ingestion failed: {error[:100]}", self._clock.now()
            )
        return {"source_id": source_id, "status": "failed"}

    def report_status(self, run_id: str) -> dict[str, Any]:
        """Post the commit status of a pull request's run (pending, success or failure)."""
        run = self._lifecycle.runs.get(run_id)
        source = self._source_of(run)
        if source is None or source.event != "pull_request":
            return {"run_id": run_id, "reported": False}
        state = commit_state(run.status.value) if run.status.is_terminal else "pending"
        self._post_statuses(source, [run.id], state, run.status)
        return {"run_id": run_id, "reported": True, "state": state}

    def _source_of(self, run: Run) -> Ingestion | None:
        if not (run.created_by or "").startswith(f"{PrincipalKind.SOURCE}:"):
            return None
        source = self._store.ingestion(str(run.created_by).split(":", 1)[1])
        if source is None or source.organization_id != run.organization_id:
            return None
        return source

    def _post_statuses(
        self,
        source: Ingestion,
        run_ids: list[str],
        state: str,
        status: RunStatus | None = None,
    ) -> None:
        app = self._app()
        token = app.installation_token(int(source.installation_id), self._clock.now())
        for run_id in run_ids:
            target = next((t for t in source.targets if t.run_id == run_id), None)
            shown = run_id if target is None else target.workspace_id
            description = {
                "pending": "plan queued",
                "success": "plan completed",
                "failure": f"run ended {status.value if status else 'unsuccessfully'}",
            }[state]
            app.post_status(
                token,
                source.repository,
                source.commit_sha,
                {
                    "state": state,
                    "context": f"{STATUS_CONTEXT}/{shown}",
                    "description": description,
                    "target_url": f"{self._config.review_url.rstrip('/')}/api/v1/runs/{run_id}",
                },
            )
        del token


class RunsById(Protocol):
    """Where the status reports read a run: ``NotFound`` for an unknown one."""

    def get(self, run_id: str) -> Run: ...


def commit_status_reports(workflow: Workflow, runs: RunsById) -> Callable[[RunEvent], None]:
    """A run-event handler: a pull request's run (a speculative run a source ingestion
    created) that ended reports its commit status through the source workflow, which
    alone holds the GitHub App's key. The execution is named after the event, so a
    redelivered event starts nothing twice."""

    def on_event(event: RunEvent) -> None:
        if event.type not in ENDINGS or event.run_kind is not RunKind.SPECULATIVE:
            return
        try:
            run = runs.get(event.of_run)
        except NotFound:
            return
        if not (run.created_by or "").startswith(f"{PrincipalKind.SOURCE}:"):
            return
        workflow.start_named(
            status_execution_name(event.id), {"action": "report_status", "run_id": run.id}
        )

    return on_event
