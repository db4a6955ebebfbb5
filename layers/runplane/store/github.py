"""GitHub bindings, webhook deliveries and source ingestions in the table."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from runplane.domain.errors import Conflict, NotFound
from runplane.domain.github import Binding, Delivery
from runplane.domain.run import RunKind
from runplane.domain.source_provenance import ConfigurationOrigin, SourceIngestion, SourceTarget
from runplane.store import configuration_versions
from runplane.store.models import (
    GitHubBindingItem,
    GitHubDeliveryItem,
    SourceIngestionItem,
    github_binding_key,
    github_delivery_key,
    github_route_key,
    source_key,
)
from runplane.store.transaction import Item, Transaction

# A delivery record outlives any redelivery GitHub offers (three days) with room to spare.
DELIVERY_RETENTION = timedelta(days=30)


class DeliveryAlreadyRecorded(Conflict):
    """The delivery ID was recorded before; ``current`` is the stored record."""

    code = "DELIVERY_ALREADY_RECORDED"

    def __init__(self, delivery_id: str, current: Item | None) -> None:
        super().__init__(f"delivery {delivery_id} was already received")
        self.current = current or {}


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


# -- deliveries and ingestions ---------------------------------------------------------


def get_delivery(delivery_id: str) -> GitHubDeliveryItem | None:
    try:
        return GitHubDeliveryItem.get(*github_delivery_key(delivery_id), consistent_read=True)
    except GitHubDeliveryItem.DoesNotExist:
        return None


def record_delivery(
    delivery: Delivery, now: datetime, source: SourceIngestionItem | None = None
) -> Transaction:
    """Put the delivery once (and the ingestion it starts, in the same write)."""

    def seen(current: Item | None) -> Exception:
        return DeliveryAlreadyRecorded(delivery.delivery_id, current)

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
    archive_sha256: str,
    archive_size: int,
    targets: list[dict[str, Any]],
    now: datetime,
) -> Transaction:
    return Transaction().update(
        SourceIngestionItem(*source_key(source_id)),
        [
            SourceIngestionItem.status.set("ready"),
            SourceIngestionItem.archive_sha256.set(archive_sha256),
            SourceIngestionItem.archive_size.set(archive_size),
            SourceIngestionItem.targets.set(targets),
            SourceIngestionItem.updated_at.set(now),
        ],
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
