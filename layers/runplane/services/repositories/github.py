"""The seam of GitHub sources: workspace bindings, webhook deliveries and the source
ingestions accepted deliveries start.

Every type named here is a domain value (``domain/github.py``, ``domain/github_connect.py``).
The DynamoDB implementation is ``store.github.DynamoGitHubSources``; the in-memory one
``tests/fakes_github.py``; the contract test that holds both to the same cases
``tests/integration/test_github_store_contract.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from runplane.domain.github import (
    Binding,
    Delivery,
    FetchedConfiguration,
    Ingestion,
    IngestionTarget,
    PreviewWorkspace,
)
from runplane.domain.github_connect import AuditNote
from runplane.domain.path_filters import PathDecision


class GitHubSourceStore(Protocol):
    """Bindings, deliveries and ingestions. Every write is conditional; a refused write
    writes nothing (nor anything it would have written with it) and raises the error
    named.

    Bindings (one per workspace; the installation it names counts it):

    - ``binding`` is a workspace's binding, or None; ``bound_to`` every binding of a
      repository, of all organizations (callers filter), in workspace ID order.
    - ``bind`` replaces the workspace's binding, only if it is still exactly
      ``previous`` (None: no binding; else the same repository, branch and
      installation), else ``Conflict``. In the same write the new installation counts
      one more binding, refused with ``GitHubInstallationTaken`` unless the binding's
      organization holds it (kept, when the installation does not change, only while
      still held); and the previous installation, if another, counts one fewer, its last
      binding releasing it with ``release_note()`` in the organization's audit trail
      (drawn whenever the previous installation is still held), a count moved
      meanwhile raising ``Conflict``. The binding's own refusal comes first.
    - ``unbind`` removes the binding, only if it still names ``binding``'s repository and
      installation (else ``Conflict``), and its installation counts one fewer, as for
      ``bind``.

    Preview workspaces (one per bound workspace and pull request):

    - ``preview`` is the preview a bound workspace's pull request got, or None.
    - ``record_preview`` puts it, only if none is recorded (``previous`` None) or the one
      recorded is still ``previous`` (its workspace, its creation and its close), else
      ``ConcurrentChange``.

    Deliveries (kept at least as long as GitHub redelivers them):

    - ``delivery`` is the delivery recorded under an ID, or None.
    - ``record_delivery`` records a delivery once, with the ingestion it ``starts`` in
      the same write: an ID recorded already raises ``DeliveryAlreadyRecorded``
      (``domain.github``) carrying that first record, and writes nothing; an ingestion ID taken,
      ``ConcurrentChange``.

    Ingestions:

    - ``ingestion`` is one by ID, targets in the order recorded, or None.
    - ``record_fetched`` records each fetched configuration's version and makes the
      ingestion ready with its archive (None when nothing was downloaded: every bound
      workspace's path filters skipped the change), ``targets`` and ``path_decisions``,
      in one write, only while it is pending (else ``Conflict``); a configuration
      version ID taken raises ``ConcurrentChange``, and that refusal comes first.
    - ``set_targets`` replaces a ready ingestion's targets (else ``ConcurrentChange``).
    - ``mark_failed`` fails a pending ingestion with its reason, cut at 500 characters
      (else ``Conflict``).
    """

    def binding(self, workspace_id: str) -> Binding | None: ...

    def bound_to(self, repository: str) -> list[Binding]: ...

    def bind(
        self,
        binding: Binding,
        previous: Binding | None,
        *,
        actor: str,
        now: datetime,
        release_note: Callable[[], AuditNote],
    ) -> None: ...

    def unbind(
        self, binding: Binding, *, now: datetime, release_note: Callable[[], AuditNote]
    ) -> None: ...

    def preview(self, parent_workspace_id: str, pull_request: int) -> PreviewWorkspace | None: ...

    def record_preview(
        self, preview: PreviewWorkspace, previous: PreviewWorkspace | None
    ) -> None: ...

    def delivery(self, delivery_id: str) -> Delivery | None: ...

    def record_delivery(
        self, delivery: Delivery, *, received_at: datetime, starts: Ingestion | None
    ) -> None: ...

    def ingestion(self, source_id: str) -> Ingestion | None: ...

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
    ) -> None: ...

    def set_targets(
        self, source_id: str, targets: Sequence[IngestionTarget], now: datetime
    ) -> None: ...

    def mark_failed(self, source_id: str, reason: str, now: datetime) -> None: ...
