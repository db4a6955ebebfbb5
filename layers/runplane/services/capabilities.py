"""Minting and redeeming capabilities; runner sessions that bootstrap handles create.

The rules are in ``runplane.domain.capabilities``. Every redemption is one
conditional write; a refusal is explained from the item DynamoDB returns, and
none of the refused paths writes anything.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from runplane.domain.capabilities import (
    HANDLE_PREFIX,
    SESSION_PREFIX,
    AlreadyRedeemed,
    Binding,
    CapabilityKind,
    CapabilityRecord,
    RunnerSession,
    handle_hash,
    request_digest,
)
from runplane.domain.clock import Clock
from runplane.domain.errors import (
    ApplyStartRefused,
    CapabilityConsumed,
    ConcurrentChange,
    RunplaneError,
    SessionAttemptEnded,
    SessionRefused,
    TooMuchContention,
    UnknownCapability,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.read_ahead import Read
from runplane.domain.runner_reads import SessionRead
from runplane.services.attempts import attempt_part, open_or_none
from runplane.store import capabilities as store
from runplane.store.transaction import Transaction

if TYPE_CHECKING:
    from runplane.services.repositories.access import RunnerSessionStore

logger = logging.getLogger(__name__)

MAX_SESSION = timedelta(hours=4)
# Sessions whose binding a process remembers (oldest forgotten first).
_REMEMBERED_SESSIONS = 10_000
# The key of an apply-start redemption's stored result that refused the start.
_REFUSED = "refused"


def new_handle() -> str:
    """256 bits from the operating system's CSPRNG."""
    return HANDLE_PREFIX + secrets.token_urlsafe(32)


def session_secret(handle: str, jti: str) -> str:
    """The session secret a bootstrap handle yields, derived rather than stored:
    a replay with the same handle recovers the same session, and only the
    hash of either secret is ever persisted."""
    mac = hmac.new(handle.encode("ascii"), f"runplane/session/v1/{jti}".encode(), hashlib.sha256)
    return SESSION_PREFIX + base64.urlsafe_b64encode(mac.digest()).decode("ascii").rstrip("=")


@contextmanager
def _audited(action: str, binding: Binding) -> Iterator[None]:
    """Log a redemption's outcome by code and binding: never the handle."""
    try:
        yield
    except RunplaneError as refused:
        logger.warning(
            f"{action} refused",
            extra={
                "code": refused.code,
                "attempt_id": binding.attempt_id,
                "phase": binding.phase.value,
                "sandbox_id": binding.sandbox_id,
            },
        )
        raise
    logger.info(f"{action} accepted", extra={"attempt_id": binding.attempt_id})


@dataclass(frozen=True)
class Minted:
    """A new capability. ``handle`` is the secret: shown once, never stored or logged."""

    jti: str
    valid_until: datetime
    handle: str = field(repr=False)


@dataclass(frozen=True)
class SessionGrant:
    session: RunnerSession
    token: str = field(repr=False)


class Capabilities:
    def __init__(self, clock: Clock, ids: IdGenerator) -> None:
        self._clock = clock
        self._ids = ids

    def mint(
        self,
        kind: CapabilityKind,
        binding: Binding,
        *,
        lifetime: timedelta,
        organization_id: str,
        inputs: Sequence[str] = (),
    ) -> Minted:
        minted, write = self.minting(
            kind, binding, lifetime=lifetime, organization_id=organization_id, inputs=inputs
        )
        write.commit()
        return minted

    def minting(
        self,
        kind: CapabilityKind,
        binding: Binding,
        *,
        lifetime: timedelta,
        organization_id: str,
        inputs: Sequence[str] = (),
    ) -> tuple[Minted, Transaction]:
        """A new capability and the write that creates it, to commit with other writes
        (the capability exists only once that transaction commits)."""
        now = self._clock.now()
        handle = new_handle()
        minted = Minted(self._ids.new(IdKind.CAPABILITY), now + lifetime, handle)
        write = store.mint(
            handle_hash(handle),
            jti=minted.jti,
            organization_id=organization_id,
            kind=kind,
            binding=binding,
            inputs=inputs,
            now=now,
            valid_until=minted.valid_until,
        )
        logger.info(
            "capability minted",
            extra={"jti": minted.jti, "kind": kind.value, "attempt_id": binding.attempt_id},
        )
        return minted, write

    def redeem_once(self, handle: str, kind: CapabilityKind, binding: Binding) -> None:
        """Redeem a strictly one-time capability (a secret): a second use is refused."""
        with _audited(f"{kind} redemption", binding):
            try:
                store.redeem(
                    handle_hash(handle), kind=kind, binding=binding, now=self._clock.now()
                ).commit()
            except AlreadyRedeemed as redeemed:
                raise CapabilityConsumed(redeemed.jti) from None

    def redeem_apply_start(
        self,
        handle: str,
        binding: Binding,
        request: dict[str, str],
        result: dict[str, str],
        extra_writes: Iterable[Transaction] = (),
    ) -> dict[str, str]:
        """Redeem the apply-start capability for ``request``, storing ``result``.

        ``extra_writes`` (the run entering ``applying``) commit in the same
        transaction. A retry with the identical request returns the stored
        result without writing; a retry with any changed input is refused.
        """
        with _audited("apply-start redemption", binding):
            return self._redeem_apply_start(handle, binding, request, result, extra_writes)

    def _redeem_apply_start(
        self,
        handle: str,
        binding: Binding,
        request: dict[str, str],
        result: dict[str, str],
        extra_writes: Iterable[Transaction],
    ) -> dict[str, str]:
        digest = request_digest(request)
        try:
            store.redeem(
                handle_hash(handle),
                kind=CapabilityKind.APPLY_START,
                binding=binding,
                now=self._clock.now(),
                request_digest=digest,
                result=result,
            ).extend(extra_writes).commit()
        except store.AlreadyRedeemed as redeemed:
            if redeemed.request_digest != digest:
                raise CapabilityConsumed(
                    redeemed.jti, "it was redeemed for a different request"
                ) from None
            if _REFUSED in redeemed.result:
                # Redeemed by the refusal that ended the run: refused again, as then.
                raise ApplyStartRefused(
                    binding.run_id, "apply_failed", redeemed.result[_REFUSED]
                ) from None
            return redeemed.result
        return result

    def refused_apply_start(
        self, handle: str, binding: Binding, request: Mapping[str, str], reason: str
    ) -> Transaction:
        """The apply-start capability's redemption for a start refused for good, to
        commit with the run's failure: only the capability's holder can end the run that
        way (a wrong handle, binding or expiry refuses the whole write). The stored
        result is the refusal, which an identical replay gets again."""
        return store.redeem(
            handle_hash(handle),
            kind=CapabilityKind.APPLY_START,
            binding=binding,
            now=self._clock.now(),
            request_digest=request_digest(dict(request)),
            result={_REFUSED: reason},
        )

    @staticmethod
    def redeeming_apply_start(binding: Binding) -> AbstractContextManager[None]:
        """Log the outcome of a write that redeems the apply-start capability, as
        ``redeem_apply_start`` logs its own: by code and binding, never the handle."""
        return _audited("apply-start redemption", binding)


class RunnerSessions:
    """Sessions a sandbox authenticates with after redeeming its bootstrap handle."""

    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        store: RunnerSessionStore,
        *,
        lifetime: timedelta = MAX_SESSION,
    ) -> None:
        if lifetime > MAX_SESSION:
            raise ValueError("runner sessions last at most the four-hour authority window")
        self._clock = clock
        self._ids = ids
        self._store = store
        self._lifetime = lifetime
        # Token hash -> binding, immutable facts that name the attempt to read.
        self._bindings: dict[str, Binding] = {}
        self._bindings_lock = threading.Lock()

    def start(
        self, handle: str, binding: Binding, record: CapabilityRecord | None = None
    ) -> SessionGrant:
        """Redeem a bootstrap handle for a session; an exact replay returns the same one.
        ``record`` is the handle's record if the caller has read it already."""
        with _audited("bootstrap redemption", binding):
            return self._start(handle, binding, record)

    def _start(
        self, handle: str, binding: Binding, record: CapabilityRecord | None
    ) -> SessionGrant:
        for _ in range(3):
            try:
                return self._create(handle, binding, self._clock.now(), record)
            except AlreadyRedeemed as redeemed:
                return self._replay(handle, redeemed.jti)
            except ConcurrentChange:
                continue
        raise TooMuchContention("the bootstrap handle is being redeemed concurrently")

    def _create(
        self, handle: str, binding: Binding, now: datetime, record: CapabilityRecord | None
    ) -> SessionGrant:
        # The record only supplies the session's contents (none of which changes);
        # whether the handle may be redeemed is decided by the conditional write below,
        # whose refusal is what explains an invalid handle.
        record = record or self._store.capability(handle_hash(handle))
        if record is None or record.kind is not CapabilityKind.BOOTSTRAP:
            raise UnknownCapability()
        secret = session_secret(handle, record.jti)
        session = RunnerSession(
            id=self._ids.new(IdKind.SESSION),
            organization_id=record.organization_id,
            jti=record.jti,
            binding=binding,
            inputs=record.inputs,
            expires_at=now + self._lifetime,
        )
        self._store.open_session(
            handle_hash(handle), handle_hash(secret), session, attempt_part(binding.phase), now
        )
        # The sandbox's next call (in this process) can read its attempt with it.
        self._remember(handle_hash(secret), binding)
        return SessionGrant(session, secret)

    def _replay(self, handle: str, jti: str) -> SessionGrant:
        secret = session_secret(handle, jti)
        session = self._store.session(handle_hash(secret))
        if session is None:
            raise CapabilityConsumed(jti, "it was redeemed without creating a session")
        if session.revoked:
            raise SessionRefused("it was revoked")
        return SessionGrant(session, secret)

    def authenticate_open(
        self, token: str, also: Callable[[Binding], Sequence[Read]] = lambda binding: ()
    ) -> SessionRead:
        """``authenticate``, and refused too once the session's attempt has closed.

        Both are read in one consistent request once this process has seen the
        token: a session's binding never changes, so it tells which attempt to
        read along with the session, and which items of its run ``also`` names
        for the call to read next (in the read's ``ahead``, for that call).
        Revocation stays immediate: nothing here is remembered but the binding."""
        if not token.startswith(SESSION_PREFIX):
            raise SessionRefused("malformed token")
        secret_hash = handle_hash(token)
        with self._bindings_lock:
            binding = self._bindings.get(secret_hash)
        if binding is None:
            session = self.authenticate(token)
            # Not known yet: read as a read of its own, with nothing ahead.
            read = self._store.session_read(
                secret_hash, session.binding.run_id, attempt_part(session.binding.phase)
            )
            self._remember(secret_hash, session.binding)
            read = SessionRead(session, read.attempt)
        else:
            read = self._store.session_read(
                secret_hash, binding.run_id, attempt_part(binding.phase), also(binding)
            )
            session = self._valid(read.session)
        if open_or_none(session.binding, read.attempt) is None:
            raise SessionAttemptEnded()
        return read

    def _remember(self, secret_hash: str, binding: Binding) -> None:
        with self._bindings_lock:
            if len(self._bindings) >= _REMEMBERED_SESSIONS:
                self._bindings.pop(next(iter(self._bindings)))
            self._bindings[secret_hash] = binding

    def authenticate(self, token: str) -> RunnerSession:
        """The session a runner call presents; refused when unknown, expired or revoked."""
        if not token.startswith(SESSION_PREFIX):
            raise SessionRefused("malformed token")
        return self._valid(self._store.session(handle_hash(token)))

    def _valid(self, session: RunnerSession | None) -> RunnerSession:
        if session is None:
            raise SessionRefused("unknown token")
        if session.revoked:
            raise SessionRefused("it was revoked")
        if session.expires_at <= self._clock.now():
            raise SessionRefused("it expired")
        return session

    def revoke_attempt(self, attempt_id: str) -> int:
        """Revoke an attempt's sessions now (closing an attempt does this in its own write)."""
        return self._store.revoke_attempt_sessions(attempt_id, self._clock.now())
