"""Run triggers: configure source workspaces; queue dependent runs when a source applies.

A dependent run uses the configuration of the dependent workspace's most recent
non-speculative run (what that workspace last planned from; a speculative
configuration is a proposal and never applied by a trigger) and the run kind
configured with the workspace's triggers. The run is created in ONE transaction
with a claim keyed by source run and dependent workspace, so an event handled
twice queues one run.

A launch refused by launch controls (503, "retry later") is retried with backoff a
bounded number of times through the event queue; after the last try, or at once for
a refusal no retry can change (no configuration, a deleted workspace), the skip is
recorded on the claim (shown in the source run's review) with an organization audit
event. A trigger never loops to the dead-letter queue for a known refusal.

The source lists go through the ``RunTriggerStore`` seam; the claim is a record of the
triggered run's creation (``RunCreations``, through ``Runs.create``), and the claims
and skips are read and the skips written through ``TriggerClaims``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runplane.adapters.event_queue import EventQueue
from runplane.adapters.workflow import Workflow
from runplane.domain import run_triggers as rules
from runplane.domain.clock import Clock
from runplane.domain.creation import TriggerClaim
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    AlreadyTriggered,
    ConcurrentChange,
    LaunchDenied,
    NotFound,
    RunplaneError,
    RunTriggerRefused,
)
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.parts import RunInput
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType, RunEvent
from runplane.domain.run_triggers import Triggers
from runplane.services.runs import Runs
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.services.repositories import RunReader, RunTriggerStore, WorkspaceDirectory
    from runplane.services.repositories.creation import TriggerClaims

logger = logging.getLogger("runplane.triggers")

_TRIGGER_PERMISSIONS = frozenset(
    {Permission.WORKSPACE_READ, Permission.RUN_READ, Permission.RUN_CREATE}
)
# The event-queue message of a trigger retried after a refused launch.
RETRY = "trigger"
# A trigger looks for the configuration to run among this many of the newest runs first.
_NEWEST_RUNS = 20


class RunTriggers:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        runs: Runs,
        reader: RunReader,
        workflow: Workflow,
        queue: EventQueue,
        *,
        retry_base_seconds: int = rules.LAUNCH_RETRY_BASE_SECONDS,
        triggers: RunTriggerStore,
        directory: WorkspaceDirectory,
        claims: TriggerClaims,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._runs = runs
        # A dependent's runs (the configuration it last planned) and a claimed run.
        self._reader = reader
        self._workflow = workflow
        self._queue = queue
        self._retry_base = retry_base_seconds
        self._store = triggers
        # Names of sources and dependents, and the dependent a source run triggers: read
        # without a caller (the caller's own workspace was checked before).
        self._directory = directory
        self._claims = claims

    # -- configuration (API) ----------------------------------------------------------------

    def show(self, principal: Principal, workspace_id: str) -> dict[str, Any]:
        workspace = self._workspaces.by_id(principal, workspace_id)
        triggers = self._store.get(workspace.id)
        return {
            "workspace_id": workspace.id,
            "run_kind": triggers.run_kind.value,
            "sources": [self._named(s) for s in triggers.sources],
            "dependents": [self._named(d) for d in sorted(self._store.dependents(workspace.id))],
        }

    def add(
        self,
        principal: Principal,
        workspace_id: str,
        source_id: str,
        run_kind: RunKind | None = None,
    ) -> dict[str, Any]:
        """Add ``source_id`` as a source of ``workspace_id`` (both in the caller's
        organization). Refused, writing nothing: itself, past 20 sources, or a cycle."""
        dependent = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, dependent.id)
        try:
            source = self._workspaces.by_id(principal, source_id)
        except NotFound:
            raise NotFound("workspace", source_id, "/source_workspace_id") from None
        current = self._store.get(dependent.id)
        rules.check_new_source(dependent.id, source.id, current.sources)
        read: dict[str, Triggers] = {}

        def sources_of(workspace: str) -> tuple[str, ...]:
            read[workspace] = self._store.get(workspace)
            return read[workspace].sources

        cycle, _ = rules.find_cycle(dependent.id, source.id, sources_of)
        if cycle:
            raise RunTriggerRefused(
                f"workspace {source.id} already depends on {dependent.id} through its own "
                "sources: adding it would make a cycle",
                "/source_workspace_id",
            )
        # Every trigger list the cycle check read must still be as read when this commits.
        self._store.add_source(
            current,
            source.id,
            org_id=dependent.organization_id,
            run_kind=run_kind or current.run_kind,
            now=self._clock.now(),
            unchanged=[t for w, t in read.items() if w != dependent.id],
        )
        return self.show(principal, dependent.id)

    def remove(self, principal: Principal, workspace_id: str, source_id: str) -> dict[str, Any]:
        dependent = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, dependent.id)
        current = self._store.get(dependent.id)
        if source_id not in current.sources:
            raise NotFound("run trigger source", source_id)
        self._store.remove_source(
            current, source_id, org_id=dependent.organization_id, now=self._clock.now()
        )
        return self.show(principal, dependent.id)

    def _named(self, workspace_id: str) -> dict[str, str]:
        try:
            name = self._directory.get_workspace(workspace_id).name
        except NotFound:
            name = ""
        return {"id": workspace_id, "name": name}

    # -- the event handler (worker) ---------------------------------------------------------

    def on_event(self, event: RunEvent) -> None:
        """An applied run queues one run in each dependent workspace."""
        if event.type is not EventType.APPLIED:
            return
        if event.subscribers is not None and not event.subscribers.dependents:
            return  # no workspace followed this one's applies when it applied
        for dependent_id in self._store.dependents(event.workspace_id):
            self.queue_dependent(event, dependent_id)

    def retry(self, message: Mapping[str, Any]) -> None:
        """A trigger whose launch was refused earlier, tried again (an event message)."""
        event = RunEvent.from_message(message["event"])
        self.queue_dependent(event, str(message["dependent_workspace_id"]), int(message["try"]))

    def queue_dependent(self, event: RunEvent, dependent_id: str, tries: int = 1) -> str | None:
        """The run ``event``'s source run queued in ``dependent_id`` (created now, or
        found from an earlier try), or None when nothing was queued (skipped, or to be
        retried after a refused launch)."""
        try:
            dependent = self._directory.get_workspace(dependent_id)
        except NotFound:
            return None
        triggers = self._store.get(dependent.id)
        if dependent.organization_id != event.organization_id or (
            event.workspace_id not in triggers.sources
        ):
            return None
        already = self._claimed(event.of_run, dependent.id)
        if already is not None:
            return self._ensure_started(already) if already else None
        configuration = self._latest_configuration(dependent)
        if configuration is None:
            self._skip(event, dependent, "the workspace has no configuration to run yet")
            return None
        principal = Principal(
            kind=PrincipalKind.SYSTEM,
            id=f"trigger:{event.run_id}",
            organization_id=dependent.organization_id,
            permissions=_TRIGGER_PERMISSIONS,
            display=f"run trigger from {event.run_id}",
        )
        run_id = self._ids.new(IdKind.RUN)
        try:
            run = self._runs.create(
                principal,
                dependent.id,
                kind=triggers.run_kind,
                configuration_version_id=configuration,
                engine_version=None,
                variables={},
                message=f"Triggered by run {event.run_id}",
                extra_input={
                    "trigger": {
                        "source_run_id": event.run_id,
                        "source_workspace_id": event.workspace_id,
                        "event_id": event.id,
                    }
                },
                records=[TriggerClaim(event.of_run, dependent.id, self._clock.now())],
                run_id=run_id,
            )
        except AlreadyTriggered as first:
            return self._ensure_started(first.run_id) if first.run_id else None
        except LaunchDenied as denied:
            self._launch_refused(event, dependent, tries, denied)
            return None
        except ConcurrentChange:
            raise  # transient: the event is redelivered
        except RunplaneError as refused:
            # Nothing a retry would change (e.g. the configuration is gone).
            self._skip(event, dependent, refused.message)
            return None
        return run.id

    def _launch_refused(
        self, event: RunEvent, dependent: Workspace, tries: int, denied: LaunchDenied
    ) -> None:
        if tries >= rules.MAX_LAUNCH_TRIES:
            self._skip(event, dependent, f"launch refused {tries} times: {denied.reason}")
            return
        delay = rules.launch_retry_delay(tries, self._retry_base)
        logger.info(
            "run trigger launch refused; retrying",
            extra={"run_id": event.run_id, "workspace_id": dependent.id, "try": tries},
        )
        message = {
            "kind": RETRY,
            "event": event.to_message(),
            "dependent_workspace_id": dependent.id,
            "try": tries + 1,
        }
        self._queue.send(message, delay)

    def _skip(self, event: RunEvent, dependent: Workspace, reason: str) -> None:
        logger.warning(
            "run trigger skipped",
            extra={"run_id": event.run_id, "workspace_id": dependent.id, "reason": reason},
        )
        # Refused when an earlier try already queued a run or recorded the skip.
        with contextlib.suppress(AlreadyTriggered):
            self._claims.skip(
                event.of_run,
                dependent.id,
                org_id=dependent.organization_id,
                reason=reason,
                event_id=event.id,
                now=self._clock.now(),
            )

    def _claimed(self, source_run_id: str, dependent_id: str) -> str | None:
        """The run the source run queued in the dependent ("" if it recorded a skip), or
        None if it has not claimed the dependent yet."""
        for claim in self._claims.of_source(source_run_id):
            if claim.dependent_workspace_id == dependent_id:
                return claim.run_id or ""
        return None

    def _ensure_started(self, run_id: str) -> str:
        """An earlier try created the run; its workflow start may be what failed."""
        run = self._reader.get_run(run_id)
        if run.status is RunStatus.DISPATCH_PENDING:
            self._workflow.start(run)
        return run_id

    def _latest_configuration(self, workspace: Workspace) -> str | None:
        # The newest runs first; the whole history only if none of those has one (a
        # workspace of speculative plans), so a trigger costs the same at any age.
        newest = self._reader.runs_of_workspace(workspace.id, _NEWEST_RUNS)
        found = self._configuration_among(newest)
        if found is not None or len(newest) < _NEWEST_RUNS:
            return found
        return self._configuration_among(self._reader.runs_of_workspace(workspace.id))

    def _configuration_among(self, runs: list[Run]) -> str | None:
        for run in sorted(runs, key=lambda r: r.created_at, reverse=True):
            if run.kind is RunKind.SPECULATIVE:
                continue
            snapshot = self._reader.parts(run.id).get("input")
            cv_id = RunInput.from_body(snapshot.body).configuration_version_id if snapshot else None
            if cv_id:
                return cv_id
        return None
