"""In-memory seam of GitHub sources (runplane.services.repositories.github): plain
dicts keeping the DynamoDB store's promises, the same cases holding both
(tests/integration/test_github_store_contract.py). A refused write changes nothing and
raises the store's typed error. A binding's installation count lives in the
installations fake it is given, as on the table it lives in the installation's item."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from runplane.domain.errors import ConcurrentChange, Conflict, GitHubInstallationTaken
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
from tests.fakes_access import InMemoryGitHubInstallations
from tests.fakes_creation import InMemoryConfigurationVersions


@dataclass(frozen=True)
class RecordedConfiguration:
    """A configuration version an ingestion recorded (on the table, its item)."""

    fetched: FetchedConfiguration
    source_id: str
    created_at: datetime


class InMemoryGitHubSources:
    """``GitHubSourceStore``: bindings by workspace, deliveries and ingestions by ID, and
    the configuration versions ingestions recorded."""

    def __init__(
        self,
        installations: InMemoryGitHubInstallations,
        configuration_versions: InMemoryConfigurationVersions | None = None,
    ) -> None:
        self.installations = installations
        # Where runs find the configuration versions recorded here (on the table, the
        # same items), if a test creates runs of them.
        self.configuration_versions = configuration_versions
        self.bindings: dict[str, Binding] = {}
        self.deliveries: dict[str, Delivery] = {}
        self.received_at: dict[str, datetime] = {}
        self.ingestions: dict[str, Ingestion] = {}
        self.configurations: dict[str, RecordedConfiguration] = {}
        self.previews: dict[tuple[str, int], PreviewWorkspace] = {}

    # -- bindings ------------------------------------------------------------------------

    def binding(self, workspace_id: str) -> Binding | None:
        return self.bindings.get(workspace_id)

    def bound_to(self, repository: str) -> list[Binding]:
        return sorted(
            (b for b in self.bindings.values() if b.repository == repository),
            key=lambda b: b.workspace_id,
        )

    def bind(
        self,
        binding: Binding,
        previous: Binding | None,
        *,
        actor: str,
        now: datetime,
        release_note: Callable[[], AuditNote],
    ) -> None:
        leaving = self._leaving(previous, binding, release_note)
        current = self.bindings.get(binding.workspace_id)
        if not _same(current, previous):
            raise Conflict(
                f"the GitHub binding of workspace {binding.workspace_id} changed meanwhile; "
                "read it again"
            )
        org, number = binding.organization_id, binding.installation_id
        if self.installations.held(org, number) is None:
            raise _not_held(number)
        self._check_leaving(leaving)
        self.bindings[binding.workspace_id] = binding
        if previous is None or previous.installation_id != number:
            self.installations.use(org, number)
        self._leave(leaving, now)

    def unbind(
        self, binding: Binding, *, now: datetime, release_note: Callable[[], AuditNote]
    ) -> None:
        leaving = self._leaving(binding, None, release_note)
        current = self.bindings.get(binding.workspace_id)
        if (
            current is None
            or current.repository != binding.repository
            or current.installation_id != binding.installation_id
        ):
            raise Conflict(f"the GitHub binding of workspace {binding.workspace_id} changed")
        self._check_leaving(leaving)
        del self.bindings[binding.workspace_id]
        self._leave(leaving, now)

    def _leaving(
        self,
        previous: Binding | None,
        binding: Binding | None,
        release_note: Callable[[], AuditNote],
    ) -> tuple[Binding, int, AuditNote] | None:
        """The previous installation a binding leaves, as read before the write, with
        its note (drawn, as on the table, whenever it is still held)."""
        if previous is None or (
            binding is not None and binding.installation_id == previous.installation_id
        ):
            return None
        held = self.installations.held(previous.organization_id, previous.installation_id)
        if held is None:
            return None
        return previous, held.bindings, release_note()

    def _check_leaving(self, leaving: tuple[Binding, int, AuditNote] | None) -> None:
        if leaving is None:
            return
        previous, bindings, _ = leaving
        held = self.installations.held(previous.organization_id, previous.installation_id)
        if held is None or held.bindings != max(bindings, 1):
            raise Conflict("the installation's bindings changed meanwhile; try again")

    def _leave(self, leaving: tuple[Binding, int, AuditNote] | None, now: datetime) -> None:
        if leaving is None:
            return
        previous, bindings, note = leaving
        org, number = previous.organization_id, previous.installation_id
        if bindings <= 1:
            # Its last binding going releases the installation (and counts it no more).
            del self.installations.installations[(org, number)]
            del self.installations.holders[number]
            self.installations.counts[org] -= 1
            self.installations._audit(org, number, note, now)
            return
        held = self.installations.installations[(org, number)]
        self.installations.installations[(org, number)] = replace(held, bindings=held.bindings - 1)

    # -- preview workspaces --------------------------------------------------------------

    def preview(self, parent_workspace_id: str, pull_request: int) -> PreviewWorkspace | None:
        return self.previews.get((parent_workspace_id, pull_request))

    def record_preview(self, preview: PreviewWorkspace, previous: PreviewWorkspace | None) -> None:
        key = (preview.parent_workspace_id, preview.pull_request)
        current = self.previews.get(key)
        same = (
            current is None
            if previous is None
            else current is not None
            and (current.workspace_id, current.workspace_created, current.closed_at)
            == (previous.workspace_id, previous.workspace_created, previous.closed_at)
        )
        if not same:
            raise ConcurrentChange(
                f"the preview workspace of pull request #{preview.pull_request} changed "
                "meanwhile; nothing was written"
            )
        self.previews[key] = preview

    # -- deliveries ----------------------------------------------------------------------

    def delivery(self, delivery_id: str) -> Delivery | None:
        return self.deliveries.get(delivery_id)

    def record_delivery(
        self, delivery: Delivery, *, received_at: datetime, starts: Ingestion | None
    ) -> None:
        recorded = self.deliveries.get(delivery.delivery_id)
        if recorded is not None:
            raise DeliveryAlreadyRecorded(recorded)
        if starts is not None and starts.id in self.ingestions:
            raise ConcurrentChange("the ingestion changed concurrently; nothing was written")
        self.deliveries[delivery.delivery_id] = delivery
        self.received_at[delivery.delivery_id] = received_at
        if starts is not None:
            self.ingestions[starts.id] = starts

    # -- ingestions ----------------------------------------------------------------------

    def ingestion(self, source_id: str) -> Ingestion | None:
        return self.ingestions.get(source_id)

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
        ids = [c.target.configuration_version_id for c in configurations]
        shared = {} if self.configuration_versions is None else self.configuration_versions.versions
        if len(set(ids)) != len(ids) or any(
            cv_id in self.configurations or cv_id in shared for cv_id in ids
        ):
            raise ConcurrentChange("a configuration version changed concurrently")
        source = self._in(source_id, "pending", Conflict)
        for fetched in configurations:
            target = fetched.target
            self.configurations[target.configuration_version_id] = RecordedConfiguration(
                fetched, source_id, now
            )
            if self.configuration_versions is not None:
                version = self.configuration_versions.add_uploaded(
                    target.configuration_version_id,
                    fetched.organization_id,
                    target.workspace_id,
                    now,
                )
                shared[version.id] = replace(
                    version,
                    artifact_id=target.configuration_artifact_id,
                    speculative=fetched.speculative,
                    source_id=source_id,
                )
        self.ingestions[source_id] = replace(
            source,
            status="ready",
            archive_sha256=archive_sha256,
            archive_size=archive_size,
            targets=tuple(targets),
            updated_at=now,
            path_decisions=tuple(path_decisions),
        )

    def set_targets(
        self, source_id: str, targets: Sequence[IngestionTarget], now: datetime
    ) -> None:
        source = self._in(source_id, "ready", ConcurrentChange)
        self.ingestions[source_id] = replace(source, targets=tuple(targets), updated_at=now)

    def mark_failed(self, source_id: str, reason: str, now: datetime) -> None:
        source = self._in(source_id, "pending", Conflict)
        self.ingestions[source_id] = replace(
            source, status="failed", reason=reason[:500], updated_at=now
        )

    def _in(self, source_id: str, status: str, refusal: type[Conflict]) -> Ingestion:
        source = self.ingestions.get(source_id)
        if source is None or source.status != status:
            state = None if source is None else source.status
            raise refusal(f"source ingestion {source_id} is {state}, not {status}")
        return source


def _same(current: Binding | None, previous: Binding | None) -> bool:
    """The table's condition on a binding's replacement: absent if ``previous`` is
    None, else the same repository, branch and installation."""
    if previous is None or current is None:
        return current is None and previous is None
    return (current.repository, current.branch, current.installation_id) == (
        previous.repository,
        previous.branch,
        previous.installation_id,
    )


def _not_held(installation_id: int) -> GitHubInstallationTaken:
    return GitHubInstallationTaken(
        f"GitHub App installation {installation_id} is not connected to this organization: "
        "an admin connects it from the dashboard's GitHub page first"
    )
