"""State versions and upload tokens on the table, and the one conditional write that moves a
workspace's state. The entities are ``domain.state``'s."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from pynamodb.expressions.condition import Condition

from runplane.domain.errors import (
    Conflict,
    NotFound,
    UploadUrlExpired,
    UploadUrlUsed,
    WorkspaceHeldByRun,
    WorkspaceLocked,
)
from runplane.domain.publications import publication_of
from runplane.domain.state import FINALIZED, PENDING, Authority, StateVersion, UploadToken
from runplane.store import audit
from runplane.store.models import (
    StateVersionItem,
    UploadTokenItem,
    WorkspaceItem,
    org_event_key,
    state_version_key,
    upload_token_key,
    workspace_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, Transaction
from runplane.store.workspaces import is_exactly, publication_record

RETENTION = timedelta(days=1)


def versions_partition(workspace_id: str) -> str:
    return f"WS#{workspace_id}#SV"


def _item(version: StateVersion) -> StateVersionItem:
    """The item of a version as it is first written (the inverse of ``to_version``; its
    JSON state and claim are added later, by ``attach_json``)."""
    return StateVersionItem(
        *state_version_key(version.id),
        gsi1pk=versions_partition(version.workspace_id),
        # 19 digits hold any serial up to 2^63-1, so the index sorts by serial.
        gsi1sk=f"{version.serial:019d}#{version.id}",
        sv_id=version.id,
        workspace_id=version.workspace_id,
        org_id=version.organization_id,
        serial=version.serial,
        lineage=version.lineage,
        md5=version.md5,
        sha256=version.sha256,
        size=version.size,
        artifact_id=version.artifact_id,
        status=version.status,
        forced=version.forced,
        created_at=version.created_at,
        finalized_at=version.created_at if version.status == FINALIZED else None,
        created_by=version.created_by,
        predecessor_id=version.predecessor_id,
        provenance=dict(version.provenance or {}, lock_id=version.lock_id),
        resources=version.resources,
    )


# A finalized version's state artifact never changes. Which one it is, as this process
# saw it last, lets a read ahead name that artifact's record with the version's: a hint
# only (what a read is served is what that key holds).
_STATE_ARTIFACTS: dict[str, str] = {}
_STATE_ARTIFACTS_LOCK = threading.Lock()
_REMEMBERED_ARTIFACTS = 10_000


def known_state_artifact(sv_id: str) -> str | None:
    """The artifact this process saw holding finalized version ``sv_id``'s state."""
    with _STATE_ARTIFACTS_LOCK:
        return _STATE_ARTIFACTS.get(sv_id)


def _note_artifact(sv_id: str, artifact_id: str | None, status: str | None) -> None:
    if artifact_id is None or status != FINALIZED:
        return
    with _STATE_ARTIFACTS_LOCK:
        if sv_id in _STATE_ARTIFACTS:
            return
        if len(_STATE_ARTIFACTS) >= _REMEMBERED_ARTIFACTS:
            _STATE_ARTIFACTS.pop(next(iter(_STATE_ARTIFACTS)))
        _STATE_ARTIFACTS[sv_id] = artifact_id


def to_version(item: StateVersionItem) -> StateVersion:
    """The version an item holds (the inverse of ``_item``)."""
    _note_artifact(item.sv_id, item.artifact_id, item.status)
    provenance = dict(item.provenance or {})
    lock_id = provenance.pop("lock_id", None)
    return StateVersion(
        id=item.sv_id,
        workspace_id=item.workspace_id,
        organization_id=item.org_id,
        serial=int(item.serial),
        lineage=item.lineage,
        md5=item.md5,
        status=item.status,
        created_at=item.created_at,
        created_by=item.created_by,
        predecessor_id=item.predecessor_id,
        sha256=item.sha256,
        size=None if item.size is None else int(item.size),
        artifact_id=item.artifact_id,
        json_artifact_id=item.json_artifact_id,
        forced=bool(item.forced),
        provenance=provenance or None,
        lock_id=lock_id,
        claimed_at=item.claimed_at,
        resources=None if item.resources is None else int(item.resources),
    )


def note_state_artifact(raw: dict[str, Any]) -> None:
    """Remember which artifact holds a raw state version item's state (as a batch read
    returns it), for ``known_state_artifact``."""
    item = StateVersionItem.from_raw_data(raw)
    _note_artifact(item.sv_id, item.artifact_id, item.status)


def get(sv_id: str, *, reads: IdentityMap) -> StateVersion:
    """The version (consistent; ``NotFound`` if absent), served from ``reads`` if it was
    read ahead there."""
    prefetched = reads.take(state_version_key(sv_id))
    if prefetched is not None:
        return to_version(StateVersionItem.from_raw_data(prefetched))
    try:
        return to_version(StateVersionItem.get(*state_version_key(sv_id), consistent_read=True))
    except StateVersionItem.DoesNotExist:
        raise NotFound("state version", sv_id) from None


def pending_of_run(workspace_id: str, run_id: str) -> list[StateVersion]:
    """Versions a run's sessions declared whose bytes never arrived."""
    items = StateVersionItem.gsi1.query(versions_partition(workspace_id))
    return [
        version
        for version in map(to_version, items)
        if version.status == PENDING and (version.provenance or {}).get("run_id") == run_id
    ]


def discard_pending(version: StateVersion) -> Transaction:
    """Delete a pending version exactly as it was seen: still pending, and claimed at
    the same instant (or not at all). Its upload URLs then lead nowhere."""
    condition = StateVersionItem.status == PENDING
    if version.claimed_at is None:
        condition &= StateVersionItem.claimed_at.does_not_exist()
    else:
        condition &= StateVersionItem.claimed_at == version.claimed_at
    return Transaction().delete(
        StateVersionItem(*state_version_key(version.id)),
        condition=condition,
        on_refused=lambda current: Conflict(
            f"state version {version.id} changed while recovery was discarding it"
        ),
    )


def list_for_workspace(workspace_id: str) -> list[StateVersion]:
    """Finalized versions, oldest first (sorted here too: older items were keyed with
    12-digit serials, which sort apart from 19-digit ones)."""
    versions = [
        to_version(item)
        for item in StateVersionItem.gsi1.query(versions_partition(workspace_id))
        if item.status == FINALIZED
    ]
    return sorted(versions, key=lambda v: (v.serial, v.created_at))


def _move_pointer(version: StateVersion, authority: Authority) -> Transaction:
    """Make ``version`` current, iff the workspace is exactly as authorized. ``version``
    is exactly as its item stands once the transaction commits; the workspace takes its
    publication facts with the pointer (a version's never change after that), so the
    apply's result checks it without reading it."""
    ws = WorkspaceItem(*workspace_key(authority.workspace_id))
    condition: Condition = (
        (WorkspaceItem.lock_id == authority.lock_id)
        & (WorkspaceItem.lock_holder == authority.holder_ref)
        & is_exactly(WorkspaceItem.current_sv_id, authority.predecessor_id)
        & is_exactly(WorkspaceItem.writer_run_id, authority.run_id)
    )
    if authority.fence is not None:
        condition &= WorkspaceItem.fence == authority.fence

    def refused(current: Item | None) -> Exception:
        current = current or {}
        writer = current.get("writer_run_id")
        if writer and writer != authority.run_id:
            return WorkspaceHeldByRun(authority.workspace_id, str(writer))
        if current.get("lock_id") != authority.lock_id or (
            authority.fence is not None and current.get("fence") != authority.fence
        ):
            return WorkspaceLocked(
                f"workspace {authority.workspace_id} is no longer locked by this writer; "
                "it only accepts state uploads from the lock holder"
            )
        return Conflict(
            f"the state of workspace {authority.workspace_id} changed meanwhile "
            f"(current version {current.get('current_sv_id')}); pull it and retry"
        )

    return Transaction().update(
        ws,
        [
            WorkspaceItem.current_sv_id.set(version.id),
            WorkspaceItem.current_serial.set(version.serial),
            WorkspaceItem.current_lineage.set(version.lineage),
            WorkspaceItem.current_publication.set(publication_record(publication_of(version))),
        ],
        condition=condition,
        on_refused=refused,
    )


def _event(version: StateVersion, event_id: str, now: datetime, type: str) -> Transaction:
    return Transaction().put_new(
        audit.audit_item(
            key=org_event_key(version.organization_id, f"{now.isoformat()}#{event_id}"),
            event_id=event_id,
            org_id=version.organization_id,
            subject_id=version.workspace_id,
            type=type,
            actor=version.created_by,
            at=now,
            details={
                "state_version": version.id,
                "serial": str(version.serial),
                "predecessor": version.predecessor_id or "",
                "forced": str(version.forced).lower(),
            },
        )
    )


def publish(version: StateVersion, authority: Authority, event_id: str) -> Transaction:
    """A finalized version and the pointer move, with its audit event: one transaction."""
    # Noted as ``finalize`` notes it: the next engine start this process serves names the
    # artifact in its read ahead (the apply's result, which checks the version from the
    # workspace's facts, no longer reads it).
    _note_artifact(version.id, version.artifact_id, version.status)
    return (
        Transaction()
        .put_new(_item(version))
        .extend(
            [
                _move_pointer(version, authority),
                _event(version, event_id, version.created_at, "state.published"),
            ]
        )
    )


def put_finalized(version: StateVersion) -> Transaction:
    """A finalized version whose pointer move the caller writes itself (recovery)."""
    return Transaction().put_new(_item(version))


def put_pending(version: StateVersion) -> Transaction:
    return Transaction().put_new(_item(version))


def put_upload_token(
    token_hash: str, sv_id: str, purpose: str, valid_until: datetime
) -> Transaction:
    return Transaction().put_new(
        UploadTokenItem(
            *upload_token_key(token_hash),
            sv_id=sv_id,
            purpose=purpose,
            valid_until=valid_until,
            expires_at=valid_until + RETENTION,
        )
    )


def get_upload_token(token_hash: str) -> UploadToken | None:
    try:
        item = UploadTokenItem.get(*upload_token_key(token_hash), consistent_read=True)
    except UploadTokenItem.DoesNotExist:
        return None
    return _upload_token(item)


def _upload_token(item: UploadTokenItem) -> UploadToken:
    """The token an item holds (``put_upload_token`` writes it, ``use_upload_token``
    marks it used)."""
    return UploadToken(item.sv_id, item.purpose, item.valid_until, item.used_at is not None)


def use_upload_token(token_hash: str, now: datetime) -> Transaction:
    def refused(current: Item | None) -> Exception:
        if current is None:
            return NotFound("upload", "this URL")
        if current.get("used_at"):
            return UploadUrlUsed()
        return UploadUrlExpired()

    return Transaction().update(
        UploadTokenItem(*upload_token_key(token_hash)),
        [UploadTokenItem.used_at.set(now)],
        condition=UploadTokenItem.used_at.does_not_exist() & (UploadTokenItem.valid_until > now),
        on_refused=refused,
    )


def finalize(
    version: StateVersion,
    authority: Authority,
    *,
    artifact_id: str,
    sha256: str,
    size: int,
    event_id: str,
    now: datetime,
) -> Transaction:
    _note_artifact(version.id, artifact_id, FINALIZED)
    finalized = replace(
        version,
        status=FINALIZED,
        artifact_id=artifact_id,
        sha256=sha256,
        size=size,
        predecessor_id=authority.predecessor_id,
    )
    return (
        Transaction()
        .update(
            StateVersionItem(*state_version_key(version.id)),
            [
                StateVersionItem.status.set(FINALIZED),
                StateVersionItem.artifact_id.set(artifact_id),
                StateVersionItem.sha256.set(sha256),
                StateVersionItem.size.set(size),
                StateVersionItem.finalized_at.set(now),
                StateVersionItem.predecessor_id.set(authority.predecessor_id)
                if authority.predecessor_id
                else StateVersionItem.predecessor_id.remove(),
                *(
                    []
                    if version.resources is None
                    else [StateVersionItem.resources.set(version.resources)]
                ),
            ],
            condition=StateVersionItem.status == PENDING,
            on_refused=lambda current: Conflict(f"state version {version.id} is not pending"),
        )
        .extend(
            [
                _move_pointer(finalized, authority),
                _event(finalized, event_id, now, "state.published"),
            ]
        )
    )


def attach_json(sv_id: str, artifact_id: str, now: datetime) -> Transaction:
    return Transaction().update(
        StateVersionItem(*state_version_key(sv_id)),
        [
            StateVersionItem.json_artifact_id.set(artifact_id),
            # A pending version's JSON is a claim on it: recovery will not drop it silently.
            StateVersionItem.claimed_at.set(StateVersionItem.claimed_at | now),
        ],
        condition=StateVersionItem.json_artifact_id.does_not_exist(),
        on_refused=lambda current: Conflict(f"state version {sv_id} already has its JSON state"),
    )
