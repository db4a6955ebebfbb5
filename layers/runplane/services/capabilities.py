"""Minting and redeeming capabilities; runner sessions that bootstrap handles create.

The rules are in ``runplane.domain.capabilities``. Every redemption is one
conditional write (an intent of a unit of work, or the session store's); a refusal
raises the error that explains it, and none of the refused paths writes anything.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NoReturn

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
from runplane.domain.entities import Run
from runplane.domain.errors import (
    ApplyStartRefused,
    CapabilityConsumed,
    ConcurrentChange,
    RunplaneError,
    SessionAttemptEnded,
    SessionRefused,
    TooMuchContention,
    TransitionRejected,
    UnknownCapability,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.read_ahead import Read
from runplane.domain.runner_reads import SessionRead
from runplane.domain.session_tokens import (
    HINTED,
    MalformedToken,
    SessionHints,
    hinted_token,
    hints_of,
)
from runplane.services.attempts import attempt_part, open_or_none
from runplane.services.unit_of_work import UnitOfWork, UnitsOfWork

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
    return SESSION_PREFIX + _text(mac.digest())


def session_token(handle: str, jti: str, hints: SessionHints) -> str:
    """The session token a bootstrap handle yields, naming ``hints`` (what its calls
    read) ahead of its secret part, derived as ``session_secret`` is (over the names
    too). Names a token cannot carry give the first form, ``session_secret``."""
    if not hints.sayable():
        return session_secret(handle, jti)
    context = f"runplane/session/v2/{jti}/{hints.text()}".encode()
    mac = hmac.new(handle.encode("ascii"), context, hashlib.sha256)
    return hinted_token(hints, _text(mac.digest()))


def _text(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


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
    """Capabilities minted and redeemed through the unit of work: a mint is written in
    the unit of the attempt it is for, the apply start's redemption in the unit of the
    run's move."""

    def __init__(self, clock: Clock, ids: IdGenerator, units: UnitsOfWork) -> None:
        self._clock = clock
        self._ids = ids
        self._units = units

    def mint(
        self,
        kind: CapabilityKind,
        binding: Binding,
        *,
        lifetime: timedelta,
        organization_id: str,
        inputs: Sequence[str] = (),
    ) -> Minted:
        """A new capability, written on its own."""
        with self._units() as uow:
            minted = self.minting(
                uow,
                kind,
                binding,
                lifetime=lifetime,
                organization_id=organization_id,
                inputs=inputs,
            )
            uow.commit()
        return minted

    def minting(
        self,
        uow: UnitOfWork,
        kind: CapabilityKind,
        binding: Binding,
        *,
        lifetime: timedelta,
        organization_id: str,
        inputs: Sequence[str] = (),
    ) -> Minted:
        """A new capability, intended on ``uow`` with the caller's other writes (it
        exists only once that unit commits)."""
        now = self._clock.now()
        handle = new_handle()
        minted = Minted(self._ids.new(IdKind.CAPABILITY), now + lifetime, handle)
        uow.capabilities.mint(
            handle_hash(handle),
            CapabilityRecord(
                jti=minted.jti,
                kind=kind,
                organization_id=organization_id,
                binding=binding,
                inputs=tuple(inputs),
                valid_until=minted.valid_until,
            ),
            now,
        )
        logger.info(
            "capability minted",
            extra={"jti": minted.jti, "kind": kind.value, "attempt_id": binding.attempt_id},
        )
        return minted

    def redeem_once(self, handle: str, kind: CapabilityKind, binding: Binding) -> None:
        """Redeem a strictly one-time capability (a secret): a second use is refused."""
        with _audited(f"{kind} redemption", binding):
            try:
                with self._units() as uow:
                    uow.capabilities.redeem(handle_hash(handle), kind, binding, self._clock.now())
                    uow.commit()
            except AlreadyRedeemed as redeemed:
                raise CapabilityConsumed(redeemed.jti) from None

    def redeem_apply_start(
        self,
        uow: UnitOfWork,
        handle: str,
        binding: Binding,
        request: Mapping[str, str],
        result: Mapping[str, str],
        *,
        moving: Run | None = None,
    ) -> dict[str, str]:
        """Redeem the apply-start capability for ``request``, storing ``result``: commit
        ``uow`` (the run entering ``applying``, from the snapshot ``moving``, if the
        caller intended it) with the redemption. A retry with the identical request
        returns the stored result without writing; a retry with any changed input is
        refused.
        """
        with _audited("apply-start redemption", binding):
            return self._redeem_apply_start(uow, handle, binding, request, result, moving)

    def _redeem_apply_start(
        self,
        uow: UnitOfWork,
        handle: str,
        binding: Binding,
        request: Mapping[str, str],
        result: Mapping[str, str],
        moving: Run | None,
    ) -> dict[str, str]:
        digest = request_digest(dict(request))
        self._intend_redemption(uow, handle, binding, digest, result)
        try:
            try:
                uow.commit()
            except TransitionRejected as rejected:
                if moving is None:
                    raise
                self._redemption_before_move(handle, binding, digest, result, moving, rejected)
        except AlreadyRedeemed as redeemed:
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
        return dict(result)

    def _redemption_before_move(
        self,
        handle: str,
        binding: Binding,
        digest: str,
        result: Mapping[str, str],
        moving: Run,
        rejected: TransitionRejected,
    ) -> NoReturn:
        """The run moved before the redemption's commit: the redemption's own refusal
        explains it first (a retry racing its identical twin gets the stored result).
        The run never returns to the status it was moved from, so this commit is
        refused whole: the redemption's error, else the move's."""
        with self._units() as uow:
            self._intend_redemption(uow, handle, binding, digest, result)
            uow.runs.expect_unchanged(moving, on_refused=lambda held: rejected)
            uow.commit()
        raise rejected

    def _intend_redemption(
        self,
        uow: UnitOfWork,
        handle: str,
        binding: Binding,
        digest: str,
        result: Mapping[str, str],
    ) -> None:
        uow.capabilities.redeem(
            handle_hash(handle),
            CapabilityKind.APPLY_START,
            binding,
            self._clock.now(),
            request_digest=digest,
            result=result,
        )

    def refused_apply_start(
        self,
        uow: UnitOfWork,
        handle: str,
        binding: Binding,
        request: Mapping[str, str],
        reason: str,
    ) -> None:
        """Intend the apply-start capability's redemption for a start refused for good,
        to commit with the run's failure: only the capability's holder can end the run
        that way (a wrong handle, binding or expiry refuses the whole commit). The stored
        result is the refusal, which an identical replay gets again."""
        self._intend_redemption(
            uow, handle, binding, request_digest(dict(request)), {_REFUSED: reason}
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
        self,
        handle: str,
        binding: Binding,
        record: CapabilityRecord | None = None,
        hints: SessionHints | None = None,
    ) -> SessionGrant:
        """Redeem a bootstrap handle for a session; an exact replay returns the same one.
        ``record`` is the handle's record if the caller has read it already; ``hints``
        what the session's token names for its calls to read (the binding's run,
        attempt and phase, and whatever facts the caller read: ``SessionHints``)."""
        hints = hints or SessionHints.of(binding)
        if not hints.names(binding):
            raise ValueError("a session's token names its own binding")
        with _audited("bootstrap redemption", binding):
            return self._start(handle, binding, record, hints)

    def _start(
        self,
        handle: str,
        binding: Binding,
        record: CapabilityRecord | None,
        hints: SessionHints,
    ) -> SessionGrant:
        for _ in range(3):
            try:
                return self._create(handle, binding, self._clock.now(), record, hints)
            except AlreadyRedeemed as redeemed:
                return self._replay(handle, redeemed.jti, hints)
            except ConcurrentChange:
                continue
        raise TooMuchContention("the bootstrap handle is being redeemed concurrently")

    def _create(
        self,
        handle: str,
        binding: Binding,
        now: datetime,
        record: CapabilityRecord | None,
        hints: SessionHints,
    ) -> SessionGrant:
        # The record only supplies the session's contents (none of which changes);
        # whether the handle may be redeemed is decided by the conditional write below,
        # whose refusal is what explains an invalid handle.
        record = record or self._store.capability(handle_hash(handle))
        if record is None or record.kind is not CapabilityKind.BOOTSTRAP:
            raise UnknownCapability()
        secret = session_token(handle, record.jti, hints)
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
        if not secret.startswith(SESSION_PREFIX + HINTED):
            # A token naming nothing: the sandbox's next call (in this process) can
            # read its attempt with it.
            self._remember(handle_hash(secret), binding)
        return SessionGrant(session, secret)

    def _replay(self, handle: str, jti: str, hints: SessionHints) -> SessionGrant:
        # The token the same start derives; else the first form's, of a session
        # created before tokens named their reads.
        for secret in dict.fromkeys(
            [session_token(handle, jti, hints), session_secret(handle, jti)]
        ):
            session = self._store.session(handle_hash(secret))
            if session is not None:
                break
        else:
            raise CapabilityConsumed(jti, "it was redeemed without creating a session")
        if session.revoked:
            raise SessionRefused("it was revoked")
        return SessionGrant(session, secret)

    def authenticate_open(
        self, token: str, also: Callable[[SessionHints], Sequence[Read]] = lambda hints: ()
    ) -> SessionRead:
        """``authenticate``, and refused too once the session's attempt has closed.

        Both are read in one consistent request, with the items of its run ``also``
        names for the call to read next (in the read's ``ahead``, for that call), from
        what the token names (``SessionHints``): its binding, which tells which attempt
        to read, and the facts its calls read. Any process can: the token carries them,
        and a token whose names were altered is an unknown session (stored under the
        hash of the whole token). A token of the first form names nothing: it is read
        so once this process has seen it (its binding remembered), and otherwise read
        on its own first. Revocation stays immediate: every call reads the session."""
        if not token.startswith(SESSION_PREFIX):
            raise SessionRefused("malformed token")
        try:
            hints = hints_of(token)
        except MalformedToken:
            raise SessionRefused("malformed token") from None
        secret_hash = handle_hash(token)
        if hints is None:
            with self._bindings_lock:
                binding = self._bindings.get(secret_hash)
            hints = None if binding is None else SessionHints.of(binding)
        if hints is None:
            session = self.authenticate(token)
            # Not known yet: read as a read of its own, with nothing ahead.
            read = self._store.session_read(
                secret_hash, session.binding.run_id, attempt_part(session.binding.phase)
            )
            self._remember(secret_hash, session.binding)
            read = SessionRead(session, read.attempt)
        else:
            read = self._store.session_read(
                secret_hash, hints.run_id, attempt_part(hints.phase), also(hints)
            )
            session = self._valid(read.session)
            if not hints.names(session.binding):
                # Cannot be issued (the token is the session's key): refused all the same.
                raise SessionRefused("its token names another binding")
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
