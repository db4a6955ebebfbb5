"""The repository seams of a workspace's state: publishing state versions, and the
workspace lock a publication is made under.

Like the seams in ``repositories/__init__.py``, each names domain types only; the
DynamoDB implementations are in ``store/`` (``store.state_publication``,
``store.apply_lock``) and in-memory fakes that keep the same promises in
``tests/fakes_state.py``, held to the same cases by
tests/integration/test_state_publication_contract.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from runplane.domain.entities import LockHolder, Run
from runplane.domain.parts import RunPart
from runplane.domain.state import ApplyGuard, Authority, StateVersion, UploadToken


class StatePublication(Protocol):
    """The writes that publish a workspace's state, each one transaction.

    The workspace's state pointer moves only if the workspace is exactly as ``authority``
    says: locked by its lock ID and holder (and fence, when it names one), its current
    version the predecessor named, its writer reservation held by the authority's run
    (or by none, for a user). Refused, a run holding the reservation raises
    ``WorkspaceHeldByRun``, another lock or fence ``WorkspaceLocked``, a current version
    moved meanwhile ``Conflict``. With ``guard``, the write also commits only while the
    guarded run is applying and its apply attempt open (``domain.state.ApplyGuard``),
    checked before anything else. Every publication records the organization audit
    event ``state.published`` (``event_id``). A refused write writes nothing.

    - ``upload_token`` is the token stored under ``token_hash``, or None.
    - ``open_upload`` writes a pending version and the single-use tokens of its state
      and JSON uploads (``ConcurrentChange`` if any exists already).
    - ``publish`` writes a finalized version and moves the pointer to it
      (``ConcurrentChange`` for a version ID taken).
    - ``finalize`` uses the state upload's token (``NotFound`` for an unknown one,
      ``UploadUrlUsed`` for a used one, ``UploadUrlExpired`` past ``valid_until``, all
      at ``now``), finalizes the pending version with its artifact (``Conflict`` if it
      is not pending any more; its predecessor becomes the authority's) and moves the
      pointer to it, all checked in that order after the guard.
    - ``publish_write`` and ``finalize_write`` are those writes uncommitted: for an
      artifact's registration to commit with (``Artifacts.put``'s ``together``).
    - ``attach_json`` uses the JSON upload's token (refused as for ``finalize``) and
      names the version's JSON artifact (``Conflict`` if it has one); a pending version
      is claimed at ``now`` by it, unless it was claimed before.
    """

    def upload_token(self, token_hash: str) -> UploadToken | None: ...

    def open_upload(
        self,
        version: StateVersion,
        *,
        state_token_hash: str,
        json_token_hash: str,
        valid_until: datetime,
    ) -> None: ...

    def publish(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        event_id: str,
        guard: ApplyGuard | None,
    ) -> None: ...

    def finalize(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        token_hash: str,
        artifact_id: str,
        sha256: str,
        size: int,
        event_id: str,
        now: datetime,
        guard: ApplyGuard | None,
    ) -> None: ...

    def publish_write(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        event_id: str,
        guard: ApplyGuard | None,
    ) -> object: ...

    def finalize_write(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        token_hash: str,
        artifact_id: str,
        sha256: str,
        size: int,
        event_id: str,
        now: datetime,
        guard: ApplyGuard | None,
    ) -> object: ...

    def attach_json(
        self, sv_id: str, *, token_hash: str, artifact_id: str, now: datetime
    ) -> None: ...


class WorkspaceLocks(Protocol):
    """The workspace lock (the engine's state lock) and the runs that hold a workspace.

    - ``acquire`` locks the workspace for ``holder`` with fence ``observed_fence + 1``,
      only while it is unlocked at ``observed_fence`` and its writer reservation is held
      by the holder's run (a run's lock) or by none (anyone else's). Refused: the
      reservation held by another run raises ``NotWriter`` for a run's lock and
      ``WorkspaceHeldByRun`` for anyone else's, a lock held ``WorkspaceAlreadyLocked``,
      a fence moved ``ConcurrentChange``.
    - ``release`` unlocks exactly ``lock_id``: as its holder ``holder_ref``, or by force
      (``holder_ref`` None), which never releases a run's lock. The fence stays. Refused:
      an unlocked workspace raises ``WorkspaceNotLocked``, anything else
      ``WorkspaceLocked`` (naming the run or holder that has it).
    - ``run`` is the run by ID (``NotFound`` for an unknown one).
    - ``apply_attempt`` is the run and its apply attempt (None if it has none), in one
      consistent read: what a runner session's apply authority is checked against.
    A refused write writes nothing.
    """

    def acquire(
        self,
        workspace_id: str,
        holder: LockHolder,
        *,
        lock_id: str,
        observed_fence: int,
        reason: str | None,
        now: datetime,
    ) -> None: ...

    def release(self, workspace_id: str, lock_id: str, *, holder_ref: str | None) -> None: ...

    def run(self, run_id: str) -> Run: ...

    def apply_attempt(self, run_id: str) -> tuple[Run, RunPart | None]: ...
