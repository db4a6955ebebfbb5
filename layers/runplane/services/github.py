"""Runs from GitHub: workspace bindings, the webhook, and the source workflow's steps.

The webhook only verifies, records the delivery and starts the source workflow
with the ingestion's ID. The workflow's steps exchange an installation token
(kept in the step's memory only), download the commit archive, record a
configuration version per bound workspace, create their runs, and report
commit statuses for pull requests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from runplane.adapters.github import GitHubApp
from runplane.adapters.secrets import Secrets
from runplane.adapters.source_archive import working_directory_archive
from runplane.adapters.workflow import Workflow
from runplane.domain.artifacts import ArtifactKind
from runplane.domain.auto_destroy import AutoDestroySettings
from runplane.domain.clock import Clock
from runplane.domain.entities import Run, Workspace, valid_flag
from runplane.domain.errors import (
    AlreadyExists,
    ConcurrentChange,
    GitHubNotConfigured,
    InvalidBody,
    InvalidInput,
    NotFound,
    RunAlreadyExists,
    RunplaneError,
    SourceRefused,
    WebhookSignatureInvalid,
    WebhookTooLarge,
)
from runplane.domain.github import (
    DELIVERY_ID,
    PREVIEW_DESTROY_DELAY,
    Binding,
    Delivery,
    DeliveryAlreadyRecorded,
    FetchedConfiguration,
    Ignored,
    Ingestion,
    IngestionTarget,
    PreviewWorkspace,
    SourceEvent,
    body_digest,
    commit_state,
    parse_event,
    preview_name,
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
from runplane.domain.path_filters import valid_patterns
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import ENDINGS, EventType, RunEvent
from runplane.domain.tfe_runs import ExecutionMode
from runplane.runner.archive import ArchiveLimits
from runplane.services.artifacts import ArtifactStore
from runplane.services.audit import AuditTrail
from runplane.services.auto_destroy import AutoDestroys
from runplane.services.github_installations import GitHubInstallations
from runplane.services.github_path_filters import path_decisions, post_skipped_statuses
from runplane.services.github_reports import PullRequestReports
from runplane.services.lifecycle import RunLifecycle
from runplane.services.repositories.github import GitHubSourceStore
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

logger = logging.getLogger("runplane.github")

# One ingestion records every bound workspace's configuration in one transaction.
MAX_BOUND_WORKSPACES = 40
STATUS_CONTEXT = "runplane"
_SPOOL_BYTES = 8 * 1024 * 1024
SOURCE_PERMISSIONS = frozenset(
    {Permission.RUN_CREATE, Permission.RUN_READ, Permission.WORKSPACE_READ}
)
# What a pull request's preview is made and ended with: creating its workspace (the
# only organization-wide permission, used for that alone), and reading and updating
# (arming or clearing the auto-destroy of) that one workspace.
PREVIEW_PERMISSIONS = frozenset(
    {Permission.WORKSPACE_CREATE, Permission.WORKSPACE_READ, Permission.WORKSPACE_UPDATE}
)
# The tag every preview workspace carries (with ``pull-request:<number>``).
PREVIEW_TAG = "pull-request-preview"


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


def source_principal(
    source_id: str, binding: Binding, workspace_id: str | None = None
) -> Principal:
    """What an ingestion acts as: create and read runs of one workspace, the bound one
    (or ``workspace_id``, the preview a pull request got from it)."""
    return Principal(
        kind=PrincipalKind.SOURCE,
        id=source_id,
        organization_id=binding.organization_id,
        permissions=SOURCE_PERMISSIONS,
        display=f"GitHub source {source_id}",
        workspace_id=workspace_id or binding.workspace_id,
    )


def preview_principal(preview: PreviewWorkspace) -> Principal:
    """What a pull request acts as on its preview workspace: create it, read it, arm or
    clear its auto-destroy; confined to that workspace."""
    return Principal(
        kind=PrincipalKind.SYSTEM,
        id=f"github-pr:{preview.repository}#{preview.pull_request}",
        organization_id=preview.organization_id,
        permissions=PREVIEW_PERMISSIONS,
        display=f"GitHub pull request {preview.repository}#{preview.pull_request}",
        workspace_id=preview.workspace_id,
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
        auto_destroys: AutoDestroys,
        app: Callable[[str, str, str], GitHubApp] = GitHubApp,
        reports: PullRequestReports | None = None,
        refusals: AuditTrail | None = None,
    ) -> None:
        # Where a refused delivery is recorded (the security audit trail).
        self._refusals = refusals
        # A pull request's comment and check runs, posted with its commit statuses.
        self._reports = reports
        self._installations = installations
        # A closed pull request's preview is destroyed by arming its auto-destroy.
        self._auto_destroys = auto_destroys
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
        pull_request_workspaces: bool = False,
        pull_request_auto_apply_destroy: bool = False,
        trigger_patterns: list[str] | None = None,
        ignore_patterns: list[str] | None = None,
    ) -> Binding:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        binding = Binding(
            workspace_id=workspace.id,
            organization_id=workspace.organization_id,
            repository=valid_repository(repository),
            branch=valid_branch(branch),
            working_directory=valid_working_directory(working_directory),
            installation_id=valid_installation_id(installation_id),
            push_kind=valid_push_kind(push_run_kind),
            pull_request_workspaces=valid_flag(pull_request_workspaces, "/pull_request_workspaces"),
            pull_request_auto_apply_destroy=valid_flag(
                pull_request_auto_apply_destroy, "/pull_request_auto_apply_destroy"
            ),
            trigger_patterns=valid_patterns(trigger_patterns or [], "trigger_patterns"),
            ignore_patterns=valid_patterns(ignore_patterns or [], "ignore_patterns"),
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

    def ingestion(self, principal: Principal, source_id: str) -> Ingestion:
        """A source ingestion of the principal's organization (what its delivery
        started and what path filters decided); another's is ``NotFound``."""
        found = self._store.ingestion(source_id) if source_id.startswith("src-") else None
        if found is None or not _visible(principal, found):
            raise NotFound("source ingestion", source_id[:40])
        return found

    def unbind(self, principal: Principal, workspace_id: str) -> None:
        # The permission before the binding is looked for: a caller who may not change
        # the workspace is refused the same whether it is bound or not.
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        bound = self.binding(principal, workspace.id)
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

    def receive(
        self, headers: Mapping[str, str], body: bytes, source_address: str | None = None
    ) -> WebhookReply:
        """Verify, deduplicate and record one delivery; start its source workflow. A
        refused delivery writes one refused audit record and nothing else: before its
        signature verifies, under the deployment's trail (nothing in it can be trusted);
        after, under the organization that claimed its installation, if one did."""
        verified = False
        try:
            self._verify(headers, body)
            verified = True
            return self._receive(headers, body)
        except RunplaneError as refused:
            if self._refusals is not None and 400 <= refused.http_status < 500:
                delivery = {k.lower(): v for k, v in headers.items()}.get("x-github-delivery")
                self._refusals.webhook_refused(
                    "github",
                    refused.code,
                    organization_id=self._claimed_by(body) if verified else None,
                    object_kind="webhook",
                    object_id="github",
                    delivery_id=delivery if delivery and DELIVERY_ID.fullmatch(delivery) else None,
                    source_address=source_address,
                )
            raise

    def _verify(self, headers: Mapping[str, str], body: bytes) -> None:
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

    def _claimed_by(self, body: bytes) -> str | None:
        """The organization holding the installation a verified delivery names, if any."""
        try:
            installation = json.loads(body).get("installation", {}).get("id")
        except (ValueError, RecursionError, AttributeError):
            return None
        if not isinstance(installation, int) or isinstance(installation, bool):
            return None
        return self._installations.holder_of(installation)

    def _receive(self, headers: Mapping[str, str], body: bytes) -> WebhookReply:
        """A delivery whose signature verified."""
        lowered = {k.lower(): v for k, v in headers.items()}
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
        refuse_stale(
            delivery_id, parsed.occurred_at, self._clock.now(), self._config.delivery_window
        )
        if parsed.closes:
            return self._close(delivery_id, event, digest, parsed)
        targets = self._targets(parsed)
        if not targets:
            reason = f"no workspace is bound to {parsed.repository} branch {parsed.branch}"
            return self._record(delivery_id, event, digest, 200, reason, None)
        return self._record(delivery_id, event, digest, 202, None, parsed, targets[0])

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

    def _close(
        self, delivery_id: str, event: str, digest: str, parsed: SourceEvent
    ) -> WebhookReply:
        """A closed pull request: arm each of its preview workspaces' auto-destroy, due a
        minute from now, and record the delivery with what was armed. The arming comes
        first, so a delivery recorded has armed everything (a crash in between leaves
        the redelivery to arm it again: setting it again is harmless)."""
        assert parsed.pull_request is not None
        now = self._clock.now()
        armed: list[dict[str, Any]] = []
        for binding in self._targets(parsed):
            preview = self._store.preview(binding.workspace_id, parsed.pull_request)
            if preview is None or preview.organization_id != binding.organization_id:
                continue
            view = self._arm(preview, binding, now)
            if view is not None:
                armed.append(view)
        number = f"pull request #{parsed.pull_request} of {parsed.repository}"
        if not armed:
            return self._record(
                delivery_id,
                event,
                digest,
                200,
                f"{number} closed: it has no preview workspace to destroy",
                None,
            )
        outcome: dict[str, Any] = {
            "delivery_id": delivery_id,
            "event": event,
            "status": "closed",
            "pull_request": parsed.pull_request,
            "auto_destroy": armed,
        }
        delivery = Delivery(delivery_id, event, digest, 200, outcome, None)
        try:
            self._store.record_delivery(delivery, received_at=now, starts=None)
        except DeliveryAlreadyRecorded as seen:
            return self._repeat(seen.recorded, digest)
        logger.info(
            "pull request closed: previews armed for destruction",
            extra={"delivery_id": delivery_id, "workspaces": [a["workspace_id"] for a in armed]},
        )
        return WebhookReply(200, outcome)

    def _arm(
        self, preview: PreviewWorkspace, binding: Binding, now: datetime
    ) -> dict[str, Any] | None:
        """Arm a preview's auto-destroy with the binding's auto-apply choice; None when
        its workspace is gone (never created, or deleted)."""
        settings = AutoDestroySettings(
            destroy_at=(now + PREVIEW_DESTROY_DELAY).replace(microsecond=0),
            auto_apply=binding.pull_request_auto_apply_destroy,
        )
        principal = preview_principal(preview)
        try:
            view = self._auto_destroys.set(principal, preview.workspace_id, settings)
        except NotFound:
            return None
        if preview.closed_at is None:
            # Another event may have moved it meanwhile (a redelivery closing it too).
            with contextlib.suppress(ConcurrentChange):
                self._store.record_preview(replace(preview, closed_at=now), preview)
        return {
            "workspace_id": preview.workspace_id,
            "destroy_at": view["destroy_at"],
            "auto_apply": settings.auto_apply,
        }

    def _repeat(self, recorded: Delivery, digest: str) -> WebhookReply:
        return repeat_delivery(self._store, recorded, digest, self._start)

    def _start(self, source_id: str) -> None:
        start_ingestion(self._workflow, source_id)

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

    def _ingest(self, source: Ingestion, bound: list[Binding]) -> dict[str, Any]:
        app = self._app()
        token = app.installation_token(int(source.installation_id), self._clock.now())
        decisions = path_decisions(app, token, source, bound)
        targets = [b for b, d in zip(bound, decisions, strict=True) if d.triggered]
        if not targets:
            # Every bound workspace's path filters skipped the change: nothing to fetch.
            del token
            self._store.record_fetched(
                source.id,
                archive_sha256=None,
                archive_size=None,
                configurations=[],
                targets=[],
                now=self._clock.now(),
                path_decisions=decisions,
            )
            return {"source_id": source.id, "status": "ready", "targets": 0}
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
        previews = self._previews(source, targets)
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
                preview = previews.get(binding.workspace_id)
                if preview is not None:
                    # The pull request's own workspace: planned and applied (after
                    # approval) there, instead of a speculative plan here.
                    kind = RunKind.PLAN_AND_APPLY
                elif source.speculative:
                    kind = RunKind.SPECULATIVE
                else:
                    kind = binding.push_kind
                target = IngestionTarget(
                    workspace_id=binding.workspace_id if preview is None else preview,
                    working_directory=binding.working_directory,
                    kind=kind,
                    configuration_version_id=self._ids.new(IdKind.CONFIGURATION_VERSION),
                    configuration_artifact_id=artifact.id,
                    bound_workspace_id=None if preview is None else binding.workspace_id,
                )
                fetched.append(
                    FetchedConfiguration(
                        target,
                        binding.organization_id,
                        sha256=artifact.sha256 or "",
                        size=artifact.size or 0,
                        speculative=kind is RunKind.SPECULATIVE,
                    )
                )
            self._store.record_fetched(
                source.id,
                archive_sha256=archive.sha256,
                archive_size=archive.size,
                configurations=fetched,
                targets=[f.target for f in fetched],
                now=now,
                path_decisions=decisions,
            )
        except BaseException:
            for artifact_id in stored:
                self._artifacts.discard(artifact_id)
            raise
        return {"source_id": source.id, "status": "ready", "targets": len(fetched)}

    # -- preview workspaces ------------------------------------------------------------------

    def _previews(self, source: Ingestion, targets: list[Binding]) -> dict[str, str]:
        """For a pull request with new code: the preview workspace of each binding that
        asks for them (by bound workspace), made on the pull request's first event."""
        if source.event != "pull_request" or source.pull_request is None:
            return {}
        return {
            b.workspace_id: self._preview_workspace(source, b).id
            for b in targets
            if b.pull_request_workspaces
        }

    def _preview_workspace(self, source: Ingestion, binding: Binding) -> Workspace:
        """The pull request's preview of ``binding``'s workspace: the one recorded, or a
        new one (recorded under a new ID first, then created, then marked created, so a
        retry after a crash, or a concurrent event of the same pull request, finds the
        same workspace and never makes a second)."""
        assert source.pull_request is not None
        parent = self._workspaces.by_id(source_principal(source.id, binding), binding.workspace_id)
        for _ in range(3):
            recorded = self._store.preview(binding.workspace_id, source.pull_request)
            try:
                return self._ensure_preview(source, binding, parent, recorded)
            except ConcurrentChange:
                continue  # another event of the pull request recorded it first: read again
        raise ConcurrentChange(
            f"the preview workspace of pull request #{source.pull_request} keeps changing; "
            "the step is retried"
        )

    def _ensure_preview(
        self,
        source: Ingestion,
        binding: Binding,
        parent: Workspace,
        recorded: PreviewWorkspace | None,
    ) -> Workspace:
        assert source.pull_request is not None
        if recorded is not None:
            found = self._preview_found(recorded)
            if found is not None:
                if not recorded.workspace_created or recorded.closed_at is not None:
                    self._reopen(recorded)
                return found
            if not recorded.workspace_created:
                return self._create_preview(source, parent, recorded)
        # None yet, or the recorded one was deleted: a new one, under a new ID.
        fresh = PreviewWorkspace(
            workspace_id=self._ids.new(IdKind.WORKSPACE),
            organization_id=binding.organization_id,
            parent_workspace_id=binding.workspace_id,
            repository=source.repository,
            pull_request=source.pull_request,
            created_by=f"{PrincipalKind.SOURCE}:{source.id}",
            created_at=self._clock.now(),
        )
        self._store.record_preview(fresh, recorded)
        return self._create_preview(source, parent, fresh)

    def _preview_found(self, recorded: PreviewWorkspace) -> Workspace | None:
        try:
            return self._workspaces.by_id(preview_principal(recorded), recorded.workspace_id)
        except NotFound:
            return None

    def _create_preview(
        self, source: Ingestion, parent: Workspace, preview: PreviewWorkspace
    ) -> Workspace:
        """Create the recorded preview's workspace (or find it, created concurrently)
        and mark it created."""
        name = preview_name(parent.name, preview.pull_request)
        principal = preview_principal(preview)
        try:
            workspace = self._workspaces.create(
                principal,
                self._workspaces.organization_name(preview.organization_id),
                name,
                terraform_version=parent.terraform_version,
                description=preview.description(parent.name),
                tags=(PREVIEW_TAG, f"pull-request:{preview.pull_request}"),
                execution_mode=ExecutionMode(parent.execution_mode),
                workspace_id=preview.workspace_id,
                preview_of=parent.id,
            )
        except (AlreadyExists, ConcurrentChange):
            found = self._preview_found(preview)
            if found is None:
                raise SourceRefused(
                    f"the preview workspace of pull request #{preview.pull_request} would be "
                    f"named {name!r}, which another workspace has: rename or delete it"
                ) from None
            workspace = found
        self._reopen(preview)
        logger.info(
            "preview workspace created",
            extra={"workspace_id": workspace.id, "source_id": source.id},
        )
        return workspace

    def _reopen(self, preview: PreviewWorkspace) -> None:
        """Mark the preview created and open; a reopened pull request's preview is not
        destroyed after all (its auto-destroy, armed by the close, is cleared)."""
        if preview.workspace_created and preview.closed_at is None:
            return
        self._store.record_preview(
            replace(preview, workspace_created=True, closed_at=None), preview
        )
        if preview.closed_at is not None:
            with contextlib.suppress(NotFound):
                self._auto_destroys.clear(preview_principal(preview), preview.workspace_id)

    # -- runs ---------------------------------------------------------------------------------

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
            binding = self._store.binding(target.binding_workspace_id)
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
            # With the targets just recorded, so each status names its run's workspace.
            self._post_statuses(
                replace(source, targets=tuple(targets)), created, "pending", reports_may_fail=True
            )
        if source.skipped and source.event == "pull_request":
            post_skipped_statuses(self._app(), self._clock.now(), source, self._config.review_url)
        return {"source_id": source_id, "runs": len(created)}

    def _create_run(self, source: Ingestion, binding: Binding, target: IngestionTarget) -> str:
        """Create the target's run, or find the one an earlier try created.

        The run's ID derives from the ingestion and the workspace, so a try that
        crashed after creating the run and before recording it cannot make a second
        one: the retry's creation is refused and adopts the first run instead."""
        workspace_id = target.workspace_id
        run_id = derived_id(IdKind.RUN, source.id, workspace_id)
        try:
            return self._runs.create(
                source_principal(source.id, binding, workspace_id),
                workspace_id,
                kind=target.kind,
                configuration_version_id=target.configuration_version_id,
                engine_version=None,
                variables={},
                message=f"GitHub {source.event} {source.repository}@{source.commit_sha}",
                run_id=run_id,
            ).id
        except RunAlreadyExists:
            adopted = adopt_run(self._lifecycle, self._runs, run_id, source.id, workspace_id)
            if adopted is None:
                raise
            return adopted

    def fail(self, source_id: str, error: str) -> dict[str, Any]:
        return fail_ingestion(self._store, self._clock.now(), source_id, error)

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
        *,
        reports_may_fail: bool = False,
    ) -> None:
        app = self._app()
        token = app.installation_token(int(source.installation_id), self._clock.now())
        for run_id in run_ids:
            target = next((t for t in source.targets if t.run_id == run_id), None)
            shown = run_id if target is None else target.workspace_id
            description = _status_description(
                state, status, preview=target is not None and target.bound_workspace_id is not None
            )
            app.post_status(
                token,
                source.repository,
                source.commit_sha,
                {
                    "state": state,
                    "context": f"{STATUS_CONTEXT}/{shown}",
                    "description": description,
                    "target_url": f"{self._config.review_url.rstrip('/')}/ui/runs/{run_id}",
                },
            )
        if self._reports is not None:
            try:
                self._reports.publish(app, token, source, run_ids)
            except RunplaneError:
                # Creating runs is not held back by a comment: the runs' next reports
                # bring it up to date. A run's own report is retried instead.
                if not reports_may_fail:
                    raise
        del token


def _status_description(state: str, status: RunStatus | None, *, preview: bool) -> str:
    if state == "failure":
        return f"run ended {status.value if status else 'unsuccessfully'}"
    if not preview:
        return "plan queued" if state == "pending" else "plan completed"
    if state == "success":
        return "applied to the preview workspace"
    if status is RunStatus.AWAITING_APPROVAL:
        return "plan ready: awaiting approval"
    return "preview run queued" if status is None else f"preview run {status.value}"


def _visible(principal: Principal, source: Ingestion) -> bool:
    """An organization's member sees its ingestions; a principal confined to a workspace
    only those that reached that workspace."""
    reached = {t.workspace_id for t in source.targets}
    reached |= {t.binding_workspace_id for t in source.targets}
    reached |= {d.workspace_id for d in source.path_decisions}
    if principal.workspace_id is None and principal.may(Permission.WORKSPACE_READ):
        return principal.organization_id == source.organization_id
    return any(principal.can_see_workspace(source.organization_id, w) for w in reached)


class RunsById(Protocol):
    """Where the status reports read a run: ``NotFound`` for an unknown one."""

    def get(self, run_id: str) -> Run: ...


class IngestionsById(Protocol):
    """Where the status reports read the ingestion that created a run."""

    def ingestion(self, source_id: str) -> Ingestion | None: ...


def commit_status_reports(
    workflow: Workflow, runs: RunsById, sources: IngestionsById | None = None
) -> Callable[[RunEvent], None]:
    """A run-event handler: a pull request's run (a speculative run a source ingestion
    created, or a preview workspace's run) that ended, or whose plan awaits approval,
    reports its commit status through the source workflow, which alone holds the
    GitHub App's key. The execution is
    named after the event, so a redelivered event starts nothing twice. A
    ``plan_and_apply`` run reports only if ``sources`` shows a pull request created it
    (a push's runs report nothing)."""

    def on_event(event: RunEvent) -> None:
        if event.run_kind is RunKind.SPECULATIVE:
            if event.type not in ENDINGS:
                return
        elif event.run_kind is RunKind.PLAN_AND_APPLY:
            if event.type not in ENDINGS and event.type is not EventType.NEEDS_ATTENTION:
                return
        else:
            return
        if event.created_by_source is False:
            return  # no repository's run: nothing to report, nothing to read
        try:
            run = runs.get(event.of_run)
        except NotFound:
            return
        if not (run.created_by or "").startswith(f"{PrincipalKind.SOURCE}:"):
            return
        if event.run_kind is RunKind.PLAN_AND_APPLY:
            source_id = str(run.created_by).split(":", 1)[1]
            source = None if sources is None else sources.ingestion(source_id)
            if source is None or source.event != "pull_request":
                return
        workflow.start_named(
            status_execution_name(event.id), {"action": "report_status", "run_id": run.id}
        )

    return on_event
