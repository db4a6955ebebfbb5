"""Operator recovery: a run whose apply outcome is uncertain gives up its writer authority
only through an explicit, permissioned, evidenced recovery, and never as success.

Runs are driven through their real workflow steps on moto; the runner's state
writes go through the same service the Cloud API calls, with its real session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from runplane.domain.artifacts import Artifact, ArtifactKind
from runplane.domain.errors import ConcurrentChange
from runplane.domain.identity import Permission, Principal
from runplane.domain.recovery import (
    NotRecoverable,
    RecoveryRefused,
    RecoveryRequest,
    RecoveryTargetCorrupt,
    Resolution,
)
from runplane.domain.run import RunStatus
from runplane.services.artifacts import ArtifactStore
from runplane.services.recovery import Recoveries
from runplane.services.state import PendingUpload
from runplane.store import recovery as recovery_store
from runplane.store import run_parts, state_versions
from runplane.store import workspaces as workspace_store
from runplane.store.attention import AttentionItem, attention_partition
from runplane.store.audit import org_audit_partition
from runplane.store.models import AuditEventItem, StateVersionItem, state_version_key
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import Arena, FakeWorkflow, applying
from tests.integration.conftest import BUCKET
from tests.integration.state_publishing import LINEAGE, publish, raw_state
from tests.integration.test_runner_authority import with_state

S = RunStatus


def recoveries(arena: Arena, artifacts: ArtifactStore | None = None) -> Recoveries:
    stack = arena.stack
    return Recoveries(
        stack.clock, stack.ids, artifacts or stack.artifacts, FakeWorkflow(), stack.units
    )


def with_permissions(arena: Arena, permissions: Iterable[Permission]) -> Principal:
    """A fresh API token (its creation counts as a step-up) with exactly ``permissions``."""
    stack = arena.stack
    token = stack.identity.issue_token(arena.org.id, "ci", list(permissions), created_by="t")
    return stack.identity.authenticate(f"Bearer {token.token}")


def person(arena: Arena, subject: str, ago: timedelta = timedelta(0)) -> Principal:
    """A person signed in (an identity token) ``ago``, with the admin role."""
    stack = arena.stack
    now = stack.clock.now()
    token = stack.issuer.issue(
        subject=subject,
        now=now,
        auth_time=now - ago,
        groups=["admin"],
        extra={"custom:organization": arena.org.id},
    )
    return stack.identity.authenticate(f"Bearer {token}")


def verified(current: str | None, **changes: Any) -> RecoveryRequest:
    request = RecoveryRequest(
        resolution=Resolution.CURRENT_STATE_VERIFIED,
        reason="the provider console shows the change was applied",
        confirm_authority_revocation=True,
        current_state_version_id=current,
    )
    return replace(request, **changes)


def emergency(current: str | None, raw: bytes, **changes: Any) -> RecoveryRequest:
    request = RecoveryRequest(
        resolution=Resolution.IMPORT_EMERGENCY_STATE,
        reason="errored.tfstate recovered from the sandbox volume",
        confirm_authority_revocation=True,
        current_state_version_id=current,
        emergency_state=raw,
        emergency_state_sha256=hashlib.sha256(raw).hexdigest(),
    )
    return replace(request, **changes)


def lost_apply(arena: Arena, name: str, published: int = 0) -> tuple[str, str, str]:
    """A run that pinned a state (serial 1), published ``published`` more versions while
    applying, then lost its runner: needs_recovery. Its workspace, run and pinned state."""
    ws_id, pinned = with_state(arena, name)
    _, run_id = applying(arena, name, workspace_id=ws_id)
    if published:
        runner = arena.runner(run_id, "apply")
        for serial in range(2, 2 + published):
            publish(
                arena.stack,
                runner,
                workspace_store.get_workspace(ws_id, reads=IdentityMap()),
                serial,
            )
    arena.orchestration.fail(run_id, "apply", "States.HeartbeatTimeout")
    assert arena.runs.get(arena.admin, run_id).status is S.NEEDS_RECOVERY
    return ws_id, run_id, pinned


def open_upload(arena: Arena, who: Principal, ws_id: str, serial: int) -> PendingUpload:
    """A state version ``who`` declared whose bytes are still to be uploaded."""
    raw = raw_state(serial)
    pending = arena.stack.state.create(
        who,
        ws_id,
        serial=serial,
        md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
        lineage=LINEAGE,
        state_b64=None,
    )
    assert isinstance(pending, PendingUpload)
    return pending


def audit_types(arena: Arena) -> list[str]:
    return [e.type for e in AuditEventItem.gsi1.query(org_audit_partition(arena.org.id))]


# -- the common path ------------------------------------------------------------------------


def test_verifying_the_unmoved_state_releases_the_workspace_and_keeps_the_run_as_history(
    arena: Arena,
) -> None:
    # Given a run that lost its runner mid-apply without publishing anything
    ws_id, run_id, pinned = lost_apply(arena, "unmoved")
    held = workspace_store.get_workspace(ws_id, reads=IdentityMap())
    assert held.writer_run_id == run_id
    assert held.lock_id is not None
    panel = arena.runs.review(arena.admin, run_id)["recovery"]
    assert panel["status"] == "required"
    assert panel["state_moved"] is False
    assert panel["publications_since_apply"] == 0
    # And its notice in the organization's attention index
    notices = AttentionItem.query(attention_partition(arena.org.id))
    assert f"RUN#{run_id}" in {notice.sk for notice in notices}

    # When an operator verifies the current state
    who = person(arena, "oncall")
    result = recoveries(arena).recover(who, run_id, verified(pinned), arena.launcher)

    # Then the workspace is free, unlocked, its fence advanced, its state untouched
    after = workspace_store.get_workspace(ws_id, reads=IdentityMap())
    assert (after.writer_run_id, after.lock_id) == (None, None)
    assert after.fence == held.fence + 1 == result["fence"]
    assert after.current_state_version_id == pinned == result["state_version_id"]
    # And the run stays needs_recovery as history, with the recovery in its review
    review = arena.runs.review(arena.admin, run_id)
    assert review["status"] == "needs_recovery"
    assert review["recovery"]["status"] == "completed"
    assert review["recovery"]["result"]["recovered_by"] == who.ref
    assert review["apply"]["status"] == "uncertain"
    assert run_parts.require(run_id, "apply").body["authorization"] == "revoked"
    # And both audit events were written with it
    assert {"run.recovered", "state.recovered"} <= set(audit_types(arena))
    # And the run's notice has left the organization's attention index
    notices = AttentionItem.query(attention_partition(arena.org.id))
    assert f"RUN#{run_id}" not in {notice.sk for notice in notices}
    # And a person can now lock the workspace as usual
    arena.stack.workspaces.lock(who, ws_id, "terraform plan")


def test_an_exact_replay_of_a_completed_recovery_returns_its_result_and_writes_nothing(
    arena: Arena,
) -> None:
    # Given a completed recovery
    _, run_id, pinned = lost_apply(arena, "replayed")
    who = person(arena, "oncall")
    service = recoveries(arena)
    first = service.recover(who, run_id, verified(pinned), arena.launcher)
    before = arena.stack.scan()

    # When the same request is submitted again, and then a different one
    again = service.recover(who, run_id, verified(pinned), arena.launcher)
    with pytest.raises(NotRecoverable):
        service.recover(who, run_id, verified(None), arena.launcher)

    # Then the replay answers the durable result, and neither wrote anything
    assert again == first
    assert arena.stack.scan() == before


def test_the_chain_the_apply_published_is_accepted_and_counted(arena: Arena) -> None:
    # Given an apply that published two versions before its runner was lost
    ws_id, run_id, pinned = lost_apply(arena, "chain", published=2)
    current = workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id
    assert current != pinned
    assert arena.runs.review(arena.admin, run_id)["recovery"]["publications_since_apply"] == 2

    # When an operator verifies the current state
    result = recoveries(arena).recover(
        person(arena, "oncall"), run_id, verified(current), arena.launcher
    )

    # Then both publications were verified as this apply's, and the current state stays
    assert result["publications_verified"] == 2
    assert (
        workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id
        == current
    )


def test_movement_the_apply_did_not_make_is_refused(arena: Arena) -> None:
    # Given an apply that published a version whose provenance names another attempt
    ws_id, run_id, _ = lost_apply(arena, "foreign", published=1)
    current = workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id
    assert current is not None
    item = StateVersionItem.get(*state_version_key(current))
    item.update(
        actions=[
            StateVersionItem.provenance.set({**item.provenance, "attempt_id": "att-someoneelse"})
        ]
    )
    before = arena.stack.scan()

    # When an operator tries to verify it
    with pytest.raises(RecoveryRefused) as refused:
        recoveries(arena).recover(
            person(arena, "oncall"), run_id, verified(current), arena.launcher
        )

    # Then it is refused (409), naming the version, and nothing was written
    assert refused.value.http_status == 409
    assert current in refused.value.message
    assert arena.stack.scan() == before


# -- who may recover -------------------------------------------------------------------------


# -- importing an emergency snapshot -------------------------------------------------------------


def test_an_emergency_snapshot_becomes_the_next_version(arena: Arena) -> None:
    # Given a lost apply that published nothing, and the snapshot it left behind
    ws_id, run_id, pinned = lost_apply(arena, "import")
    snapshot = raw_state(2, "after")

    # When the operator imports it
    result = recoveries(arena).recover(
        person(arena, "oncall"), run_id, emergency(pinned, snapshot), arena.launcher
    )

    # Then it is the workspace's current state, readable through EOF, recorded as recovery's
    current = workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id
    assert current == result["state_version_id"] != pinned
    assert current is not None
    version = state_versions.get(current, reads=IdentityMap())
    assert (version.serial, version.lineage, version.predecessor_id) == (2, LINEAGE, pinned)
    assert version.sha256 == hashlib.sha256(snapshot).hexdigest()
    assert arena.stack.state.download(arena.admin, current) == snapshot
    review = arena.runs.review(arena.admin, run_id)["recovery"]
    assert review["emergency_state"] == {"sha256": version.sha256, "size": len(snapshot)}


def test_an_emergency_snapshot_never_overwrites_a_newer_version(arena: Arena) -> None:
    # Given an apply that did publish a version
    ws_id, run_id, _ = lost_apply(arena, "no-overwrite", published=1)
    current = workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id
    before = arena.stack.scan()

    with pytest.raises(RecoveryRefused, match="never overwrites"):
        recoveries(arena).recover(
            person(arena, "oncall"), run_id, emergency(current, raw_state(3)), arena.launcher
        )
    assert arena.stack.scan() == before


# -- leases, takeover, replay ---------------------------------------------------------------------


class SlowCopies(ArtifactStore):
    """An artifact store whose copies take longer than a recovery lease."""

    def __init__(self, real: ArtifactStore, arena: Arena) -> None:
        self.__dict__.update(real.__dict__)
        self._arena = arena

    def put(
        self,
        organization_id: str,
        kind: ArtifactKind,
        plaintext: Iterable[bytes],
        together: Callable[[Artifact], object] | None = None,
    ) -> Artifact:
        artifact = super().put(organization_id, kind, plaintext, together)
        self._arena.stack.clock.advance(timedelta(minutes=16))
        return artifact


class StorageDown(ArtifactStore):
    """An artifact store that cannot store anything right now."""

    def __init__(self, real: ArtifactStore) -> None:
        self.__dict__.update(real.__dict__)

    def put(
        self,
        organization_id: str,
        kind: ArtifactKind,
        plaintext: Iterable[bytes],
        together: Callable[[Artifact], object] | None = None,
    ) -> Artifact:
        raise ConnectionError("artifact storage is unavailable")


def copied_then_interrupted(arena: Arena, name: str) -> tuple[str, str, bytes, str]:
    """A recovery whose target state was copied, but whose lease ran out before commit."""
    _, run_id, pinned = lost_apply(arena, name)
    snapshot = raw_state(2, "after")
    with pytest.raises(ConcurrentChange, match="changed meanwhile"):
        recoveries(arena, SlowCopies(arena.stack.artifacts, arena)).recover(
            person(arena, "first"), run_id, emergency(pinned, snapshot), arena.launcher
        )
    prepared = recovery_store.get(run_id)
    assert prepared is not None
    assert prepared.target_artifact_id is not None
    return run_id, pinned, snapshot, prepared.target_artifact_id


def test_the_holder_s_replay_resumes_the_same_target_state(arena: Arena) -> None:
    # Given a recovery whose target was copied before its lease ran out
    run_id, pinned, snapshot, target = copied_then_interrupted(arena, "resume")
    prepared = recovery_store.get(run_id)
    assert prepared is not None

    # When the same operator signs in again and replays the exact request
    result = recoveries(arena).recover(
        person(arena, "first"), run_id, emergency(pinned, snapshot), arena.launcher
    )

    # Then it completes with the state version identity and artifact prepared first
    assert result["state_version_id"] == prepared.body["target_state_version_id"]
    assert state_versions.get(result["state_version_id"], reads=IdentityMap()).artifact_id == target


def test_a_corrupt_persisted_target_fails_closed_and_is_never_replaced(arena: Arena) -> None:
    # Given a copied target state that was damaged in storage
    run_id, pinned, snapshot, target = copied_then_interrupted(arena, "corrupt")
    stack = arena.stack
    [key] = [k for k in stack.bucket_keys() if target in k]
    s3: Any = stack.s3
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=key, Body=body[:-1] + bytes([body[-1] ^ 1]))
    before = stack.scan()

    # When the operator replays the exact request
    with pytest.raises(RecoveryTargetCorrupt):
        recoveries(arena).recover(
            person(arena, "first"), run_id, emergency(pinned, snapshot), arena.launcher
        )

    # Then nothing was written: the workspace stays held, the target is not re-copied
    assert stack.scan() == before


# -- pending uploads ---------------------------------------------------------------------------


# -- the next writer ------------------------------------------------------------------------------


class TakenOverDuringCopy(ArtifactStore):
    """While the first operator's copy is stored, its lease runs out and a second
    operator takes the recovery over and completes it."""

    def __init__(self, real: ArtifactStore, takeover: Any, arena: Arena) -> None:
        self.__dict__.update(real.__dict__)
        self._takeover = takeover
        self._arena = arena
        self.stored: list[str] = []

    def put(
        self,
        organization_id: str,
        kind: ArtifactKind,
        plaintext: Iterable[bytes],
        together: Callable[[Artifact], object] | None = None,
    ) -> Artifact:
        artifact = super().put(organization_id, kind, plaintext, together)
        self.stored.append(artifact.id)
        self._arena.stack.clock.advance(timedelta(minutes=16))
        self._takeover()
        return artifact


def test_a_takeover_that_commits_first_fences_the_previous_holder(arena: Arena) -> None:
    # Given a first operator copying the emergency state, and a second one who takes the
    # recovery over (same evidence) and completes it while that copy is being stored
    ws_id, run_id, pinned = lost_apply(arena, "takeover-race")
    snapshot = raw_state(2, "after")
    second: list[dict[str, Any]] = []

    def take_over() -> None:
        request = emergency(pinned, snapshot, takeover=True)
        second.append(
            recoveries(arena).recover(person(arena, "second"), run_id, request, arena.launcher)
        )

    racing = TakenOverDuringCopy(arena.stack.artifacts, take_over, arena)

    # When the first operator's submission goes on to record its copy and commit
    with pytest.raises(ConcurrentChange):
        recoveries(arena, racing).recover(
            person(arena, "first"), run_id, emergency(pinned, snapshot), arena.launcher
        )

    # Then only the takeover committed: its state is current, the first copy was discarded
    [result] = second
    assert result["recovered_by"].endswith("second")
    current = workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id
    assert current == result["state_version_id"]
    assert current is not None
    [first_copy] = racing.stored
    assert state_versions.get(current, reads=IdentityMap()).artifact_id != first_copy
    assert first_copy not in " ".join(arena.stack.bucket_keys())
    assert audit_types(arena).count("run.recovered") == 1
