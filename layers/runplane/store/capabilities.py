"""Capability and runner-session items: minting, the one conditional redemption, sessions.

``DynamoRunnerSessions`` is the ``RunnerSessionStore`` seam over them
(``services/repositories/access.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from runplane.domain.capabilities import (
    AlreadyRedeemed,
    Binding,
    CapabilityKind,
    CapabilityRecord,
    Phase,
    RunnerSession,
)
from runplane.domain.entities import Run
from runplane.domain.errors import (
    CapabilityConsumed,
    CapabilityExpired,
    CapabilityWrongAttempt,
    CapabilityWrongPhase,
    CapabilityWrongSandbox,
    ConcurrentChange,
    SessionRefused,
    UnknownCapability,
)
from runplane.domain.read_ahead import Read, ReadAhead, ReadKind
from runplane.domain.runner_reads import CapabilityRead, SessionRead
from runplane.domain.state import StateVersion
from runplane.store import batch, prefetch, run_parts
from runplane.store.models import (
    CapabilityItem,
    JtiClaimItem,
    RunItem,
    RunnerSessionItem,
    StateVersionItem,
    capability_key,
    jti_claim_key,
    run_part_key,
    session_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.runs import to_run
from runplane.store.state_versions import to_version
from runplane.store.transaction import Item, Transaction

# Records outlive their validity a little, so a late replay is told "expired"
# rather than "unknown"; DynamoDB TTL then removes them.
RETENTION = timedelta(days=1)


__all__ = ["AlreadyRedeemed", "DynamoRunnerSessions"]


def _already_redeemed(current: Item) -> AlreadyRedeemed:
    """The redemption ``current`` (the item as DynamoDB returned it) records."""
    stored = current.get("result")
    return AlreadyRedeemed(
        str(current["jti"]), current.get("request_digest"), json.loads(stored) if stored else {}
    )


def mint(
    handle_hash: str,
    *,
    jti: str,
    organization_id: str,
    kind: CapabilityKind,
    binding: Binding,
    inputs: Sequence[str],
    now: datetime,
    valid_until: datetime,
) -> Transaction:
    return Transaction().put_new(
        CapabilityItem(
            *capability_key(handle_hash),
            jti=jti,
            org_id=organization_id,
            kind=kind.value,
            run_id=binding.run_id,
            attempt_id=binding.attempt_id,
            phase=binding.phase.value,
            sandbox_id=binding.sandbox_id,
            inputs=list(inputs),
            created_at=now,
            valid_until=valid_until,
            expires_at=valid_until + RETENTION,
        )
    )


def get_capability(handle_hash: str) -> CapabilityRecord | None:
    try:
        item = CapabilityItem.get(*capability_key(handle_hash), consistent_read=True)
    except CapabilityItem.DoesNotExist:
        return None
    return _to_capability(item)


def get_capability_and_part(
    handle_hash: str, run_id: str, part: str, also: Sequence[Read] = (), *, reads: IdentityMap
) -> CapabilityRead:
    """A capability, one part of a run (the attempt it is redeemed for) and ``also`` (for
    the call to read next, found or absent, with the part), in one consistent request
    (those ``reads`` holds served from it); with, among those, the run and the state
    versions found."""
    capability, part_key = capability_key(handle_hash), run_part_key(run_id, part)
    found = batch.get_many([capability, part_key, *map(prefetch.key_of, also)], reads=reads)
    raw_capability, raw_part = found.pop(capability, None), found.get(part_key)
    # The attempt too: the call may read it again.
    ahead = prefetch.read_ahead([Read.run_part(run_id, part), *also], found)
    return CapabilityRead(
        _to_capability(CapabilityItem.from_raw_data(raw_capability)) if raw_capability else None,
        run_parts.from_raw(raw_part) if raw_part else None,
        ahead,
        *_run_and_versions(ahead, run_id),
    )


def _run_and_versions(ahead: ReadAhead, run_id: str) -> tuple[Run | None, tuple[StateVersion, ...]]:
    """The run ``run_id`` and the state versions ``ahead`` found, as records."""
    raw_run = ahead.found.get(Read.run(run_id))
    return (
        to_run(RunItem.from_raw_data(dict(raw_run))) if raw_run else None,
        tuple(
            to_version(StateVersionItem.from_raw_data(dict(raw)))
            for read, raw in ahead.found.items()
            if read.kind is ReadKind.STATE_VERSION
        ),
    )


def _to_capability(item: CapabilityItem) -> CapabilityRecord:
    return CapabilityRecord(
        jti=item.jti,
        kind=CapabilityKind(item.kind),
        organization_id=item.org_id,
        binding=Binding(item.run_id, item.attempt_id, Phase(item.phase), item.sandbox_id),
        inputs=tuple(item.inputs or ()),
        valid_until=item.valid_until,
    )


def _instant(serialized: str) -> datetime:
    """pynamodb's UTCDateTimeAttribute format, as found in a returned raw item."""
    return datetime.strptime(serialized, "%Y-%m-%dT%H:%M:%S.%f%z")


def _refusal(kind: CapabilityKind, binding: Binding, now: datetime) -> Any:
    """Explain a refused redemption from the item DynamoDB returned (no second read)."""

    def refused(current: Item | None) -> Exception:
        if current is None or current.get("kind") != kind.value:
            return UnknownCapability()
        jti = str(current["jti"])
        if _instant(str(current["valid_until"])) <= now:
            return CapabilityExpired(jti)
        if current["attempt_id"] != binding.attempt_id or current["run_id"] != binding.run_id:
            return CapabilityWrongAttempt(jti)
        if current["phase"] != binding.phase.value:
            return CapabilityWrongPhase(jti)
        if current["sandbox_id"] != binding.sandbox_id:
            return CapabilityWrongSandbox(jti)
        if current.get("redeemed_at"):
            return _already_redeemed(current)
        return ConcurrentChange("the capability changed during redemption")

    return refused


def redeem(
    handle_hash: str,
    *,
    kind: CapabilityKind,
    binding: Binding,
    now: datetime,
    request_digest: str | None = None,
    result: dict[str, str] | None = None,
) -> Transaction:
    """Mark the capability redeemed, iff it exists, is of ``kind``, is exactly
    bound to ``binding``, is unexpired and was never redeemed. A refusal raises
    the specific error (or ``AlreadyRedeemed`` for the caller's replay rules)."""
    item = CapabilityItem(*capability_key(handle_hash))
    actions = [CapabilityItem.redeemed_at.set(now)]
    if request_digest is not None:
        actions.append(CapabilityItem.request_digest.set(request_digest))
    if result is not None:
        actions.append(CapabilityItem.result.set(result))
    return Transaction().update(
        item,
        actions,
        condition=(CapabilityItem.kind == kind.value)
        & (CapabilityItem.run_id == binding.run_id)
        & (CapabilityItem.attempt_id == binding.attempt_id)
        & (CapabilityItem.phase == binding.phase.value)
        & (CapabilityItem.sandbox_id == binding.sandbox_id)
        & (CapabilityItem.valid_until > now)
        & CapabilityItem.redeemed_at.does_not_exist(),
        on_refused=_refusal(kind, binding, now),
    )


def attempt_sessions_partition(attempt_id: str) -> str:
    return f"ATTEMPT#{attempt_id}#SESSIONS"


def create_session(secret_hash: str, session: RunnerSession, now: datetime) -> Transaction:
    """The session and the claim that consumes its bootstrap JTI, both put only if new."""
    binding = session.binding
    return (
        Transaction()
        .put_new(
            JtiClaimItem(
                *jti_claim_key(session.jti),
                session_id=session.id,
                expires_at=session.expires_at + RETENTION,
            ),
            on_refused=lambda current: CapabilityConsumed(
                session.jti, "its runner session was already created"
            ),
        )
        .put_new(
            RunnerSessionItem(
                *session_key(secret_hash),
                gsi1pk=attempt_sessions_partition(binding.attempt_id),
                gsi1sk=session.id,
                session_id=session.id,
                org_id=session.organization_id,
                jti=session.jti,
                run_id=binding.run_id,
                attempt_id=binding.attempt_id,
                phase=binding.phase.value,
                sandbox_id=binding.sandbox_id,
                inputs=list(session.inputs),
                created_at=now,
                valid_until=session.expires_at,
                expires_at=session.expires_at + RETENTION,
            )
        )
    )


def get_session(secret_hash: str) -> RunnerSession | None:
    try:
        item = RunnerSessionItem.get(*session_key(secret_hash), consistent_read=True)
    except RunnerSessionItem.DoesNotExist:
        return None
    return _to_session(item)


def get_session_and_part(
    secret_hash: str, run_id: str, part: str, also: Sequence[Read] = (), *, reads: IdentityMap
) -> SessionRead:
    """A session, one part of its run (its attempt) and ``also`` (for the call to read
    next, found or absent, with the part), in one consistent request (those ``reads``
    holds served from it); with, among those, the run and the state versions found."""
    session, part_key = session_key(secret_hash), run_part_key(run_id, part)
    found = batch.get_many([session, part_key, *map(prefetch.key_of, also)], reads=reads)
    raw_session, raw_part = found.pop(session, None), found.get(part_key)
    # The attempt too: the call may read it again.
    ahead = prefetch.read_ahead([Read.run_part(run_id, part), *also], found)
    return SessionRead(
        _to_session(RunnerSessionItem.from_raw_data(raw_session)) if raw_session else None,
        run_parts.from_raw(raw_part) if raw_part else None,
        ahead,
        *_run_and_versions(ahead, run_id),
    )


def _to_session(item: RunnerSessionItem) -> RunnerSession:
    return RunnerSession(
        id=item.session_id,
        organization_id=item.org_id,
        jti=item.jti,
        binding=Binding(item.run_id, item.attempt_id, Phase(item.phase), item.sandbox_id),
        inputs=tuple(item.inputs or ()),
        expires_at=item.valid_until,
        revoked=item.revoked_at is not None,
    )


def revoke_sessions(session_keys: Iterable[str], now: datetime, since: datetime) -> Transaction:
    """Writes revoking the sessions whose items' keys are ``session_keys``, created no
    earlier than ``since``, to commit with whatever closes their attempt.

    A session's item is kept until a day (``RETENTION``) after its validity ends, so
    within a day of ``since`` each is surely there. Later, none is revoked: each may
    have expired out of the table (and a revocation refused for that would refuse the
    close), and each is refused all the same once its attempt is closed."""
    revocations = Transaction()
    if now - since < RETENTION:
        for secret_hash in sorted(session_keys):
            _revoke(revocations, session_key(secret_hash), now)
    return revocations


def revoke_attempt_sessions(attempt_id: str, now: datetime) -> Transaction:
    """Writes revoking every session of an attempt not yet revoked, to commit with
    whatever closes the attempt. Sessions are found through the eventually
    consistent index; a session it misses is still refused, because a session is
    only honoured while its attempt is open."""
    revocations = Transaction()
    for item in RunnerSessionItem.gsi1.query(attempt_sessions_partition(attempt_id)):
        if item.revoked_at is None:
            _revoke(revocations, (item.pk, item.sk), now)
    return revocations


def _revoke(revocations: Transaction, key: tuple[str, str], now: datetime) -> None:
    revocations.update(
        RunnerSessionItem(*key),
        # if_not_exists: a revocation that raced this one keeps its instant.
        [RunnerSessionItem.revoked_at.set(RunnerSessionItem.revoked_at | now)],
        # Never create a stub item for a session that expired out of the table.
        condition=RunnerSessionItem.pk.exists(),
        on_refused=lambda current: ConcurrentChange(
            "a runner session of the attempt expired meanwhile"
        ),
    )


def open_session(
    handle_hash: str, secret_hash: str, session: RunnerSession, part: str, now: datetime
) -> Transaction:
    """Redeem the bootstrap handle for ``session``, consume its JTI, create it and note it
    on its attempt, the run's part ``part`` (only while the attempt is open): one write."""
    binding = session.binding
    return redeem(handle_hash, kind=CapabilityKind.BOOTSTRAP, binding=binding, now=now).extend(
        [
            create_session(secret_hash, session, now),
            run_parts.note_session(
                binding.run_id,
                part,
                secret_hash,
                now,
                on_refused=lambda current: SessionRefused("its attempt has ended"),
            ),
        ]
    )


class DynamoRunnerSessions:
    """``RunnerSessionStore`` on the table; its reads of several items are served from the
    request's identity map (``scope``) where they were read ahead."""

    def __init__(self, scope: RequestScope = REQUEST) -> None:
        self._scope = scope

    def capability(self, handle_hash: str) -> CapabilityRecord | None:
        return get_capability(handle_hash)

    def capability_read(
        self, handle_hash: str, run_id: str, part: str, also: Sequence[Read] = ()
    ) -> CapabilityRead:
        return get_capability_and_part(handle_hash, run_id, part, also, reads=self._scope.reads())

    def session(self, secret_hash: str) -> RunnerSession | None:
        return get_session(secret_hash)

    def session_read(
        self, secret_hash: str, run_id: str, part: str, also: Sequence[Read] = ()
    ) -> SessionRead:
        return get_session_and_part(secret_hash, run_id, part, also, reads=self._scope.reads())

    def redeem(
        self, handle_hash: str, kind: CapabilityKind, binding: Binding, now: datetime
    ) -> None:
        redeem(handle_hash, kind=kind, binding=binding, now=now).commit()

    def open_session(
        self, handle_hash: str, secret_hash: str, session: RunnerSession, part: str, now: datetime
    ) -> None:
        open_session(handle_hash, secret_hash, session, part, now).commit()

    def revoke_attempt_sessions(self, attempt_id: str, now: datetime) -> int:
        revocations = revoke_attempt_sessions(attempt_id, now)
        revocations.commit()
        return len(revocations)
