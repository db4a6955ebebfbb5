"""GitHub bindings, webhook deliveries and source ingestions in the table."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from runplane.domain.errors import ConcurrentChange, Conflict, NotFound
from runplane.domain.github import (
    Binding,
    Delivery,
    DeliveryAlreadyRecorded,
    FetchedConfiguration,
    Ingestion,
    IngestionTarget,
    PreviewWorkspace,
)
from runplane.domain.github_connect import AuditNote
from runplane.domain.path_filters import PathDecision
from runplane.domain.run import RunKind
from runplane.domain.source_provenance import ConfigurationOrigin, SourceIngestion, SourceTarget
from runplane.store import configuration_versions, github_installations
from runplane.store.models import (
    ConfigurationVersionItem,
    GitHubBindingItem,
    GitHubDeliveryItem,
    GitHubPreviewItem,
    SourceIngestionItem,
    configuration_version_key,
    github_binding_key,
    github_delivery_key,
    github_preview_key,
    github_route_key,
    source_key,
)
from runplane.store.transaction import Item, Transaction

# A delivery record outlives any redelivery GitHub offers (three days) with room to spare.
DELIVERY_RETENTION = timedelta(days=30)


# -- bindings ---------------------------------------------------------------------------


def _binding(item: GitHubBindingItem) -> Binding:
    return Binding(
        workspace_id=item.workspace_id,
        organization_id=item.org_id,
        repository=item.repository,
        branch=item.branch,
        working_directory=item.working_directory or "",
        installation_id=int(item.installation_id),
        push_kind=RunKind(item.push_kind),
        pull_request_workspaces=bool(item.pull_request_workspaces),
        pull_request_auto_apply_destroy=bool(item.pull_request_auto_apply_destroy),
        trigger_patterns=tuple(str(p) for p in item.trigger_patterns or []),
        ignore_patterns=tuple(str(p) for p in item.ignore_patterns or []),
    )


def get_binding(workspace_id: str) -> Binding | None:
    try:
        item = GitHubBindingItem.get(*github_binding_key(workspace_id), consistent_read=True)
    except GitHubBindingItem.DoesNotExist:
        return None
    return _binding(item)


def bound_to(repository: str) -> list[Binding]:
    """Every workspace bound to ``repository`` (all organizations: callers filter)."""
    partition = github_route_key(repository, "")[0]
    return [_binding(item) for item in GitHubBindingItem.query(partition, consistent_read=True)]


def _item(key: tuple[str, str], binding: Binding, actor: str, now: datetime) -> GitHubBindingItem:
    return GitHubBindingItem(
        *key,
        workspace_id=binding.workspace_id,
        org_id=binding.organization_id,
        repository=binding.repository,
        branch=binding.branch,
        working_directory=binding.working_directory,
        installation_id=binding.installation_id,
        push_kind=binding.push_kind.value,
        pull_request_workspaces=binding.pull_request_workspaces,
        pull_request_auto_apply_destroy=binding.pull_request_auto_apply_destroy,
        trigger_patterns=list(binding.trigger_patterns) or None,
        ignore_patterns=list(binding.ignore_patterns) or None,
        updated_at=now,
        updated_by=actor,
    )


def bind(binding: Binding, previous: Binding | None, *, actor: str, now: datetime) -> Transaction:
    """Replace the workspace's binding (exactly the ``previous`` one read) and its route.
    The caller adds the installation's bookkeeping (it must be held by the organization)."""

    def changed(current: Item | None) -> Exception:
        return Conflict(
            f"the GitHub binding of workspace {binding.workspace_id} changed meanwhile; "
            "read it again"
        )

    key = github_binding_key(binding.workspace_id)
    condition = (
        GitHubBindingItem.pk.does_not_exist()
        if previous is None
        else (GitHubBindingItem.repository == previous.repository)
        & (GitHubBindingItem.branch == previous.branch)
        & (GitHubBindingItem.installation_id == previous.installation_id)
    )
    write = (
        Transaction()
        .put(_item(key, binding, actor, now), condition=condition, on_refused=changed)
        .put(
            _item(github_route_key(binding.repository, binding.workspace_id), binding, actor, now),
        )
    )
    if previous is not None and previous.repository != binding.repository:
        write.delete(
            GitHubBindingItem(*github_route_key(previous.repository, previous.workspace_id))
        )
    return write


def unbind(binding: Binding) -> Transaction:
    def changed(current: Item | None) -> Exception:
        return Conflict(f"the GitHub binding of workspace {binding.workspace_id} changed")

    return (
        Transaction()
        .delete(
            GitHubBindingItem(*github_binding_key(binding.workspace_id)),
            condition=(GitHubBindingItem.repository == binding.repository)
            & (GitHubBindingItem.installation_id == binding.installation_id),
            on_refused=changed,
        )
        .delete(GitHubBindingItem(*github_route_key(binding.repository, binding.workspace_id)))
    )


# -- preview workspaces ------------------------------------------------------------------


def _preview(item: GitHubPreviewItem) -> PreviewWorkspace:
    return PreviewWorkspace(
        workspace_id=item.workspace_id,
        organization_id=item.org_id,
        parent_workspace_id=item.parent_workspace_id,
        repository=item.repository,
        pull_request=int(item.pull_request),
        created_by=item.created_by,
        created_at=item.created_at,
        workspace_created=bool(item.workspace_created),
        closed_at=item.closed_at,
    )


def get_preview(parent_workspace_id: str, pull_request: int) -> PreviewWorkspace | None:
    try:
        item = GitHubPreviewItem.get(
            *github_preview_key(parent_workspace_id, pull_request), consistent_read=True
        )
    except GitHubPreviewItem.DoesNotExist:
        return None
    return _preview(item)


def put_preview(preview: PreviewWorkspace, previous: PreviewWorkspace | None) -> Transaction:
    """Record the pull request's preview, only if none is (``previous`` None) or the one
    recorded is still ``previous`` (its workspace, creation and close)."""

    def changed(current: Item | None) -> Exception:
        return ConcurrentChange(
            f"the preview workspace of pull request #{preview.pull_request} changed "
            "meanwhile; nothing was written"
        )

    if previous is None:
        condition = GitHubPreviewItem.pk.does_not_exist()
    else:
        closed = (
            GitHubPreviewItem.closed_at.does_not_exist()
            if previous.closed_at is None
            else GitHubPreviewItem.closed_at == previous.closed_at
        )
        condition = (
            (GitHubPreviewItem.workspace_id == previous.workspace_id)
            & (GitHubPreviewItem.workspace_created == previous.workspace_created)
            & closed
        )
    item = GitHubPreviewItem(
        *github_preview_key(preview.parent_workspace_id, preview.pull_request),
        workspace_id=preview.workspace_id,
        org_id=preview.organization_id,
        parent_workspace_id=preview.parent_workspace_id,
        repository=preview.repository,
        pull_request=preview.pull_request,
        created_by=preview.created_by,
        created_at=preview.created_at,
        workspace_created=preview.workspace_created,
        closed_at=preview.closed_at,
    )
    return Transaction().put(item, condition=condition, on_refused=changed)


# -- deliveries and ingestions ---------------------------------------------------------


def get_delivery(delivery_id: str) -> GitHubDeliveryItem | None:
    try:
        return GitHubDeliveryItem.get(*github_delivery_key(delivery_id), consistent_read=True)
    except GitHubDeliveryItem.DoesNotExist:
        return None


def _delivery(item: GitHubDeliveryItem) -> Delivery:
    return Delivery(
        delivery_id=item.delivery_id,
        event=item.event,
        body_sha256=item.body_sha256,
        status_code=int(item.status_code),
        outcome=dict(item.outcome or {}),
        source_id=item.source_id,
    )


def _recorded(delivery_id: str, current: Item | None) -> Delivery:
    """The stored record a refused put found (plain attribute values: the outcome is
    still the JSON text the attribute stores)."""
    stored = current or {}
    outcome = stored.get("outcome") or {}
    if isinstance(outcome, str):
        outcome = json.loads(outcome)
    return Delivery(
        delivery_id=delivery_id,
        event=str(stored.get("event", "")),
        body_sha256=str(stored.get("body_sha256")),
        status_code=int(stored.get("status_code", 200)),
        outcome=dict(outcome),
        source_id=stored.get("source_id"),
    )


def record_delivery(
    delivery: Delivery, now: datetime, source: SourceIngestionItem | None = None
) -> Transaction:
    """Put the delivery once (and the ingestion it starts, in the same write)."""

    def seen(current: Item | None) -> Exception:
        return DeliveryAlreadyRecorded(_recorded(delivery.delivery_id, current))

    write = Transaction().put_new(
        GitHubDeliveryItem(
            *github_delivery_key(delivery.delivery_id),
            delivery_id=delivery.delivery_id,
            event=delivery.event,
            body_sha256=delivery.body_sha256,
            received_at=now,
            status_code=delivery.status_code,
            outcome=delivery.outcome,
            source_id=delivery.source_id,
            expires_at=now + DELIVERY_RETENTION,
        ),
        on_refused=seen,
    )
    if source is not None:
        write.put_new(source)
    return write


def get_source(source_id: str) -> SourceIngestionItem:
    try:
        return SourceIngestionItem.get(*source_key(source_id), consistent_read=True)
    except SourceIngestionItem.DoesNotExist:
        raise NotFound("source ingestion", source_id) from None


def find_source(source_id: str) -> SourceIngestionItem | None:
    try:
        return get_source(source_id)
    except NotFound:
        return None


def _moved(source_id: str) -> Any:
    def refuse(current: Item | None) -> Exception:
        state = (current or {}).get("status")
        return Conflict(f"source ingestion {source_id} is {state}, not pending")

    return refuse


def mark_ready(
    source_id: str,
    *,
    archive_sha256: str | None,
    archive_size: int | None,
    targets: list[dict[str, Any]],
    now: datetime,
    path_decisions: Sequence[PathDecision] = (),
) -> Transaction:
    """Make a pending ingestion ready. Its archive is None when every bound workspace's
    path filters skipped the change (nothing was downloaded)."""
    actions: list[Any] = [
        SourceIngestionItem.status.set("ready"),
        SourceIngestionItem.targets.set(targets),
        SourceIngestionItem.updated_at.set(now),
    ]
    if archive_sha256 is not None and archive_size is not None:
        actions.append(SourceIngestionItem.archive_sha256.set(archive_sha256))
        actions.append(SourceIngestionItem.archive_size.set(archive_size))
    if path_decisions:
        actions.append(
            SourceIngestionItem.path_decisions.set([d.to_dict() for d in path_decisions])
        )
    return Transaction().update(
        SourceIngestionItem(*source_key(source_id)),
        actions,
        condition=SourceIngestionItem.status == "pending",
        on_refused=_moved(source_id),
    )


def set_targets(source_id: str, targets: list[dict[str, Any]], now: datetime) -> Transaction:
    return Transaction().update(
        SourceIngestionItem(*source_key(source_id)),
        [SourceIngestionItem.targets.set(targets), SourceIngestionItem.updated_at.set(now)],
        condition=SourceIngestionItem.status == "ready",
    )


def mark_failed(source_id: str, reason: str, now: datetime) -> Transaction:
    return Transaction().update(
        SourceIngestionItem(*source_key(source_id)),
        [
            SourceIngestionItem.status.set("failed"),
            SourceIngestionItem.reason.set(reason[:500]),
            SourceIngestionItem.updated_at.set(now),
        ],
        condition=SourceIngestionItem.status == "pending",
        on_refused=_moved(source_id),
    )


def _target(record: Mapping[str, Any]) -> IngestionTarget:
    return IngestionTarget(
        workspace_id=str(record["workspace_id"]),
        working_directory=str(record.get("working_directory", "")),
        kind=RunKind(str(record["kind"])),
        configuration_version_id=str(record["configuration_version_id"]),
        configuration_artifact_id=str(record["configuration_artifact_id"]),
        run_id=record.get("run_id") or None,
        error=record.get("error") or None,
        bound_workspace_id=record.get("bound_workspace_id") or None,
    )


def _target_record(target: IngestionTarget) -> dict[str, Any]:
    """A target as the item keeps it: ``run_id`` always (None until a run is made),
    ``error`` only once there is one."""
    record: dict[str, Any] = {
        "workspace_id": target.workspace_id,
        "working_directory": target.working_directory,
        "kind": target.kind.value,
        "configuration_version_id": target.configuration_version_id,
        "configuration_artifact_id": target.configuration_artifact_id,
        "run_id": target.run_id,
    }
    if target.error is not None:
        record["error"] = target.error
    if target.bound_workspace_id is not None:
        record["bound_workspace_id"] = target.bound_workspace_id
    return record


def _to_ingestion(item: SourceIngestionItem) -> Ingestion:
    return Ingestion(
        id=item.source_id,
        organization_id=item.org_id,
        delivery_id=item.delivery_id,
        event=item.event,
        action=item.action,
        repository=item.repository,
        branch=item.branch,
        ref=item.ref,
        commit_sha=item.commit_sha,
        installation_id=int(item.installation_id),
        pull_request=None if item.pull_request is None else int(item.pull_request),
        sender=item.sender,
        commit_message=item.commit_message,
        pull_request_title=item.pull_request_title,
        pull_request_author=item.pull_request_author,
        status=item.status,
        workflow_id=item.workflow_id,
        created_at=item.created_at,
        updated_at=item.updated_at,
        archive_sha256=item.archive_sha256,
        archive_size=None if item.archive_size is None else int(item.archive_size),
        targets=tuple(_target(record) for record in item.targets or []),
        reason=item.reason,
        before_sha=item.before_sha,
        forced=bool(item.forced),
        path_decisions=tuple(PathDecision.from_dict(d) for d in item.path_decisions or []),
    )


def _ingestion_item(ingestion: Ingestion) -> SourceIngestionItem:
    return SourceIngestionItem(
        *source_key(ingestion.id),
        source_id=ingestion.id,
        org_id=ingestion.organization_id,
        delivery_id=ingestion.delivery_id,
        event=ingestion.event,
        action=ingestion.action,
        repository=ingestion.repository,
        branch=ingestion.branch,
        ref=ingestion.ref,
        commit_sha=ingestion.commit_sha,
        installation_id=ingestion.installation_id,
        pull_request=ingestion.pull_request,
        sender=ingestion.sender,
        commit_message=ingestion.commit_message,
        pull_request_title=ingestion.pull_request_title,
        pull_request_author=ingestion.pull_request_author,
        status=ingestion.status,
        workflow_id=ingestion.workflow_id,
        archive_sha256=ingestion.archive_sha256,
        archive_size=ingestion.archive_size,
        targets=[_target_record(target) for target in ingestion.targets],
        reason=ingestion.reason,
        before_sha=ingestion.before_sha,
        forced=ingestion.forced or None,
        path_decisions=[d.to_dict() for d in ingestion.path_decisions] or None,
        created_at=ingestion.created_at,
        updated_at=ingestion.updated_at,
    )


def _configuration_item(
    fetched: FetchedConfiguration, source_id: str, now: datetime
) -> ConfigurationVersionItem:
    """The configuration version an ingestion records for a target, already uploaded."""
    target = fetched.target
    return ConfigurationVersionItem(
        *configuration_version_key(target.configuration_version_id),
        cv_id=target.configuration_version_id,
        org_id=fetched.organization_id,
        workspace_id=target.workspace_id,
        status="uploaded",
        upload_id=f"source:{source_id}",
        artifact_id=target.configuration_artifact_id,
        sha256=fetched.sha256,
        size=fetched.size,
        created_at=now,
        uploaded_at=now,
        speculative=fetched.speculative,
        source_id=source_id,
    )


def _to_source(item: SourceIngestionItem) -> SourceIngestion:
    """What provenance shows of an ingestion's item (its targets in recorded order)."""
    return SourceIngestion(
        id=item.source_id,
        organization_id=item.org_id,
        status=item.status,
        delivery_id=item.delivery_id,
        workflow_id=item.workflow_id,
        event=item.event,
        repository=item.repository,
        ref=item.ref,
        branch=item.branch,
        pull_request=None if item.pull_request is None else int(item.pull_request),
        commit_sha=item.commit_sha,
        commit_message=item.commit_message,
        sender=item.sender,
        pull_request_title=item.pull_request_title,
        pull_request_author=item.pull_request_author,
        archive_sha256=item.archive_sha256,
        targets=tuple(
            SourceTarget(
                configuration_version_id=target.get("configuration_version_id"),
                configuration_artifact_id=target.get("configuration_artifact_id"),
                working_directory=target.get("working_directory", ""),
            )
            for target in item.targets or []
        ),
    )


class DynamoSourceRecords:
    """``SourceRecords`` on the table (``services.repositories.operations``)."""

    def configuration_origin(self, cv_id: str) -> ConfigurationOrigin | None:
        return configuration_versions.find_origin(cv_id)

    def source(self, source_id: str) -> SourceIngestion | None:
        item = find_source(source_id)
        return None if item is None else _to_source(item)


class DynamoGitHubSources:
    """``GitHubSourceStore`` on the table (``services.repositories.github``): each
    method one transaction, a binding's with its installation's count."""

    def binding(self, workspace_id: str) -> Binding | None:
        return get_binding(workspace_id)

    def bound_to(self, repository: str) -> list[Binding]:
        return bound_to(repository)

    def bind(
        self,
        binding: Binding,
        previous: Binding | None,
        *,
        actor: str,
        now: datetime,
        release_note: Callable[[], AuditNote],
    ) -> None:
        write = bind(binding, previous, actor=actor, now=now)
        write.extend(
            [
                github_installations.binding_change(
                    binding, previous, now=now, release_note=release_note
                )
            ]
        )
        write.commit()

    def unbind(
        self, binding: Binding, *, now: datetime, release_note: Callable[[], AuditNote]
    ) -> None:
        write = unbind(binding)
        write.extend(
            [github_installations.binding_change(None, binding, now=now, release_note=release_note)]
        )
        write.commit()

    def preview(self, parent_workspace_id: str, pull_request: int) -> PreviewWorkspace | None:
        return get_preview(parent_workspace_id, pull_request)

    def record_preview(self, preview: PreviewWorkspace, previous: PreviewWorkspace | None) -> None:
        put_preview(preview, previous).commit()

    def delivery(self, delivery_id: str) -> Delivery | None:
        item = get_delivery(delivery_id)
        return None if item is None else _delivery(item)

    def record_delivery(
        self, delivery: Delivery, *, received_at: datetime, starts: Ingestion | None
    ) -> None:
        source = None if starts is None else _ingestion_item(starts)
        record_delivery(delivery, received_at, source).commit()

    def ingestion(self, source_id: str) -> Ingestion | None:
        item = find_source(source_id)
        return None if item is None else _to_ingestion(item)

    def record_fetched(
        self,
        source_id: str,
        *,
        archive_sha256: str | None,
        archive_size: int | None,
        configurations: Sequence[FetchedConfiguration],
        targets: Sequence[IngestionTarget],
        now: datetime,
        path_decisions: Sequence[PathDecision] = (),
    ) -> None:
        write = Transaction()
        for fetched in configurations:
            write.put_new(_configuration_item(fetched, source_id, now))
        write.extend(
            [
                mark_ready(
                    source_id,
                    archive_sha256=archive_sha256,
                    archive_size=archive_size,
                    targets=[_target_record(target) for target in targets],
                    now=now,
                    path_decisions=path_decisions,
                )
            ]
        )
        write.commit()

    def set_targets(
        self, source_id: str, targets: Sequence[IngestionTarget], now: datetime
    ) -> None:
        set_targets(source_id, [_target_record(target) for target in targets], now).commit()

    def mark_failed(self, source_id: str, reason: str, now: datetime) -> None:
        mark_failed(source_id, reason, now).commit()
