"""Operator recovery over the in-memory unit of work: who may recover, which runs, what
the evidence must match, the lease between operators, replays, pending uploads, the
emergency state's import, and what one completion writes (or, refused, does not)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest

from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import InvalidInput, NotFound, StateRejected
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.intents import MovedRun
from runplane.domain.parts import AttemptState, RunPart
from runplane.domain.recovery import (
    LEASE,
    NotRecoverable,
    RecoveryBlocked,
    RecoveryLeased,
    RecoveryRefused,
    RecoveryRequest,
    RecoveryState,
    Resolution,
    StepUpRequired,
)
from runplane.domain.run import RunStatus
from runplane.domain.state import FINALIZED, PENDING, StateVersion
from runplane.services.artifacts import ArtifactStore
from runplane.services.recovery import Recoveries
from tests.fake_unit_of_work import InMemoryRecoveries, InMemoryUnitOfWork, _Effect
from tests.fakes import (
    InMemoryArtifactRecords,
    InMemoryObjects,
    InMemoryStateVersions,
    LocalDataKeys,
)
from tests.service.conftest import Tier
from tests.service.scenarios import open_attempt, run_at, written

PRE_APPLY = "sv-pre"


@dataclass
class Desk:
    """The recovery service and what it writes through, beside the tier's stores."""

    tier: Tier
    service: Recoveries
    versions: InMemoryStateVersions
    recoveries: InMemoryRecoveries
    # What another writer does just before the next completion commits.
    meanwhile: list[Callable[[], None]]

    def operator(
        self, name: str = "oncall", *, signed_in_ago: timedelta = timedelta()
    ) -> Principal:
        return Principal(
            kind=PrincipalKind.USER,
            id=name,
            organization_id="org-acme",
            permissions=frozenset(Permission),
            display=name,
            auth_time=self.tier.clock.now() - signed_in_ago,
        )

    def recover(
        self, who: Principal, request: RecoveryRequest, run_id: str = "run-1"
    ) -> dict[str, Any]:
        return self.service.recover(who, run_id, request, self.tier.launcher)

    def workspace(self) -> Workspace:
        return self.tier.directory.workspaces["ws-1"]

    def everything(self) -> tuple[object, ...]:
        """All the stores recovery may write, to prove a refusal wrote nothing."""
        return (
            written(self.tier),
            dict(self.tier.directory.workspaces),
            dict(self.versions.versions),
            self.recoveries.saved(),
            list(self.tier.launcher.stopped),
        )


@pytest.fixture
def desk(tier: Tier) -> Desk:
    versions, recoveries = InMemoryStateVersions(), InMemoryRecoveries()
    meanwhile: list[Callable[[], None]] = []

    class Interleaved(InMemoryUnitOfWork):
        def commit(self) -> MovedRun | None:
            ending = any(isinstance(i, _Effect) and i.key[0] == "workspace" for i in self._intents)
            while ending and meanwhile:
                meanwhile.pop(0)()
            return super().commit()

    def units() -> InMemoryUnitOfWork:
        return Interleaved(
            tier.run_reader,
            tier.writer_queue,
            tier.sandboxes,
            directory=tier.directory,
            versions=versions,
            recoveries=recoveries,
        )

    records, objects, keys = InMemoryArtifactRecords(), InMemoryObjects(), LocalDataKeys()
    artifacts = ArtifactStore(tier.clock, tier.ids, objects, keys, records=records)
    service = Recoveries(tier.clock, tier.ids, artifacts, tier.workflow, units)
    return Desk(tier, service, versions, recoveries, meanwhile)


def interrupted(desk: Desk, status: RunStatus = RunStatus.NEEDS_RECOVERY) -> Run:
    """``run-1`` of ``ws-1``: its apply started in sandbox ``task-apply`` (slot, session,
    apply record) from the pinned state ``sv-pre``, then its outcome became uncertain;
    it keeps the writer reservation, ``run-2`` waits for it, and the workspace is at
    fence 4, locked by the apply, with ``sv-pre`` current."""
    tier = desk.tier
    ledger, now = tier.run_reader, tier.clock.now()
    run = run_at(tier, RunStatus.APPLYING)
    ledger.runs[run.id] = replace(run, predecessor_sv_id=PRE_APPLY)
    # Its plan's attempt is closed; a session it started is still held (an index read
    # that missed it when the attempt closed): recovery revokes it again.
    plan = {"attempt_id": "att-plan", "sandbox_id": "sbx-plan", "phase": "plan"}
    ledger.add_part(RunPart(run.id, "attempt#plan", AttemptState.SUCCEEDED, plan, None, now, now))
    tier.sandboxes.sessions["session-plan"] = None
    tier.sandboxes.of_attempt["att-plan"] = {"session-plan"}
    open_attempt(tier, run, "apply", "task-apply", "org#org-acme", "session-apply")
    record = {"attempt_id": "att-apply", "lock_id": "lock-1", "fence": 4}
    ledger.add_part(RunPart(run.id, "apply", "started", record, None, now, now))
    if status is not RunStatus.APPLYING:
        ledger.move(ledger.get_run(run.id), status, actor="workflow")
    tier.directory.workspaces["ws-1"] = Workspace(
        id="ws-1",
        organization_id="org-acme",
        name="network",
        created_at=now,
        fence=4,
        writer_run_id=None,
        lock_id="lock-1",
        lock_run_id=run.id,
        queue_length=0,
        current_state_version_id=PRE_APPLY,
        current_serial=1,
        current_lineage="lin-1",
    )
    desk.versions.add(
        StateVersion(
            id=PRE_APPLY,
            workspace_id="ws-1",
            organization_id="org-acme",
            serial=1,
            lineage="lin-1",
            md5="0" * 32,
            status=FINALIZED,
            created_at=now,
            created_by="user:ada",
        )
    )
    tier.writer_queue.holders["ws-1"] = run.id
    tier.writer_queue.waiting["ws-1"] = [("run-2", "tok-waiter")]
    ledger.audit.clear()
    ledger.announced.clear()
    return ledger.get_run(run.id)


def verified(
    current: str | None = PRE_APPLY, *, reason: str = "the apply never started", **more: object
) -> RecoveryRequest:
    return RecoveryRequest(
        resolution=Resolution.CURRENT_STATE_VERIFIED,
        reason=reason,
        confirm_authority_revocation=True,
        current_state_version_id=current,
        **more,  # type: ignore[arg-type]
    )


def emergency(serial: int = 2, lineage: str = "lin-1") -> RecoveryRequest:
    raw = json.dumps({"version": 4, "serial": serial, "lineage": lineage, "resources": []})
    state = raw.encode()
    return RecoveryRequest(
        resolution=Resolution.IMPORT_EMERGENCY_STATE,
        reason="errored.tfstate from the runner's volume",
        confirm_authority_revocation=True,
        current_state_version_id=PRE_APPLY,
        emergency_state=state,
        emergency_state_sha256=hashlib.sha256(state).hexdigest(),
    )


def test_a_completed_recovery_ends_the_runs_authority_in_one_commit(desk: Desk) -> None:
    # Given a run whose apply outcome is uncertain, holding the writer, run-2 waiting
    run = interrupted(desk)
    # When an operator verifies the current state is the truth
    result = desk.recover(desk.operator(), verified())
    # Then the recovery completed, the fence moved past anything the run was granted,
    # the lock is gone and run-2 holds the writer and was woken
    assert result["status"] == "completed"
    assert (result["fence"], result["writer_handed_to"]) == (5, "run-2")
    workspace = desk.workspace()
    assert (workspace.fence, workspace.lock_id) == (5, None)
    assert workspace.current_state_version_id == PRE_APPLY
    assert desk.tier.writer_queue.holders["ws-1"] == "run-2"
    assert desk.tier.writer_queue.waiting["ws-1"] == []
    assert desk.tier.workflow.resumed == [("tok-waiter", {"held": True})]
    # And the apply attempt is closed as recovered, its session revoked, its slot given
    # back and its sandbox stopped; the apply record says its authorization is revoked
    parts = desk.tier.run_reader.parts(run.id)
    assert parts["attempt#apply"].state == AttemptState.RECOVERED
    assert desk.tier.sandboxes.sessions["session-apply"] is not None
    assert desk.tier.sandboxes.sessions["session-plan"] is not None
    assert desk.tier.sandboxes.active["org#org-acme"] == 0
    assert desk.tier.launcher.stopped == ["task-apply"]
    assert parts["apply"].body["authorization"] == "revoked"
    assert parts["apply"].body["recovery_id"] == result["recovery_id"]
    # And the run keeps its status as history; both audit events name the operator
    assert desk.tier.run_reader.get_run(run.id).status is RunStatus.NEEDS_RECOVERY
    assert [(e.type, e.subject_id, e.actor) for e in desk.recoveries.org_audit] == [
        ("run.recovered", run.id, "user:oncall"),
        ("state.recovered", "ws-1", "user:oncall"),
    ]


@pytest.mark.parametrize(
    "status", [RunStatus.APPLY_START_UNCERTAIN, RunStatus.APPLY_INTERRUPTED, RunStatus.APPLY_FAILED]
)
def test_every_uncertain_ending_can_be_recovered(desk: Desk, status: RunStatus) -> None:
    interrupted(desk, status)
    assert desk.recover(desk.operator(), verified())["status"] == "completed"


def test_a_run_whose_outcome_is_known_is_not_recoverable_and_nothing_is_written(
    desk: Desk,
) -> None:
    # Given a run still applying (its outcome is not uncertain)
    interrupted(desk, RunStatus.APPLYING)
    before = desk.everything()
    # When an operator tries to recover it
    with pytest.raises(NotRecoverable):
        desk.recover(desk.operator(), verified())
    # Then nothing was written
    assert desk.everything() == before


def test_a_run_that_no_longer_holds_the_writer_is_not_recoverable(desk: Desk) -> None:
    interrupted(desk)
    desk.tier.writer_queue.holders["ws-1"] = "run-9"
    before = desk.everything()
    with pytest.raises(NotRecoverable, match="no longer holds the writer authority"):
        desk.recover(desk.operator(), verified())
    assert desk.everything() == before


@pytest.mark.parametrize(
    "missing", [Permission.RUN_RECOVER, Permission.STATE_RECOVER], ids=lambda p: str(p)
)
def test_both_recovery_permissions_are_required(desk: Desk, missing: Permission) -> None:
    interrupted(desk)
    before = desk.everything()
    who = replace(desk.operator(), permissions=frozenset(Permission) - {missing})
    with pytest.raises(Forbidden) as refused:
        desk.recover(who, verified())
    assert refused.value.http_status == 403
    assert desk.everything() == before


def test_an_old_or_missing_sign_in_must_step_up_first(desk: Desk) -> None:
    # Given operators who signed in 16 minutes ago, or whose sign-in time is unknown
    interrupted(desk)
    before = desk.everything()
    for who in (
        desk.operator(signed_in_ago=timedelta(minutes=16)),
        replace(desk.operator(), auth_time=None),
    ):
        # When they recover, then it is refused (403 STEP_UP_REQUIRED), writing nothing
        with pytest.raises(StepUpRequired) as refused:
            desk.recover(who, verified())
        assert (refused.value.http_status, refused.value.code) == (403, "STEP_UP_REQUIRED")
    assert desk.everything() == before
    # And a fresh sign-in may
    assert desk.recover(desk.operator(), verified())["status"] == "completed"


@pytest.mark.parametrize(
    "changes",
    [{"reason": "  "}, {"reason": "x" * 1001}, {"confirm_authority_revocation": False}],
    ids=["empty reason", "long reason", "no confirmation"],
)
def test_a_reason_and_the_confirmation_are_required(desk: Desk, changes: dict[str, Any]) -> None:
    interrupted(desk)
    before = desk.everything()
    with pytest.raises(InvalidInput) as refused:
        desk.recover(desk.operator(), replace(verified(), **changes))
    assert refused.value.http_status == 422
    assert desk.everything() == before


def test_another_organization_cannot_see_the_run(desk: Desk) -> None:
    interrupted(desk)
    stranger = replace(desk.operator(), organization_id="org-globex")
    with pytest.raises(NotFound):
        desk.recover(stranger, verified())
    with pytest.raises(NotFound):
        desk.recover(desk.operator(), verified(), run_id="run-unknown")


def test_evidence_naming_another_current_state_is_refused(desk: Desk) -> None:
    interrupted(desk)
    before = desk.everything()
    with pytest.raises(RecoveryRefused, match="review the run again"):
        desk.recover(desk.operator(), verified("sv-other"))
    assert desk.everything() == before


def test_another_operator_waits_for_the_lease_then_takes_over_only_explicitly(
    desk: Desk,
) -> None:
    # Given a recovery oncall prepared, whose completion was refused because the run
    # moved meanwhile (it moved back since): the recovery stays prepared, leased to oncall
    run = interrupted(desk)
    ledger = desk.tier.run_reader
    desk.meanwhile.append(
        lambda: ledger.runs.update({run.id: replace(run, status=RunStatus.CANCELED)})
    )
    with pytest.raises(RecoveryRefused):
        desk.recover(desk.operator(), verified())
    ledger.runs[run.id] = run
    assert desk.recoveries.held[run.id].holder == "user:oncall"
    # When bob submits the same evidence within oncall's lease
    with pytest.raises(RecoveryLeased):
        desk.recover(desk.operator("bob"), verified(reason="bob's view"))
    # And after the lease ran out, without confirming a takeover
    desk.tier.clock.advance(LEASE + timedelta(seconds=1))
    with pytest.raises(RecoveryRefused, match="confirm the takeover"):
        desk.recover(desk.operator("bob"), verified(reason="bob's view"))
    # Then with the takeover confirmed, bob completes it, and the takeover is recorded
    result = desk.recover(desk.operator("bob"), verified(reason="bob's view", takeover=True))
    assert result["recovered_by"] == "user:bob"
    recovery = desk.recoveries.held[run.id]
    assert (recovery.state, recovery.holder) == (RecoveryState.COMPLETED, "user:bob")
    assert [t["from"] for t in recovery.body["takeovers"]] == ["user:oncall"]


def test_a_replay_of_a_completed_recovery_returns_its_result_and_writes_nothing(
    desk: Desk,
) -> None:
    interrupted(desk)
    first = desk.recover(desk.operator(), verified())
    before = desk.everything()
    # When the same evidence is sent again (another reason is the same request)
    again = desk.recover(desk.operator(), verified(reason="retried after a timeout"))
    # Then it is the first result, and nothing was written or stopped again
    assert again == first
    assert desk.everything() == before
    # But other evidence for a recovered run is refused
    with pytest.raises(NotRecoverable, match="already recovered"):
        desk.recover(desk.operator(), verified(None))


def _pending(desk: Desk, sv_id: str, *, claimed: bool = False) -> StateVersion:
    now = desk.tier.clock.now()
    version = StateVersion(
        id=sv_id,
        workspace_id="ws-1",
        organization_id="org-acme",
        serial=2,
        lineage="lin-1",
        md5="0" * 32,
        status=PENDING,
        created_at=now,
        created_by="runner",
        provenance={"run_id": "run-1"},
        claimed_at=now if claimed else None,
    )
    desk.versions.add(version)
    return version


def test_an_upload_that_may_still_arrive_blocks_recovery_until_it_expires(desk: Desk) -> None:
    # Given the run's state upload, declared now and not yet arrived
    interrupted(desk)
    _pending(desk, "sv-up")
    before = desk.everything()
    # When an operator recovers at once
    with pytest.raises(RecoveryBlocked) as blocked:
        desk.recover(desk.operator(), verified())
    # Then recovery is blocked with when to retry, and nothing was written
    assert blocked.value.retry_after_seconds is not None
    assert blocked.value.retry_after_seconds > 0
    assert desk.everything() == before
    # And after the upload URL expired, recovery discards it and completes
    desk.tier.clock.advance(timedelta(seconds=blocked.value.retry_after_seconds))
    result = desk.recover(desk.operator(), verified())
    assert [upload["id"] for upload in result["discarded_uploads"]] == ["sv-up"]
    assert "sv-up" not in desk.versions.versions


def test_a_claimed_upload_is_discarded_only_when_named_exactly(desk: Desk) -> None:
    from runplane.domain.recovery import ClaimedUpload

    interrupted(desk)
    claimed = _pending(desk, "sv-claimed", claimed=True)
    assert claimed.claimed_at is not None
    with pytest.raises(RecoveryBlocked, match="confirm its ID and claim time"):
        desk.recover(desk.operator(), verified())
    named = ClaimedUpload("sv-claimed", claimed.claimed_at.isoformat())
    result = desk.recover(
        desk.operator(),
        verified(discard_claimed_upload=named, acknowledge_state_loss=True),
    )
    assert result["discarded_uploads"] == [
        {"id": "sv-claimed", "claimed_at": claimed.claimed_at.isoformat()}
    ]


def test_an_emergency_state_becomes_the_next_version_after_the_pinned_one(desk: Desk) -> None:
    # Given an interrupted apply whose pinned state is still current
    interrupted(desk)
    # When the operator imports the engine's errored.tfstate (serial 2, same lineage)
    result = desk.recover(desk.operator(), emergency())
    # Then it is a finalized version after the pinned one, current at the new fence
    target = desk.versions.versions[result["state_version_id"]]
    assert (target.status, target.serial, target.predecessor_id) == (FINALIZED, 2, PRE_APPLY)
    workspace = desk.workspace()
    assert (workspace.current_state_version_id, workspace.current_serial) == (target.id, 2)
    assert workspace.fence == 5
    assert desk.recoveries.held["run-1"].target_artifact_id == target.artifact_id


def test_an_emergency_state_that_does_not_follow_the_pinned_one_is_refused(desk: Desk) -> None:
    interrupted(desk)
    before = desk.everything()
    with pytest.raises(StateRejected, match="lineage"):
        desk.recover(desk.operator(), emergency(lineage="another-lineage"))
    with pytest.raises(StateRejected):
        desk.recover(desk.operator(), emergency(serial=7))
    not_json = replace(emergency(), emergency_state=b"{")
    with pytest.raises(StateRejected):
        desk.recover(
            desk.operator(),
            replace(not_json, emergency_state_sha256=hashlib.sha256(b"{").hexdigest()),
        )
    assert desk.everything() == before


def test_a_run_moved_meanwhile_refuses_the_completion_and_writes_none_of_it(
    desk: Desk,
) -> None:
    # Given a run that is canceled between the completion's reads and its commit
    run = interrupted(desk)
    ledger = desk.tier.run_reader

    def cancel() -> None:
        ledger.runs[run.id] = replace(ledger.runs[run.id], status=RunStatus.CANCELED)

    desk.meanwhile.append(cancel)
    before_fence = desk.workspace().fence
    # When the operator recovers
    with pytest.raises(RecoveryRefused, match="changed during recovery"):
        desk.recover(desk.operator(), verified())
    # Then the writer, the attempt, its session and sandbox are as they were
    assert desk.workspace().fence == before_fence
    assert desk.tier.writer_queue.holders["ws-1"] == run.id
    assert ledger.parts(run.id)["attempt#apply"].state == AttemptState.STARTED
    assert desk.tier.sandboxes.sessions["session-apply"] is None
    assert desk.recoveries.org_audit == []
    assert desk.tier.launcher.stopped == []
    assert desk.recoveries.held[run.id].state is RecoveryState.PREPARED
