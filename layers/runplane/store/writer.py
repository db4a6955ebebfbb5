"""The workspace writer authority on the table: the FIFO reservation, the apply lock
and the fence (``services.writer.WriterAuthority``; the rules are its docstring's).

Reads here only build conditional writes: when a condition is refused because the
queue moved, the write is rebuilt from a fresh read, a bounded number of times. No
decision is ever taken on a read alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from runplane.domain.clock import Clock
from runplane.domain.entities import ApplyLock, Handoff, Reservation, Run, Waiter, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    NotWriter,
    ReservationNotNeeded,
    TooMuchContention,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.store import apply_lock, workspaces, writer_queue
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.transaction import Transaction

MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class Release:
    """Writes that release a run's hold on the workspace, and who gets it next."""

    writes: Transaction
    handoff: Handoff | None
    # The workspace as the release read it (its move's event carries its subscribers).
    workspace: Workspace | None = None


class DynamoWriterAuthority:
    """The workspace writer authority on the table (``services.writer.WriterAuthority``).
    Its reads are served from the identity map they are given, by default the request's
    (``scope``)."""

    def __init__(self, clock: Clock, ids: IdGenerator, scope: RequestScope = REQUEST) -> None:
        self._clock = clock
        self._ids = ids
        self._scope = scope

    def _workspace(self, workspace_id: str) -> Workspace:
        return workspaces.get_workspace(workspace_id, reads=self._scope.reads())

    # -- reservation ----------------------------------------------------------------

    def reserve(self, run: Run, token: str) -> Reservation:
        """Take the reservation for ``run`` or queue it FIFO; safe to repeat.

        A repeat by the holder reports it held; a repeat by a waiter keeps its
        place and stores the new token (a retried wait carries a new one).
        """
        if not run.kind.needs_writer_reservation:
            raise ReservationNotNeeded(
                f"run {run.id} is {run.kind}: only plan_and_apply runs take the writer reservation"
            )
        for _ in range(MAX_ATTEMPTS):
            workspace, seq = writer_queue.writer_view(run.workspace_id, reads=self._scope.reads())
            if workspace.writer_run_id == run.id:
                return Reservation(workspace.id, run.id, held=True)
            # Never a walk of the queue: a run finds its own place in one read.
            mine = writer_queue.waiter_of(workspace.id, run.id) if workspace.queue_length else None
            now = self._clock.now()
            if mine is not None:
                writes = writer_queue.replace_waiter_token(mine, token)
                position = writer_queue.position_of(mine)
            elif workspace.writer_run_id is None and workspace.queue_length == 0:
                writes = writer_queue.take_free_reservation(workspace.id, run.id, now)
                position = None
            else:
                writes = writer_queue.enqueue_waiter(workspace.id, run.id, token, seq, now)
                position = workspace.queue_length + 1
            try:
                writes.commit()
            except ConcurrentChange:
                continue
            return Reservation(workspace.id, run.id, held=position is None, position=position)
        raise TooMuchContention(f"workspace {run.workspace_id}: the writer queue kept moving")

    def waiter_token(self, run: Run) -> str | None:
        """The token of ``run``'s wait in its workspace's queue, if it is waiting."""
        if not run.kind.needs_writer_reservation:
            return None
        mine = writer_queue.waiter_of(run.workspace_id, run.id)
        return mine.token if mine else None

    def release_writes(
        self, workspace_id: str, run_id: str, lock: ApplyLock | None = None
    ) -> Release:
        """Writes that end ``run_id``'s hold or its place in the queue, to be
        committed in the caller's transaction.

        A holder's apply lock is released too: exactly ``lock`` when the caller
        has one (refused with ``StaleFence`` if it is no longer current), else
        whatever lock the run holds now. Raises ``NotWriter`` if the run neither
        holds nor waits for the reservation.
        """
        release = self.release_writes_if_involved(workspace_id, run_id, lock)
        if release is None:
            holder = self._workspace(workspace_id).writer_run_id
            raise NotWriter(workspace_id, run_id, holder)
        return release

    def release_writes_if_involved(
        self,
        workspace_id: str,
        run_id: str,
        lock: ApplyLock | None = None,
        workspace: Workspace | None = None,
        *,
        reads: IdentityMap | None = None,
    ) -> Release | None:
        """Like ``release_writes``, but None when the run neither holds nor waits
        (``workspace``: as the caller just read it; otherwise it is read, served from
        ``reads``, by default the request's identity map)."""
        if workspace is None or workspace.id != workspace_id:
            workspace = workspaces.get_workspace(
                workspace_id, reads=self._scope.reads() if reads is None else reads
            )
        if workspace.writer_run_id != run_id:
            mine = writer_queue.waiter_of(workspace_id, run_id) if workspace.queue_length else None
            return Release(writer_queue.remove_waiter(mine), None, workspace) if mine else None
        if lock is None and workspace.lock_run_id == run_id and workspace.lock_id is not None:
            lock = ApplyLock(workspace_id, workspace.lock_id, workspace.fence, run_id)
        oldest: Waiter | None = (
            writer_queue.oldest_waiter(workspace_id) if workspace.queue_length else None
        )
        writes = writer_queue.release_reservation(
            workspace_id, run_id, oldest, self._clock.now(), lock
        )
        handoff = Handoff(workspace_id, oldest.run_id, oldest.token) if oldest else None
        return Release(writes, handoff, workspace)

    def release(
        self, workspace_id: str, run_id: str, lock: ApplyLock | None = None
    ) -> Handoff | None:
        """Release on its own (outside a run transition); returns who got it next."""
        for _ in range(MAX_ATTEMPTS):
            release = self.release_writes(workspace_id, run_id, lock)
            try:
                release.writes.commit()
            except ConcurrentChange:
                continue
            return release.handoff
        raise TooMuchContention(f"workspace {workspace_id}: the writer queue kept moving")

    # -- apply lock and fence -----------------------------------------------------------

    def acquire_apply_lock(self, run: Run) -> ApplyLock:
        """Lock the workspace for ``run``'s apply, advancing the fence. Safe to repeat."""
        for _ in range(MAX_ATTEMPTS):
            workspace = self._workspace(run.workspace_id)
            if workspace.lock_run_id == run.id and workspace.lock_id is not None:
                return ApplyLock(workspace.id, workspace.lock_id, workspace.fence, run.id)
            lock = ApplyLock(workspace.id, self._ids.new(IdKind.LOCK), workspace.fence + 1, run.id)
            try:
                apply_lock.acquire_apply_lock(
                    workspace.id, run.id, lock.lock_id, workspace.fence, self._clock.now()
                ).commit()
            except ConcurrentChange:
                continue
            return lock
        raise TooMuchContention(f"workspace {run.workspace_id}: the fence kept moving")

    def apply_lock_writes(self, run: Run) -> tuple[ApplyLock, Transaction]:
        """The apply lock ``run`` will hold and the write taking it (empty if it holds
        it already), to commit with other writes: refused with ``ConcurrentChange``
        if the fence moved meanwhile (see ``fence_moved``)."""
        workspace = self._workspace(run.workspace_id)
        if workspace.lock_run_id == run.id and workspace.lock_id is not None:
            return ApplyLock(
                workspace.id, workspace.lock_id, workspace.fence, run.id
            ), Transaction()
        lock = ApplyLock(workspace.id, self._ids.new(IdKind.LOCK), workspace.fence + 1, run.id)
        write = apply_lock.acquire_apply_lock(
            workspace.id, run.id, lock.lock_id, workspace.fence, self._clock.now()
        )
        return lock, write

    def fence_moved(self, lock: ApplyLock) -> bool:
        """Whether the workspace's fence is no longer the one ``lock`` was taken after."""
        return self._workspace(lock.workspace_id).fence != lock.fence - 1

    def held_apply_lock(self, run: Run) -> ApplyLock | None:
        """The apply lock ``run`` holds on its workspace, if any."""
        workspace = self._workspace(run.workspace_id)
        if workspace.lock_run_id != run.id or workspace.lock_id is None:
            return None
        return ApplyLock(workspace.id, workspace.lock_id, workspace.fence, run.id)

    @staticmethod
    def require_authority(lock: ApplyLock) -> Transaction:
        """Add to any write that needs apply authority; refused with ``StaleFence``."""
        return apply_lock.require_authority(lock)

    @staticmethod
    def release_apply_lock(lock: ApplyLock) -> Transaction:
        return apply_lock.release_apply_lock(lock)
