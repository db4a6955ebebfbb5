"""Runs and their stages: creation and the one conditional transition write."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from runplane.domain.clock import Clock
from runplane.domain.entities import AuditEvent, Run, RunStage
from runplane.domain.errors import (
    ConcurrentChange,
    NotFound,
    RunAlreadyExists,
    TransitionRejected,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus, Transitioned
from runplane.store import audit
from runplane.store.attention import attention_writes
from runplane.store.models import (
    STAGE_PREFIX,
    RunItem,
    RunStageItem,
    run_audit_key,
    run_key,
    stage_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.transaction import Item, OnRefused, Transaction

# Attributes a transition may set on the run besides status and version.
_SETTABLE = frozenset({"plan_has_changes", "predecessor_sv_id", "approval_expires_at"})

FIRST_VERSION = 1


# The outbox writes announcing a move, built from the move itself (its version and time).
Announce = Callable[[Transitioned], Iterable[Transaction]]


def runs_partition(workspace_id: str) -> str:
    return f"WS#{workspace_id}#RUNS"


def get_run(run_id: str, *, reads: IdentityMap) -> Run:
    """The run (consistent; ``NotFound`` if absent), served from ``reads`` if it was read
    ahead there."""
    prefetched = reads.take(run_key(run_id))
    if prefetched is not None:
        return to_run(RunItem.from_raw_data(prefetched))
    try:
        item = RunItem.get(*run_key(run_id), consistent_read=True)
    except RunItem.DoesNotExist:
        raise NotFound("run", run_id) from None
    return to_run(item)


class RunRepository:
    """The runs' records. A read is served from the identity map it is given, by default
    the request's (``scope``)."""

    def __init__(self, clock: Clock, ids: IdGenerator, scope: RequestScope = REQUEST) -> None:
        self._clock = clock
        self._ids = ids
        self._scope = scope

    def create(self, run: Run, *, actor: str, extra_writes: Iterable[Transaction] = ()) -> None:
        """Persist a new run, its four pending stages and its creation event at once."""
        self.creation(run, actor=actor, extra_writes=extra_writes).commit()

    def creation(
        self, run: Run, *, actor: str, extra_writes: Iterable[Transaction] = ()
    ) -> Transaction:
        """``create``'s writes, for a caller to commit with its own (the run's variables)."""
        pk, sk = run_key(run.id)
        tx = Transaction().put_new(
            RunItem(
                pk,
                sk,
                gsi1pk=runs_partition(run.workspace_id),
                gsi1sk=f"{run.created_at.isoformat()}#{run.id}",
                run_id=run.id,
                org_id=run.organization_id,
                workspace_id=run.workspace_id,
                kind=run.kind.value,
                status=run.status.value,
                version=run.version,
                created_at=run.created_at,
                updated_at=run.updated_at,
                definition_version=run.definition_version,
                build_sha=run.build_sha,
                runner_release=run.runner_release,
                created_by=actor,
            ),
            on_refused=lambda current: RunAlreadyExists(run.id),
        )
        for stage in Stage:
            tx.put_new(
                RunStageItem(
                    *stage_key(run.id, stage.value),
                    run_id=run.id,
                    stage=stage.value,
                    status=StageStatus.PENDING.value,
                )
            )
        tx.put_new(
            audit.audit_item(
                key=run_audit_key(run.id, run.version),
                event_id=self._ids.new(IdKind.AUDIT_EVENT),
                org_id=run.organization_id,
                subject_id=run.id,
                type="run.created",
                actor=actor,
                at=run.created_at,
                details={"kind": run.kind.value, "status": run.status.value},
            )
        )
        return tx.extend(extra_writes)

    def get(self, run_id: str, *, reads: IdentityMap | None = None) -> Run:
        """``get_run`` from ``reads``, by default the request's identity map."""
        return get_run(run_id, reads=self._scope.reads() if reads is None else reads)

    def list_for_workspace(self, workspace_id: str) -> list[Run]:
        index = RunItem.gsi1
        return [to_run(item) for item in index.query(runs_partition(workspace_id))]

    def stages(self, run_id: str) -> dict[Stage, RunStage]:
        items = RunStageItem.query(
            run_key(run_id)[0], RunStageItem.sk.startswith(STAGE_PREFIX), consistent_read=True
        )
        return {
            Stage(item.stage): RunStage(
                run_id=item.run_id,
                stage=Stage(item.stage),
                status=StageStatus(item.status),
                started_at=item.started_at,
                finished_at=item.finished_at,
            )
            for item in items
        }

    def audit_trail(self, run_id: str) -> list[AuditEvent]:
        return audit.events_in(run_key(run_id)[0])

    def transition(
        self,
        run: Run,
        target: RunStatus,
        extra_writes: Iterable[Transaction] = (),
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        announce: Announce | None = None,
    ) -> Transitioned:
        """Move ``run`` from its snapshot status and version to ``target`` in ONE transaction.
        See ``transition_writes`` for what the transaction holds."""
        tx, moved = self.transition_writes(
            run,
            target,
            extra_writes,
            actor=actor,
            reason=reason,
            run_updates=run_updates,
            announce=announce,
        )
        tx.commit()
        return moved

    def transition_writes(
        self,
        run: Run,
        target: RunStatus,
        extra_writes: Iterable[Transaction] = (),
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        announce: Announce | None = None,
    ) -> tuple[Transaction, Transitioned]:
        """The uncommitted transaction of a move, for a caller that must commit it
        together with writes of its own (a capability redemption).

        The transaction holds the conditional status+version update, the stage
        changes the transition table prescribes, the audit event, the attention
        index's notice of the run (``store.attention``), the
        caller's ``extra_writes`` and the outbox events ``announce`` builds from
        the move (so an event exists exactly when its move committed). The
        version condition proves the snapshot (and so the facts the table's
        guard read) is what the database holds.
        A refused run condition raises ``TransitionRejected`` with the current
        item; any refusal writes nothing.
        """
        # The transition table loads where a run is moved, not where runs are read.
        from runplane.domain import transitions

        row = transitions.check(run.status, target, run.facts)
        updates = dict(run_updates or {})
        unknown = set(updates) - _SETTABLE
        if unknown:
            raise ValueError(f"a transition cannot set {sorted(unknown)}")
        now = self._clock.now()
        version = run.version + 1
        expected = f"{run.status} at version {run.version}"

        def rejected(current: Item | None) -> Exception:
            return TransitionRejected(run.id, expected, current)

        actions: list[Action] = [
            RunItem.status.set(target.value),
            RunItem.version.set(version),
            RunItem.updated_at.set(now),
            RunItem.status_reason.set(reason) if reason else RunItem.status_reason.remove(),
        ]
        actions += [getattr(RunItem, name).set(value) for name, value in updates.items()]
        tx = Transaction().update(
            RunItem(*run_key(run.id)),
            actions,
            condition=(RunItem.status == run.status.value) & (RunItem.version == run.version),
            on_refused=rejected,
        )
        for stage, status in row.stages.items():
            self._stage_write(tx, run.id, stage, status, now)
        details = {"from": run.status.value, "to": target.value}
        if reason:
            details["reason"] = reason
        tx.put_new(
            audit.audit_item(
                key=run_audit_key(run.id, version),
                event_id=self._ids.new(IdKind.AUDIT_EVENT),
                org_id=run.organization_id,
                subject_id=run.id,
                type=row.event,
                actor=actor,
                at=now,
                details=details,
            ),
            on_refused=rejected,
        )
        tx.extend(extra_writes)
        deadline = updates.get("approval_expires_at", run.approval_expires_at)
        tx.extend([attention_writes(run, target, now, deadline)])
        moved = Transitioned(run.id, run.status, target, version, row.event, now)
        if announce is not None:
            tx.extend(announce(moved))
        return tx, moved

    @staticmethod
    def _stage_write(
        tx: Transaction, run_id: str, stage: Stage, status: StageStatus, now: datetime
    ) -> None:
        actions: list[Action] = [RunStageItem.status.set(status.value)]
        if status is StageStatus.RUNNING:
            allowed: Condition = RunStageItem.status == StageStatus.PENDING.value
            actions.append(RunStageItem.started_at.set(now))
        else:
            allowed = RunStageItem.status.is_in(
                StageStatus.PENDING.value, StageStatus.RUNNING.value
            )
            actions.append(RunStageItem.finished_at.set(now))

        def refused(current: Item | None) -> Exception:
            held = current.get("status") if current else "missing"
            return ConcurrentChange(
                f"run {run_id}: stage {stage} is {held}, cannot become {status}"
            )

        tx.update(
            RunStageItem(*stage_key(run_id, stage.value)),
            actions,
            condition=allowed,
            on_refused=refused,
        )


def pinned_state_of(raw: dict[str, Any]) -> str | None:
    """The state version a raw run item (as a batch read returns it) pinned."""
    return RunItem.from_raw_data(raw).predecessor_sv_id


def workspace_of_raw_run(raw: dict[str, Any]) -> str:
    """The workspace of a raw run item (as a batch read returns it)."""
    return str(RunItem.from_raw_data(raw).workspace_id)


def to_run(item: RunItem) -> Run:
    return Run(
        id=item.run_id,
        organization_id=item.org_id,
        workspace_id=item.workspace_id,
        kind=RunKind(item.kind),
        status=RunStatus(item.status),
        version=int(item.version),
        created_at=item.created_at,
        updated_at=item.updated_at,
        plan_has_changes=item.plan_has_changes,
        status_reason=item.status_reason,
        definition_version=item.definition_version,
        build_sha=item.build_sha,
        created_by=item.created_by,
        predecessor_sv_id=item.predecessor_sv_id,
        approval_expires_at=item.approval_expires_at,
        runner_release=item.runner_release,
    )


def expect_status(run_id: str, status: RunStatus, on_refused: OnRefused) -> Transaction:
    """A condition check, to commit with other writes: the run is in ``status``."""
    return Transaction().check(RunItem, run_key(run_id), RunItem.status == status.value, on_refused)
