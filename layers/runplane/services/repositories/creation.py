"""The seams of a run's creation: the run written with its caller's records, the
claims a source run makes on its dependents, and configuration versions.

Like the seams in ``repositories/__init__.py``, each names domain types only; the
DynamoDB implementations are in ``store/`` (``store.run_creations``,
``store.run_trigger_store``, ``store.configuration_versions``) and in-memory fakes that
keep the same promises in ``tests/fakes_creation.py``, held to the same cases by
tests/integration/test_run_creations_contract.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from runplane.domain.artifacts import Artifact
from runplane.domain.creation import CallerRecord, ConfigurationVersion
from runplane.domain.entities import Run
from runplane.domain.run_triggers import Triggered

Write_co = TypeVar("Write_co", covariant=True)


class RunCreations(Protocol[Write_co]):
    """A new run written at once with everything that must exist exactly when it does.

    - ``create`` writes the run (in the status and at the version given), its four
      pending stages, its ``run.created`` audit event, its input snapshot ``input`` and
      the caller's ``records`` (a schedule's fire, a run trigger's claim) in ONE
      conditional write, or nothing: a run ID taken raises ``RunAlreadyExists``, then
      each record's own refusal in order (``ScheduleAlreadyFired``, ``ScheduleMoved``,
      ``AlreadyTriggered``).
    - ``writes`` is ``create``'s write, not yet made, for the transaction that records
      the run's variables artifact (``ArtifactStore.put``'s ``together``): the
      variables are stored exactly when the run is. ``Write_co`` is the store's kind of
      write (a transaction on DynamoDB), handed on without being looked into.
    - ``reading_ahead`` reads what a creation reads first (the workspace, the
      configuration version, the workspace's variable tally, and the launch controls
      and sandbox counts of ``control_scopes``) in one request, and serves each to the
      block's first read of it; a store without such reads yields at once.
    """

    def create(
        self,
        run: Run,
        *,
        actor: str,
        input: Mapping[str, Any],
        records: Sequence[CallerRecord] = (),
    ) -> None: ...

    def writes(
        self,
        run: Run,
        *,
        actor: str,
        input: Mapping[str, Any],
        records: Sequence[CallerRecord] = (),
    ) -> Write_co: ...

    def reading_ahead(
        self,
        workspace_id: str,
        configuration_version_id: str,
        control_scopes: Sequence[str],
        organization_id: str | None = None,
    ) -> AbstractContextManager[None]: ...


class TriggerClaims(Protocol):
    """What a source run did in each dependent workspace: the run it queued (its claim,
    written with that run by ``RunCreations``) or why it queued none.

    - ``of_source`` holds the source run's claims in dependent workspace ID order.
    - ``skip`` records that the source run queued nothing in ``dependent_id`` and why,
      with the organization audit event ``run_trigger.skipped`` (ID
      ``<event_id>.skipped.<dependent_id>``); refused with ``AlreadyTriggered`` (naming
      the run claimed, "" for a skip) if a claim is there already, writing nothing.
    """

    def of_source(self, source_run_id: str) -> list[Triggered]: ...

    def skip(
        self,
        source_run_id: str,
        dependent_id: str,
        *,
        org_id: str,
        reason: str,
        event_id: str,
        now: datetime,
    ) -> None: ...


class ConfigurationVersions(Protocol[Write_co]):
    """Uploads of a workspace's configuration.

    - ``get`` is the version (a consistent read, served from a read ahead where there
      was one), or None for an unknown one.
    - ``create`` writes a new version (``ConcurrentChange`` if its ID exists, writing
      nothing).
    - ``record_upload`` is the write, not yet made, that records ``artifact`` as the
      version's upload (uploaded at ``now``, listed from then on among the workspace's
      uploads): it commits in the artifact's own transaction (``ArtifactStore``'s
      ``together``), refused with ``Conflict`` unless the version is still pending.
    """

    def get(self, cv_id: str) -> ConfigurationVersion | None: ...

    def create(self, version: ConfigurationVersion) -> None: ...

    def record_upload(
        self, cv_id: str, workspace_id: str, artifact: Artifact, now: datetime
    ) -> Write_co: ...
