"""The DynamoDB state publication (``services.repositories.state.StatePublication``):
each call is one transaction of ``store.state_versions``' conditional writes, with an
apply guard's condition checks first."""

from __future__ import annotations

from datetime import datetime

from runplane.domain.state import ApplyGuard, Authority, StateVersion, UploadToken
from runplane.store import state_versions as store
from runplane.store.transaction import Item, Transaction

APPLY_ATTEMPT = "attempt#apply"
"""The run part of a run's apply attempt (``services.attempts.attempt_part``)."""


class DynamoStatePublication:
    def upload_token(self, token_hash: str) -> UploadToken | None:
        return store.get_upload_token(token_hash)

    def open_upload(
        self,
        version: StateVersion,
        *,
        state_token_hash: str,
        json_token_hash: str,
        valid_until: datetime,
    ) -> None:
        store.put_pending(version).extend(
            [
                store.put_upload_token(state_token_hash, version.id, "state", valid_until),
                store.put_upload_token(json_token_hash, version.id, "json", valid_until),
            ]
        ).commit()

    def publish(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        event_id: str,
        guard: ApplyGuard | None,
    ) -> None:
        self.publish_write(version, authority, event_id=event_id, guard=guard).commit()

    def publish_write(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        event_id: str,
        guard: ApplyGuard | None,
    ) -> Transaction:
        return _guarded(guard).extend([store.publish(version, authority, event_id)])

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
    ) -> None:
        self.finalize_write(
            version,
            authority,
            token_hash=token_hash,
            artifact_id=artifact_id,
            sha256=sha256,
            size=size,
            event_id=event_id,
            now=now,
            guard=guard,
        ).commit()

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
    ) -> Transaction:
        return _guarded(guard).extend(
            [
                store.use_upload_token(token_hash, now),
                store.finalize(
                    version,
                    authority,
                    artifact_id=artifact_id,
                    sha256=sha256,
                    size=size,
                    event_id=event_id,
                    now=now,
                ),
            ]
        )

    def attach_json(self, sv_id: str, *, token_hash: str, artifact_id: str, now: datetime) -> None:
        store.use_upload_token(token_hash, now).extend(
            [store.attach_json(sv_id, artifact_id, now)]
        ).commit()


def _guarded(guard: ApplyGuard | None) -> Transaction:
    return Transaction() if guard is None else still_applying(guard)


def still_applying(guard: ApplyGuard) -> Transaction:
    """The guard's condition checks: the run's apply attempt still open, then the run
    still applying (when both are stale, "its attempt has ended" says more)."""
    # Loaded by runners' writes only, as the run's parts are.
    from runplane.domain.errors import RunnerAuthorityRefused, RunNotApplying
    from runplane.domain.parts import OPEN_ATTEMPT
    from runplane.domain.run import RunStatus
    from runplane.store import run_parts
    from runplane.store import runs as run_store

    run_id = guard.run_id

    def ended(current: Item | None) -> Exception:
        return RunnerAuthorityRefused(run_id, "its apply attempt has ended")

    def moved(current: Item | None) -> Exception:
        return RunNotApplying(run_id, (current or {}).get("status"))

    return run_parts.expect(run_id, APPLY_ATTEMPT, OPEN_ATTEMPT, ended).extend(
        [run_store.expect_status(run_id, RunStatus.APPLYING, moved)]
    )
