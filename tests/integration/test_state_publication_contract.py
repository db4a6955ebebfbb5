"""The state publication and workspace lock contract: the same cases against the DynamoDB
store (on moto) and the in-memory fakes the service tier uses (tests/fakes_state.py), so
the fakes cannot drift. A publication moves the workspace's state pointer only under the
exact lock, fence, predecessor and writer, with a run's apply guard checked first; upload
tokens are used once; a refused write writes nothing and raises the same typed error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import LockHolder, Run, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    Conflict,
    NotFound,
    NotWriter,
    RunnerAuthorityRefused,
    RunNotApplying,
    RunplaneError,
    UploadUrlExpired,
    UploadUrlUsed,
    WorkspaceAlreadyLocked,
    WorkspaceHeldByRun,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.domain.parts import AttemptState, RunPart
from runplane.domain.publications import publication_of
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.state import (
    FINALIZED,
    PENDING,
    ApplyGuard,
    Authority,
    StateVersion,
    UploadToken,
)
from runplane.services.repositories.state import StatePublication, WorkspaceLocks
from runplane.store import audit, run_parts, state_versions
from runplane.store import workspaces as workspace_store
from runplane.store.apply_lock import DynamoWorkspaceLocks
from runplane.store.prefetch import IdentityMap
from runplane.store.runs import RunRepository
from runplane.store.state_publication import DynamoStatePublication
from runplane.store.writer import DynamoWriterAuthority
from runplane.wiring import run_lifecycle
from tests.fakes import FakeClock, InMemoryRunLedger, InMemoryStateVersions, InMemoryWorkspaces
from tests.fakes_state import InMemoryStatePublication, InMemoryWorkspaceLocks
from tests.integration.conftest import Stack

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG = "org-acme"
ADA = LockHolder("user:ada", "ada")


@dataclass
class Seams:
    publication: StatePublication
    locks: WorkspaceLocks
    organization_id: str
    workspace_id: str
    create_run: Callable[[str, RunStatus], Run]
    reserve: Callable[[Run], None]
    add_attempt: Callable[[str, AttemptState], None]
    workspace: Callable[[], Workspace]
    version: Callable[[str], StateVersion | None]
    # The organization's state.published events: (subject, version, actor).
    published: Callable[[], list[tuple[str, str, str]]]

    def written(self, *sv_ids: str, tokens: tuple[str, ...] = ()) -> object:
        """Everything a publication may change: the workspace, the versions, the tokens
        and the audit trail."""
        return (
            self.workspace(),
            [self.version(sv_id) for sv_id in sv_ids],
            [self.publication.upload_token(token) for token in tokens],
            self.published(),
        )

    def applying_run(
        self,
        attempt: AttemptState = AttemptState.STARTED,
        status: RunStatus = RunStatus.APPLYING,
    ) -> tuple[Run, Authority]:
        """Run ``run-1`` under the workspace's apply lock, in ``status`` (applying unless
        told) with its apply attempt in ``attempt``; and the authority its publication
        names."""
        run = self.create_run("run-1", status)
        self.reserve(run)
        fence = self.workspace().fence
        self.locks.acquire(
            self.workspace_id,
            LockHolder.for_run(run.id),
            lock_id="lock-run",
            observed_fence=fence,
            reason="apply",
            now=AT,
        )
        self.add_attempt(run.id, attempt)
        current = self.workspace()
        return run, Authority(
            self.workspace_id,
            f"run:{run.id}",
            "lock-run",
            current.current_state_version_id,
            fence=current.fence,
            run_id=run.id,
        )

    def user_lock(self) -> Authority:
        """Ada's lock on the workspace; the authority her publication names."""
        self.locks.acquire(
            self.workspace_id,
            ADA,
            lock_id="lock-ada",
            observed_fence=self.workspace().fence,
            reason=None,
            now=AT,
        )
        return Authority(
            self.workspace_id, ADA.ref, "lock-ada", self.workspace().current_state_version_id
        )


@pytest.fixture(params=["dynamodb", "memory"])
def seams(request: pytest.FixtureRequest) -> Seams:
    clock = FakeClock(AT)
    if request.param == "dynamodb":
        stack = request.getfixturevalue("stack")  # moto, with the table
        workspace: Workspace = request.getfixturevalue("workspace")
        lifecycle, writer = run_lifecycle(clock, stack.ids), DynamoWriterAuthority(clock, stack.ids)

        def create_run(run_id: str, status: RunStatus) -> Run:
            run = _run(run_id, workspace, status)
            lifecycle.ledger.create(run, actor="user:ada", input={})
            return lifecycle.runs.get(run_id)

        def add_attempt(run_id: str, state: AttemptState) -> None:
            run_parts.put(run_id, "attempt#apply", state=state, body=_attempt(), now=AT).commit()

        def version(sv_id: str) -> StateVersion | None:
            try:
                return state_versions.get(sv_id, reads=IdentityMap())
            except NotFound:
                return None

        def published() -> list[tuple[str, str, str]]:
            return [
                (e.subject_id, e.details["state_version"], e.actor)
                for e in audit.organization_trail(workspace.organization_id)
                if e.type == "state.published"
            ]

        return Seams(
            DynamoStatePublication(),
            DynamoWorkspaceLocks(RunRepository(clock, stack.ids)),
            workspace.organization_id,
            workspace.id,
            create_run,
            lambda run: (writer.reserve(run, "tok-wait"), None)[1],
            add_attempt,
            lambda: workspace_store.get_workspace(workspace.id, reads=IdentityMap()),
            version,
            published,
        )
    directory, ledger, versions = (
        InMemoryWorkspaces(),
        InMemoryRunLedger(clock, _Ids()),
        InMemoryStateVersions(),
    )
    directory.workspaces["ws-1"] = Workspace(
        id="ws-1",
        organization_id=ORG,
        name="network",
        created_at=AT,
        fence=0,
        writer_run_id=None,
        lock_id=None,
        lock_run_id=None,
        queue_length=0,
    )
    publication = InMemoryStatePublication(directory, versions, ledger)

    def create_run_in_memory(run_id: str, status: RunStatus) -> Run:
        ledger.create(_run(run_id, directory.workspaces["ws-1"], status), actor="ada", input={})
        return ledger.get_run(run_id)

    def reserve(run: Run) -> None:
        directory.workspaces["ws-1"] = replace(
            directory.workspaces["ws-1"], writer_run_id=run.id, queue_length=1
        )

    def add_attempt_in_memory(run_id: str, state: AttemptState) -> None:
        ledger.add_part(RunPart(run_id, "attempt#apply", state, _attempt(), None, AT, AT))

    return Seams(
        publication,
        InMemoryWorkspaceLocks(directory, ledger),
        ORG,
        "ws-1",
        create_run_in_memory,
        reserve,
        add_attempt_in_memory,
        lambda: directory.workspaces["ws-1"],
        lambda sv_id: versions.versions.get(sv_id),
        lambda: [(e.subject_id, e.details["state_version"], e.actor) for e in publication.events],
    )


class _Ids:
    def __init__(self) -> None:
        self._next = 0

    def new(self, kind: object) -> str:
        self._next += 1
        return f"id-{self._next}"


def _run(run_id: str, workspace: Workspace, status: RunStatus) -> Run:
    return Run(
        id=run_id,
        organization_id=workspace.organization_id,
        workspace_id=workspace.id,
        kind=RunKind.PLAN_AND_APPLY,
        status=status,
        version=1,
        created_at=AT,
        updated_at=AT,
    )


def _attempt() -> dict[str, object]:
    return {"attempt_id": "att-1", "sandbox_id": "sbx-1", "lock_id": "lock-run", "fence": 1}


def _version(
    seams: Seams, sv_id: str, serial: int, status: str = FINALIZED, by: str = ADA.ref
) -> StateVersion:
    finalized = status == FINALIZED
    return StateVersion(
        id=sv_id,
        workspace_id=seams.workspace_id,
        organization_id=seams.organization_id,
        serial=serial,
        lineage="lin-1",
        md5="0" * 32,
        status=status,
        created_at=AT,
        created_by=by,
        predecessor_id=seams.workspace().current_state_version_id,
        sha256="1" * 64 if finalized else None,
        size=10 if finalized else None,
        artifact_id=f"art-{sv_id}" if finalized else None,
    )


# -- the workspace lock -----------------------------------------------------------------


def test_a_user_locks_with_the_next_fence_and_unlocks_leaving_it(seams: Seams) -> None:
    # When ada locks the workspace
    seams.user_lock()
    # Then it is hers, with the next fence
    locked = seams.workspace()
    assert (locked.lock_id, locked.lock_holder, locked.lock_holder_display) == (
        "lock-ada",
        "user:ada",
        "ada",
    )
    assert (locked.fence, locked.lock_run_id, locked.locked_at) == (1, None, AT)
    # And a second lock, even hers, is refused
    with pytest.raises(WorkspaceAlreadyLocked):
        seams.locks.acquire(
            seams.workspace_id, ADA, lock_id="lock-2", observed_fence=1, reason=None, now=AT
        )
    # When she unlocks it
    seams.locks.release(seams.workspace_id, "lock-ada", holder_ref=ADA.ref)
    # Then it is unlocked and its fence stays
    unlocked = seams.workspace()
    assert (unlocked.lock_id, unlocked.lock_holder, unlocked.fence) == (None, None, 1)
    # And unlocking again says it is not locked
    with pytest.raises(WorkspaceNotLocked):
        seams.locks.release(seams.workspace_id, "lock-ada", holder_ref=ADA.ref)


def test_a_lock_from_a_stale_fence_is_refused(seams: Seams) -> None:
    # Given a workspace locked and unlocked once (fence 1)
    seams.user_lock()
    seams.locks.release(seams.workspace_id, "lock-ada", holder_ref=ADA.ref)
    before = seams.workspace()
    # When a lock observed at fence 0 is taken
    with pytest.raises(ConcurrentChange):
        seams.locks.acquire(
            seams.workspace_id, ADA, lock_id="lock-2", observed_fence=0, reason=None, now=AT
        )
    # Then nothing changed
    assert seams.workspace() == before


def test_another_holder_cannot_unlock_but_a_force_unlock_can(seams: Seams) -> None:
    # Given ada's lock
    seams.user_lock()
    before = seams.workspace()
    # When bob unlocks it, or names another lock
    with pytest.raises(WorkspaceLocked) as bob:
        seams.locks.release(seams.workspace_id, "lock-ada", holder_ref="user:bob")
    with pytest.raises(WorkspaceLocked):
        seams.locks.release(seams.workspace_id, "lock-other", holder_ref=None)
    # Then each is refused, naming her, and nothing changed
    assert "locked by ada" in bob.value.message
    assert seams.workspace() == before
    # When it is force-unlocked
    seams.locks.release(seams.workspace_id, "lock-ada", holder_ref=None)
    # Then it is unlocked
    assert seams.workspace().lock_id is None


def test_a_run_s_lock_needs_its_reservation_and_is_never_force_unlocked(seams: Seams) -> None:
    # Given a run that does not hold the writer reservation
    run = seams.create_run("run-1", RunStatus.APPLYING)
    # When it locks, it is refused
    with pytest.raises(NotWriter):
        seams.locks.acquire(
            seams.workspace_id,
            LockHolder.for_run(run.id),
            lock_id="lock-run",
            observed_fence=0,
            reason="apply",
            now=AT,
        )
    # Given it holds the reservation
    seams.reserve(run)
    # Then a user's lock is refused, naming the run
    with pytest.raises(WorkspaceHeldByRun) as held:
        seams.user_lock()
    assert held.value.run_id == run.id
    # And the run locks for its apply
    seams.locks.acquire(
        seams.workspace_id,
        LockHolder.for_run(run.id),
        lock_id="lock-run",
        observed_fence=0,
        reason="apply",
        now=AT,
    )
    locked = seams.workspace()
    assert (locked.lock_run_id, locked.lock_holder, locked.lock_reason) == (
        run.id,
        "run:run-1",
        "apply",
    )
    # And neither force nor a user releases the run's lock
    with pytest.raises(WorkspaceLocked) as forced:
        seams.locks.release(seams.workspace_id, "lock-run", holder_ref=None)
    assert "Run run-1" in forced.value.message
    assert seams.workspace() == locked


def test_the_run_and_its_apply_attempt_are_read_together(seams: Seams) -> None:
    # Given a run without an attempt and one applying
    bare = seams.create_run("run-0", RunStatus.PLANNING)
    run, _ = seams.applying_run()
    # Then each reads with its apply attempt, or none
    assert seams.locks.apply_attempt(bare.id) == (bare, None)
    read, attempt = seams.locks.apply_attempt(run.id)
    assert read == seams.locks.run(run.id)
    assert attempt is not None
    assert attempt.state == AttemptState.STARTED
    assert attempt.body["attempt_id"] == "att-1"
    # And an unknown run is not found
    with pytest.raises(NotFound):
        seams.locks.apply_attempt("run-unknown")
    with pytest.raises(NotFound):
        seams.locks.run("run-unknown")


# -- publication ------------------------------------------------------------------------


def test_a_user_publishes_under_her_lock(seams: Seams) -> None:
    # Given ada's lock
    authority = seams.user_lock()
    version = _version(seams, "sv-1", 1)
    # When she publishes a version
    seams.publication.publish(version, authority, event_id="ev-1", guard=None)
    # Then it is the workspace's current state, recorded with its audit event
    current = seams.workspace()
    assert (current.current_state_version_id, current.current_serial) == ("sv-1", 1)
    assert current.current_lineage == "lin-1"
    assert seams.version("sv-1") == version
    # And the workspace carries its publication facts, exactly as reading it gives them
    assert current.current_publication == publication_of(version)
    assert seams.published() == [(seams.workspace_id, "sv-1", "user:ada")]
    # And the next one names it as its predecessor
    following = replace(_version(seams, "sv-2", 2), predecessor_id="sv-1")
    seams.publication.publish(
        following, replace(authority, predecessor_id="sv-1"), event_id="ev-2", guard=None
    )
    assert seams.workspace().current_state_version_id == "sv-2"
    stored = seams.version("sv-2")
    assert stored is not None
    assert seams.workspace().current_publication == publication_of(stored)


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda a: replace(a, lock_id="lock-other"), WorkspaceLocked),
        (lambda a: replace(a, holder_ref="user:bob"), Conflict),
        (lambda a: replace(a, predecessor_id="sv-gone"), Conflict),
    ],
)
def test_a_publication_not_under_the_exact_lock_writes_nothing(
    seams: Seams, change: Callable[[Authority], Authority], refusal: type[Exception]
) -> None:
    # Given ada's lock
    authority = seams.user_lock()
    before = seams.written("sv-1")
    # When a version is published naming another lock, holder or predecessor
    with pytest.raises(refusal):
        seams.publication.publish(
            _version(seams, "sv-1", 1), change(authority), event_id="ev-1", guard=None
        )
    # Then nothing was written
    assert seams.written("sv-1") == before


def test_a_user_s_publication_is_refused_once_a_run_holds_the_workspace(seams: Seams) -> None:
    # Given ada's lock, then a run holding the writer reservation
    authority = seams.user_lock()
    run = seams.create_run("run-1", RunStatus.PLANNING)
    seams.reserve(run)
    before = seams.written("sv-1")
    # When she publishes
    with pytest.raises(WorkspaceHeldByRun) as held:
        seams.publication.publish(_version(seams, "sv-1", 1), authority, event_id="ev", guard=None)
    # Then the run is named and nothing was written
    assert held.value.run_id == run.id
    assert seams.written("sv-1") == before


def test_a_version_id_is_published_once(seams: Seams) -> None:
    authority = seams.user_lock()
    seams.publication.publish(_version(seams, "sv-1", 1), authority, event_id="ev-1", guard=None)
    before = seams.written("sv-1")
    with pytest.raises(ConcurrentChange):
        seams.publication.publish(
            _version(seams, "sv-1", 2),
            replace(authority, predecessor_id="sv-1"),
            event_id="ev-2",
            guard=None,
        )
    assert seams.written("sv-1") == before


def test_a_run_publishes_while_it_applies_under_its_lock_and_fence(seams: Seams) -> None:
    # Given a run applying under its apply lock
    run, authority = seams.applying_run()
    # When it publishes with its guard, stamped with its attempt
    version = replace(
        _version(seams, "sv-1", 1, by="runner"),
        provenance={
            "run_id": run.id,
            "attempt_id": "att-1",
            "sandbox_id": "sbx-1",
            "fence": authority.fence,
        },
        lock_id=authority.lock_id,
    )
    seams.publication.publish(version, authority, event_id="ev-1", guard=ApplyGuard(run.id))
    # Then the version is current
    assert seams.workspace().current_state_version_id == "sv-1"
    assert seams.published() == [(seams.workspace_id, "sv-1", "runner")]
    # And the workspace's facts of it are its stamp, exactly as reading it gives them
    stored = seams.version("sv-1")
    assert stored is not None
    facts = seams.workspace().current_publication
    assert facts == publication_of(stored)
    assert facts is not None
    assert (facts.run_id, facts.attempt_id, facts.sandbox_id, facts.lock_id, facts.fence) == (
        run.id,
        "att-1",
        "sbx-1",
        "lock-run",
        authority.fence,
    )


def test_a_run_s_publication_under_a_stale_fence_writes_nothing(seams: Seams) -> None:
    run, authority = seams.applying_run()
    before = seams.written("sv-1")
    with pytest.raises(WorkspaceLocked):
        seams.publication.publish(
            _version(seams, "sv-1", 1),
            replace(authority, fence=(authority.fence or 0) - 1),
            event_id="ev-1",
            guard=ApplyGuard(run.id),
        )
    assert seams.written("sv-1") == before


@pytest.mark.parametrize(
    ("status", "attempt", "refusal"),
    [
        (RunStatus.APPLYING, AttemptState.FAILED, RunnerAuthorityRefused),
        (RunStatus.APPLYING, AttemptState.SUCCEEDED, RunnerAuthorityRefused),
        (RunStatus.CANCELED, AttemptState.STARTED, RunNotApplying),
        # Both stale: the ended attempt says more.
        (RunStatus.CANCELED, AttemptState.FAILED, RunnerAuthorityRefused),
    ],
)
def test_a_guarded_publication_commits_only_while_the_run_applies_with_its_attempt_open(
    seams: Seams, status: RunStatus, attempt: AttemptState, refusal: type[RunplaneError]
) -> None:
    # Given a run under its apply lock, in ``status`` with its apply attempt in ``attempt``
    run, authority = seams.applying_run(attempt, status)
    before = seams.written("sv-1")
    # When it publishes with its guard, under a lock that still holds
    with pytest.raises(refusal) as refused:
        seams.publication.publish(
            _version(seams, "sv-1", 1), authority, event_id="ev-1", guard=ApplyGuard(run.id)
        )
    # Then it is refused, naming the run, and nothing was written
    assert f"run {run.id}" in refused.value.message
    assert seams.written("sv-1") == before


# -- uploads ----------------------------------------------------------------------------


def test_an_upload_finalizes_once_with_its_token(seams: Seams) -> None:
    # Given a version pending its upload, under ada's lock
    authority = seams.user_lock()
    pending = _version(seams, "sv-1", 1, status=PENDING)
    later = AT + timedelta(minutes=5)
    seams.publication.open_upload(
        pending, state_token_hash="h-state", json_token_hash="h-json", valid_until=later
    )
    assert seams.version("sv-1") == pending
    assert seams.publication.upload_token("h-state") == UploadToken("sv-1", "state", later, False)
    assert seams.publication.upload_token("h-json") == UploadToken("sv-1", "json", later, False)
    assert seams.publication.upload_token("h-unknown") is None
    # When its bytes arrive
    seams.publication.finalize(
        pending,
        authority,
        token_hash="h-state",
        artifact_id="art-1",
        sha256="2" * 64,
        size=12,
        event_id="ev-1",
        now=AT,
        guard=None,
    )
    # Then it is finalized and current, and its token used
    finalized = seams.version("sv-1")
    assert finalized is not None
    assert (finalized.status, finalized.artifact_id, finalized.sha256, finalized.size) == (
        FINALIZED,
        "art-1",
        "2" * 64,
        12,
    )
    assert seams.workspace().current_state_version_id == "sv-1"
    assert seams.workspace().current_publication == publication_of(finalized)
    assert seams.publication.upload_token("h-state") == UploadToken("sv-1", "state", later, True)
    # And the token cannot be used again
    before = seams.written("sv-1", tokens=("h-state",))
    with pytest.raises(UploadUrlUsed):
        seams.publication.finalize(
            pending,
            authority,
            token_hash="h-state",
            artifact_id="art-2",
            sha256="3" * 64,
            size=12,
            event_id="ev-2",
            now=AT,
            guard=None,
        )
    assert seams.written("sv-1", tokens=("h-state",)) == before


@pytest.mark.parametrize(
    ("token", "now", "refusal"),
    [
        ("h-unknown", AT, NotFound),
        ("h-state", AT + timedelta(minutes=5), UploadUrlExpired),
    ],
)
def test_an_unknown_or_expired_token_finalizes_nothing(
    seams: Seams, token: str, now: datetime, refusal: type[Exception]
) -> None:
    authority = seams.user_lock()
    pending = _version(seams, "sv-1", 1, status=PENDING)
    seams.publication.open_upload(
        pending,
        state_token_hash="h-state",
        json_token_hash="h-json",
        valid_until=AT + timedelta(minutes=5),
    )
    before = seams.written("sv-1", tokens=("h-state",))
    with pytest.raises(refusal):
        seams.publication.finalize(
            pending,
            authority,
            token_hash=token,
            artifact_id="art-1",
            sha256="2" * 64,
            size=12,
            event_id="ev-1",
            now=now,
            guard=None,
        )
    assert seams.written("sv-1", tokens=("h-state",)) == before


def test_an_upload_whose_run_stopped_applying_finalizes_nothing(seams: Seams) -> None:
    # Given a run's pending upload, then its attempt ended
    run, authority = seams.applying_run(AttemptState.FAILED)
    pending = _version(seams, "sv-1", 1, status=PENDING, by="runner")
    seams.publication.open_upload(
        pending,
        state_token_hash="h-state",
        json_token_hash="h-json",
        valid_until=AT + timedelta(minutes=5),
    )
    before = seams.written("sv-1", tokens=("h-state",))
    # When its bytes arrive, it is refused before its token is looked at
    with pytest.raises(RunnerAuthorityRefused):
        seams.publication.finalize(
            pending,
            authority,
            token_hash="h-state",
            artifact_id="art-1",
            sha256="2" * 64,
            size=12,
            event_id="ev-1",
            now=AT,
            guard=ApplyGuard(run.id),
        )
    # Then nothing was written, the token still unused
    assert seams.written("sv-1", tokens=("h-state",)) == before


def test_a_json_state_is_attached_once_and_claims_a_pending_version(seams: Seams) -> None:
    # Given a version pending its upload
    pending = _version(seams, "sv-1", 1, status=PENDING)
    seams.publication.open_upload(
        pending,
        state_token_hash="h-state",
        json_token_hash="h-json",
        valid_until=AT + timedelta(minutes=5),
    )
    # When its JSON state arrives
    seams.publication.attach_json("sv-1", token_hash="h-json", artifact_id="art-json", now=AT)
    # Then the version names it and is claimed, still pending
    attached = seams.version("sv-1")
    assert attached is not None
    assert (attached.json_artifact_id, attached.claimed_at, attached.status) == (
        "art-json",
        AT,
        PENDING,
    )
    # And the JSON token is used
    before = seams.written("sv-1", tokens=("h-json",))
    with pytest.raises(UploadUrlUsed):
        seams.publication.attach_json(
            "sv-1", token_hash="h-json", artifact_id="art-2", now=AT + timedelta(seconds=1)
        )
    assert seams.written("sv-1", tokens=("h-json",)) == before


def test_the_publishing_process_knows_which_artifact_holds_the_version_s_state(
    stack: Stack, workspace: Workspace
) -> None:
    # Given ada's lock on the workspace
    locks = DynamoWorkspaceLocks(RunRepository(FakeClock(AT), stack.ids))
    locks.acquire(workspace.id, ADA, lock_id="lock-ada", observed_fence=0, reason=None, now=AT)
    authority = Authority(workspace.id, ADA.ref, "lock-ada", None)
    version = replace(
        StateVersion(
            id="sv-noted",
            workspace_id=workspace.id,
            organization_id=workspace.organization_id,
            serial=1,
            lineage="lin-1",
            md5="0" * 32,
            status=FINALIZED,
            created_at=AT,
            created_by=ADA.ref,
        ),
        artifact_id="art-noted",
        sha256="1" * 64,
        size=10,
    )
    # When she publishes a version
    DynamoStatePublication().publish(version, authority, event_id="ev-noted", guard=None)
    # Then this process names its artifact to the next engine start's read ahead, with no
    # read of the version (the apply's result checks it from the workspace's facts)
    assert state_versions.known_state_artifact("sv-noted") == "art-noted"
