"""Operator recovery of a run whose apply outcome is uncertain: the rules, with no I/O.

A run that ends ``apply_start_uncertain``, ``apply_interrupted``,
``needs_recovery`` (or ``apply_failed`` after publishing partial state) keeps
the workspace's writer authority. Recovery is the only way to release it: an
operator with both ``run:recover`` and ``state:recover``, signed in within the
last 15 minutes, states which state is the truth and why, and confirms that
the run's authority is revoked and the fence advanced. It never retries or
replaces the apply; the next infrastructure action is a new plan.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from runplane.domain.errors import Conflict, InvalidInput, RunplaneError, StateRejected
from runplane.domain.identity import STEP_UP_WINDOW, Permission, Principal
from runplane.domain.parts import optional_text
from runplane.domain.publications import ApplyIdentity, Publication, published_by
from runplane.domain.run import INTERVENTION_STATUSES, RunStatus
from runplane.domain.state import check_state, is_serial, parse_json

# A prepared recovery belongs to its operator for this long; then another may take over.
LEASE = timedelta(seconds=900)
# Publications an interrupted apply may have made: about 720 twenty-second persistence
# intervals in the four-hour runner authority window, with headroom.
MAX_CHAIN = 1024
MAX_REASON = 1000
# Takeovers recorded on one recovery (the oldest are dropped beyond this).
MAX_TAKEOVERS = 20
RECOVERABLE_STATUSES = INTERVENTION_STATUSES | {RunStatus.APPLY_FAILED}


class Resolution(StrEnum):
    # The workspace's current state (the pre-apply version, or what this exact apply
    # published) is the truth.
    CURRENT_STATE_VERIFIED = "current_state_verified"
    # A snapshot the operator recovered (say, the engine's errored.tfstate) becomes
    # the next version after the pre-apply one.
    IMPORT_EMERGENCY_STATE = "import_emergency_state"


class RecoveryState(StrEnum):
    PREPARED = "prepared"
    COMPLETED = "completed"


# -- typed refusals ------------------------------------------------------------------------


class StepUpRequired(RunplaneError):
    code = "STEP_UP_REQUIRED"
    http_status = 403

    def __init__(self) -> None:
        super().__init__(
            "recovery needs a sign-in within the last 15 minutes: sign in again, or use "
            "an API token created less than 15 minutes ago"
        )


class NotRecoverable(Conflict):
    code = "NOT_RECOVERABLE"


class RecoveryRefused(Conflict):
    """The evidence does not match the database: nothing was written."""

    code = "RECOVERY_REFUSED"


class RecoveryBlocked(Conflict):
    """A state upload of the run is unresolved; ``retry_after_seconds`` when it will
    expire by itself."""

    code = "RECOVERY_BLOCKED_BY_UPLOAD"

    def __init__(self, message: str, retry_after_seconds: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class RecoveryLeased(Conflict):
    code = "RECOVERY_LEASED"

    def __init__(self, run_id: str, holder: str, expires_at: datetime) -> None:
        super().__init__(
            f"the recovery of run {run_id} is prepared by {holder} and leased to them until "
            f"{expires_at.isoformat()}; after that, take it over with the same resolution "
            "and evidence"
        )
        self.lease_expires_at = expires_at

    def to_body(self) -> dict[str, str]:
        return {**super().to_body(), "lease_expires_at": self.lease_expires_at.isoformat()}


class RecoveryTargetCorrupt(RunplaneError):
    """The persisted target state no longer matches its digest: fail closed."""

    code = "RECOVERY_TARGET_CORRUPT"
    http_status = 409


# -- the request ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimedUpload:
    """A state upload whose JSON arrived but whose state never did, named exactly."""

    id: str
    claimed_at: str


@dataclass(frozen=True)
class RecoveryRequest:
    resolution: Resolution
    reason: str
    confirm_authority_revocation: bool
    # The workspace's current state version the operator verified (None: it has none).
    current_state_version_id: str | None
    emergency_state: bytes | None = None
    emergency_state_sha256: str | None = None
    discard_claimed_upload: ClaimedUpload | None = None
    acknowledge_state_loss: bool = False
    takeover: bool = False

    def fingerprint(self) -> str:
        """What makes two submissions the same request: the resolution and its evidence
        (not the reason, which each operator gives in their own words)."""
        evidence = {
            "resolution": self.resolution.value,
            "current_state_version_id": self.current_state_version_id,
            "emergency_state_sha256": self.emergency_sha256,
            "discard_claimed_upload": None
            if self.discard_claimed_upload is None
            else [self.discard_claimed_upload.id, self.discard_claimed_upload.claimed_at],
        }
        return hashlib.sha256(json.dumps(evidence, sort_keys=True).encode()).hexdigest()

    @property
    def emergency_sha256(self) -> str | None:
        if self.emergency_state is None:
            return None
        return hashlib.sha256(self.emergency_state).hexdigest()


def check_request(request: RecoveryRequest) -> None:
    """Refuse a request that cannot be valid whatever the database holds (422)."""
    if not request.reason.strip():
        raise InvalidInput("a recovery needs a reason", "/reason")
    if len(request.reason) > MAX_REASON:
        raise InvalidInput(f"the reason is longer than {MAX_REASON} characters", "/reason")
    if not request.confirm_authority_revocation:
        raise InvalidInput(
            "confirm that the run's authority is revoked and the workspace fence advanced",
            "/confirm_authority_revocation",
        )
    emergency = request.resolution is Resolution.IMPORT_EMERGENCY_STATE
    if emergency and request.emergency_state is None:
        raise InvalidInput("import_emergency_state needs the emergency state", "/emergency_state")
    if not emergency and request.emergency_state is not None:
        raise InvalidInput(
            "an emergency state is only imported with import_emergency_state", "/emergency_state"
        )
    if emergency and request.emergency_state_sha256 != request.emergency_sha256:
        raise InvalidInput(
            "emergency_state_sha256 must be the SHA-256 of the emergency state you reviewed",
            "/emergency_state_sha256",
        )
    if request.discard_claimed_upload is not None and not request.acknowledge_state_loss:
        raise InvalidInput(
            "discarding a claimed state upload can lose in-flight state: acknowledge it",
            "/acknowledge_state_loss",
        )


def require_recovery_rights(principal: Principal, workspace_id: str, now: datetime) -> None:
    principal.require(Permission.RUN_RECOVER, workspace_id)
    principal.require(Permission.STATE_RECOVER, workspace_id)
    if principal.auth_time is None or now - principal.auth_time > STEP_UP_WINDOW:
        raise StepUpRequired()


def lease_remaining_seconds(expires_at: datetime, now: datetime) -> int:
    """Seconds left on a lease, clamped to 0..900."""
    left = int((expires_at - now).total_seconds())
    return max(0, min(int(LEASE.total_seconds()), left))


# -- evidence ---------------------------------------------------------------------------------


def verify_chain(
    current_id: str | None, apply: ApplyIdentity, lookup: Callable[[str], Publication]
) -> int:
    """How many versions the interrupted apply published between its pinned predecessor
    and ``current_id``: every one must carry the exact run, attempt, sandbox, lock and
    fence and follow the previous one, at most ``MAX_CHAIN`` of them. Anything else is
    movement recovery cannot vouch for."""
    length = 0
    cursor = current_id
    while cursor != apply.predecessor_id:
        if cursor is None:
            raise RecoveryRefused(
                "the current state does not descend from the state the run pinned before "
                "applying; it cannot be verified as this apply's"
            )
        if length == MAX_CHAIN:
            raise RecoveryRefused(
                f"more than {MAX_CHAIN} state versions were published since the run's "
                "pinned state; recovery verifies at most that many"
            )
        version = lookup(cursor)
        if not published_by(version, apply):
            raise RecoveryRefused(
                f"state version {version.id} was not published by this run's apply "
                "(run, attempt, sandbox, lock and fence must all match); refusing to "
                "verify it"
            )
        length += 1
        cursor = version.predecessor_id
    return length


@dataclass(frozen=True)
class Snapshot:
    serial: int
    lineage: str


def read_snapshot(raw: bytes) -> Snapshot:
    """The serial and lineage of an emergency state, refusing anything that is not a state."""
    pointer = "/emergency_state"
    try:
        document = parse_json(raw)
    except (ValueError, RecursionError):
        raise StateRejected("the emergency state is not valid JSON", pointer) from None
    if not isinstance(document, dict):
        raise StateRejected("the emergency state must be a JSON object", pointer)
    serial, lineage = document.get("serial"), document.get("lineage")
    if not is_serial(serial) or not isinstance(serial, int) or not isinstance(lineage, str):
        raise StateRejected("the emergency state needs an integer serial and a lineage", pointer)
    check_state(raw, serial=serial, lineage=lineage, pointer=pointer)
    return Snapshot(serial, lineage)


def check_emergency_successor(snapshot: Snapshot, predecessor: Publication | None) -> None:
    """The emergency snapshot must be exactly the next version after the pinned one."""
    if predecessor is None:
        return
    if snapshot.lineage != predecessor.lineage:
        raise StateRejected(
            f"the emergency state's lineage {snapshot.lineage} is not the workspace's "
            f"lineage {predecessor.lineage}",
            "/emergency_state",
        )
    if snapshot.serial != predecessor.serial + 1:
        raise StateRejected(
            f"the emergency state's serial {snapshot.serial} is not the next serial "
            f"after the pre-apply state's {predecessor.serial}",
            "/emergency_state",
        )


# -- the stored record -----------------------------------------------------------------------


@dataclass(frozen=True)
class Recovery:
    """A run's durable recovery operation: prepared, leased to one operator at a time
    (each lease moves ``generation``), then completed; ``body`` is its document
    (``RecoveryBody.from_body``)."""

    id: str
    run_id: str
    organization_id: str
    workspace_id: str
    state: RecoveryState
    holder: str
    generation: int
    fingerprint: str
    lease_expires_at: datetime
    target_artifact_id: str | None
    body: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class RecoveryBody:
    """A recovery's document, typed: what prepare recorded (the verdict, its evidence
    and the lease's takeovers), then the completed result. ``to_body`` gives the
    document exactly as stored: the optional keys are absent until set."""

    resolution: str
    reason: str
    prepared_by: str
    current_state_version_id: str | None
    pre_apply_state_version_id: str | None
    takeovers: tuple[Mapping[str, object], ...] = ()
    # A claimed upload the operator named to discard: {"id", "claimed_at"}.
    discard_claimed_upload: Mapping[str, object] | None = None
    # Import only: the operator's snapshot's digest and size, and the version it becomes.
    emergency_sha256: str | None = None
    emergency_size: int | None = None
    target_state_version_id: str | None = None
    result: Mapping[str, object] | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> RecoveryBody:
        emergency, takeovers = body.get("emergency_state"), body.get("takeovers")
        emergency = emergency if isinstance(emergency, Mapping) else None
        size = emergency.get("size") if emergency else None
        return cls(
            resolution=str(body.get("resolution", "")),
            reason=str(body.get("reason", "")),
            prepared_by=str(body.get("prepared_by", "")),
            current_state_version_id=optional_text(body.get("current_state_version_id")),
            pre_apply_state_version_id=optional_text(body.get("pre_apply_state_version_id")),
            takeovers=tuple(dict(t) for t in takeovers or () if isinstance(t, Mapping))
            if isinstance(takeovers, list | tuple)
            else (),
            discard_claimed_upload=_opt_doc(body.get("discard_claimed_upload")),
            emergency_sha256=optional_text(emergency.get("sha256")) if emergency else None,
            emergency_size=size if isinstance(size, int) else None,
            target_state_version_id=optional_text(body.get("target_state_version_id")),
            result=_opt_doc(body.get("result")),
        )

    @property
    def emergency_state(self) -> dict[str, object] | None:
        if self.emergency_sha256 is None:
            return None
        return {"sha256": self.emergency_sha256, "size": self.emergency_size}

    def to_body(self) -> dict[str, object]:
        body: dict[str, object] = {
            "resolution": self.resolution,
            "reason": self.reason,
            "prepared_by": self.prepared_by,
            "current_state_version_id": self.current_state_version_id,
            "pre_apply_state_version_id": self.pre_apply_state_version_id,
            "takeovers": [dict(t) for t in self.takeovers],
        }
        optional = {
            "discard_claimed_upload": _doc(self.discard_claimed_upload),
            "emergency_state": self.emergency_state,
            "target_state_version_id": self.target_state_version_id,
            "result": _doc(self.result),
        }
        return body | {name: value for name, value in optional.items() if value is not None}


def _opt_doc(value: object) -> dict[str, object] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _doc(value: Mapping[str, object] | None) -> dict[str, object] | None:
    return None if value is None else dict(value)
