"""The parts of a run besides its status, each a small state machine of its own.

A run's attempts, plan evidence, approval and apply record are documents with a
state. Like the run transition table (domain/transitions.py), the tables here are
the only definition of which state moves a part may make: services name the move
they make and ``check_move`` refuses one the table does not hold. The store
conditions every write on the state it expects, so two racing writers cannot both
move a part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar

from runplane.domain.cloud_settings import PinnedCredentials
from runplane.domain.errors import IllegalPartMove, NotFound
from runplane.domain.run_options import RunOptions


class PartKind(StrEnum):
    ATTEMPT = "attempt"
    PLAN_EVIDENCE = "plan"
    APPROVAL = "approval"
    APPLY_RECORD = "apply"


class AttemptState(StrEnum):
    """One runner phase's sandbox: launched, then closed exactly once."""

    LAUNCHING = "launching"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # The workflow gave up on it (a timeout or failed step), or its sandbox stopped
    # before its result (services/sandbox_exits.py).
    LOST = "lost"
    # A retried start found a launch that was never recorded: failed closed.
    ABANDONED = "abandoned"
    # The run was canceled while it ran.
    STOPPED = "stopped"
    # A recovery took the run's writer authority.
    RECOVERED = "recovered"


class PlanEvidenceState(StrEnum):
    """A plan's artifacts and digests: written once, with the plan result."""

    COMMITTED = "committed"


class ApprovalState(StrEnum):
    """The approval of a plan, bound to its digests while it waits."""

    WAITING = "waiting"
    # One person approved a run that needs two: it waits for another person.
    WAITING_SECOND = "waiting_second"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELED = "canceled"


UNDECIDED: tuple[ApprovalState, ...] = (ApprovalState.WAITING, ApprovalState.WAITING_SECOND)
"""An approval no one has decided yet: a decision, an expiry or a cancellation ends it."""


class ApplyRecordState(StrEnum):
    """The apply record of a run that may apply, created pending with its plan."""

    PENDING = "pending"
    STARTING = "starting"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"
    # Nothing was or will be applied: the run ended before its apply could start.
    CLOSED = "closed"


# Attempt states in which a sandbox may be running (and holds its slots).
OPEN_ATTEMPT: frozenset[AttemptState] = frozenset({AttemptState.LAUNCHING, AttemptState.STARTED})
OPEN_APPLY_RECORD: frozenset[ApplyRecordState] = frozenset(
    {ApplyRecordState.PENDING, ApplyRecordState.STARTING, ApplyRecordState.STARTED}
)

PartState = AttemptState | PlanEvidenceState | ApprovalState | ApplyRecordState


@dataclass(frozen=True)
class PartMove:
    source: PartState
    target: PartState
    why: str


def _moves(
    sources: Iterable[PartState], targets: Iterable[PartState], why: str
) -> tuple[PartMove, ...]:
    return tuple(PartMove(s, t, why) for s in sources for t in targets)


A, P, R = AttemptState, ApprovalState, ApplyRecordState
# In table order (the sets above have none, and the docs render these rows).
_OPEN_A = (A.LAUNCHING, A.STARTED)
_OPEN_R = (R.PENDING, R.STARTING, R.STARTED)

ATTEMPT_MOVES: tuple[PartMove, ...] = (
    PartMove(A.LAUNCHING, A.STARTED, "the sandbox launched"),
    *_moves(_OPEN_A, (A.SUCCEEDED, A.FAILED), "the runner reported its result"),
    *_moves(_OPEN_A, (A.LOST,), "the workflow step failed or timed out, or the sandbox stopped"),
    PartMove(A.LAUNCHING, A.ABANDONED, "a retried start cannot prove the launch"),
    *_moves(_OPEN_A, (A.STOPPED,), "the run was canceled"),
    *_moves(_OPEN_A, (A.RECOVERED,), "a recovery took the writer authority"),
)

PLAN_EVIDENCE_MOVES: tuple[PartMove, ...] = ()

APPROVAL_MOVES: tuple[PartMove, ...] = (
    PartMove(P.WAITING, P.WAITING_SECOND, "a first person approved a run that needs two"),
    *_moves(UNDECIDED, (P.APPROVED,), "the last person needed approved the bound plan"),
    *_moves(UNDECIDED, (P.REJECTED,), "a person rejected the plan"),
    *_moves(UNDECIDED, (P.EXPIRED,), "the deadline passed without a decision"),
    *_moves(UNDECIDED, (P.CANCELED,), "the run was canceled"),
)

APPLY_RECORD_MOVES: tuple[PartMove, ...] = (
    PartMove(R.PENDING, R.STARTING, "the apply runner launched"),
    PartMove(R.STARTING, R.STARTED, "the runner redeemed its apply start"),
    PartMove(R.STARTED, R.SUCCEEDED, "the apply published confirmed state"),
    *_moves((R.STARTED,), (R.FAILED, R.UNCERTAIN), "the runner reported its result"),
    *_moves(_OPEN_R, (R.FAILED, R.UNCERTAIN, R.CLOSED), "the run ended"),
)

MOVES: Mapping[PartKind, tuple[PartMove, ...]] = MappingProxyType(
    {
        PartKind.ATTEMPT: ATTEMPT_MOVES,
        PartKind.PLAN_EVIDENCE: PLAN_EVIDENCE_MOVES,
        PartKind.APPROVAL: APPROVAL_MOVES,
        PartKind.APPLY_RECORD: APPLY_RECORD_MOVES,
    }
)

CREATED_AS: Mapping[PartKind, PartState] = MappingProxyType(
    {
        PartKind.ATTEMPT: A.LAUNCHING,
        PartKind.PLAN_EVIDENCE: PlanEvidenceState.COMMITTED,
        PartKind.APPROVAL: P.WAITING,
        PartKind.APPLY_RECORD: R.PENDING,
    }
)

_ALLOWED: Mapping[PartKind, frozenset[tuple[str, str]]] = MappingProxyType(
    {
        kind: frozenset((m.source.value, m.target.value) for m in rows)
        for kind, rows in MOVES.items()
    }
)


def allows(kind: PartKind, source: str, target: str) -> bool:
    return (source, target) in _ALLOWED[kind]


def check_move(kind: PartKind, source: str, target: str) -> None:
    """Refuse a move of a ``kind`` part that its table does not hold."""
    if not allows(kind, source, target):
        raise IllegalPartMove(kind.value, source, target)


# -- bodies -----------------------------------------------------------------------------------
#
# Each part's document, typed. ``from_body`` reads the stored document; ``to_body``
# gives the document exactly as it is stored (keys and all), so the item shapes
# stay what they were.


@dataclass(frozen=True)
class RunPart:
    """One part of a run as stored: its state and its document, read through the typed
    bodies below (``AttemptBody.from_body(part.body)``, ...)."""

    run_id: str
    name: str
    state: str
    body: dict[str, Any]
    token: str | None
    created_at: datetime
    updated_at: datetime
    # An attempt's runner sessions (their items' keys), as the store's ``note_session``
    # added them.
    session_keys: frozenset[str] = frozenset()


def optional_text(value: object) -> str | None:
    """A stored body's optional field as text (None stays None)."""
    return None if value is None else str(value)


@dataclass(frozen=True)
class AttemptBody:
    attempt_id: str
    sandbox_id: str
    phase: str
    launched_at: str
    slots: tuple[str, ...] = ()
    # Apply attempts only: the apply lock granted to this attempt.
    lock_id: str | None = None
    fence: int | None = None
    sandbox_ref: str | None = None
    # Set when the attempt closes: when, and what the runner said of a failure.
    finished_at: str | None = None
    reason: str | None = None
    # Set when the runner's report closed it: its final log and engine time. A report
    # writes all three keys of its evidence, null when it had none (``reported``).
    log_artifact_id: str | None = None
    engine_seconds: float | None = None
    reported: bool = False
    # Set when an apply's report named a log it could not vouch for: why it was dropped
    # (``domain.report_evidence``); the outcome itself was taken.
    log_refused: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> AttemptBody:
        fence = body.get("fence")
        slots = body.get("slots") or ()
        return cls(
            attempt_id=str(body["attempt_id"]),
            sandbox_id=str(body["sandbox_id"]),
            phase=str(body.get("phase", "")),
            launched_at=str(body.get("launched_at", "")),
            slots=tuple(str(s) for s in slots) if isinstance(slots, list | tuple) else (),
            lock_id=optional_text(body.get("lock_id")),
            fence=int(fence) if isinstance(fence, int | str) else None,
            sandbox_ref=optional_text(body.get("sandbox_ref")),
            finished_at=optional_text(body.get("finished_at")),
            reason=optional_text(body.get("reason")),
            log_artifact_id=optional_text(body.get("log_artifact_id")),
            engine_seconds=_opt_number(body.get("engine_seconds")),
            reported="engine_seconds" in body or "log_artifact_id" in body,
            log_refused=optional_text(body.get("log_refused")),
        )

    def to_body(self) -> dict[str, object]:
        body: dict[str, object] = {
            "attempt_id": self.attempt_id,
            "sandbox_id": self.sandbox_id,
            "phase": self.phase,
            "launched_at": self.launched_at,
            "slots": list(self.slots),
        }
        if self.lock_id is not None:
            body.update({"lock_id": self.lock_id, "fence": self.fence})
        if self.sandbox_ref is not None:
            body["sandbox_ref"] = self.sandbox_ref
        body |= _present(finished_at=self.finished_at)
        if not self.reported:
            return body | _present(reason=self.reason)
        return (
            body
            | {
                "log_artifact_id": self.log_artifact_id,
                "engine_seconds": self.engine_seconds,
                "reason": self.reason,
            }
            | _present(log_refused=self.log_refused)
        )


@dataclass(frozen=True)
class PlanEvidence:
    attempt_id: str
    plan_artifact_id: str
    plan_sha256: str
    plan_json_artifact_id: str
    plan_json_sha256: str
    log_artifact_id: str | None
    summary: Mapping[str, object]
    has_changes: bool
    engine_version: str | None
    predecessor_state_version_id: str | None

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> PlanEvidence:
        summary = body.get("summary")
        return cls(
            attempt_id=str(body["attempt_id"]),
            plan_artifact_id=str(body["plan_artifact_id"]),
            plan_sha256=str(body["plan_sha256"]),
            plan_json_artifact_id=str(body["plan_json_artifact_id"]),
            plan_json_sha256=str(body["plan_json_sha256"]),
            log_artifact_id=optional_text(body.get("log_artifact_id")),
            summary=dict(summary) if isinstance(summary, Mapping) else {},
            has_changes=bool(body.get("has_changes")),
            engine_version=optional_text(body.get("engine_version")),
            predecessor_state_version_id=optional_text(body.get("predecessor_state_version_id")),
        )

    def to_body(self) -> dict[str, object]:
        return {
            "attempt_id": self.attempt_id,
            "plan_artifact_id": self.plan_artifact_id,
            "plan_sha256": self.plan_sha256,
            "plan_json_artifact_id": self.plan_json_artifact_id,
            "plan_json_sha256": self.plan_json_sha256,
            "log_artifact_id": self.log_artifact_id,
            "summary": dict(self.summary),
            "has_changes": self.has_changes,
            "engine_version": self.engine_version,
            "predecessor_state_version_id": self.predecessor_state_version_id,
        }


@dataclass(frozen=True)
class ApprovalBinding:
    """What an approval holds for: the exact plan, predecessor and policy evidence."""

    plan_sha256: str
    predecessor_state_version_id: str | None
    policy_input_digest: str | None
    policy_result_digest: str | None
    # Who overrode a soft-mandatory policy failure, and why (set by the override).
    policy_override: Mapping[str, object] | None = None

    @classmethod
    def from_body(cls, bound: Mapping[str, object]) -> ApprovalBinding:
        override = bound.get("policy_override")
        return cls(
            plan_sha256=str(bound.get("plan_sha256", "")),
            predecessor_state_version_id=optional_text(bound.get("predecessor_state_version_id")),
            policy_input_digest=optional_text(bound.get("policy_input_digest")),
            policy_result_digest=optional_text(bound.get("policy_result_digest")),
            policy_override=dict(override) if isinstance(override, Mapping) else None,
        )

    def to_body(self) -> dict[str, object]:
        body: dict[str, object] = {
            "plan_sha256": self.plan_sha256,
            "predecessor_state_version_id": self.predecessor_state_version_id,
            "policy_input_digest": self.policy_input_digest,
            "policy_result_digest": self.policy_result_digest,
        }
        if self.policy_override is not None:
            body["policy_override"] = dict(self.policy_override)
        return body

    def differs(self, expected: Mapping[str, object]) -> str | None:
        """The first field of ``expected`` this binding does not hold (None: all match)."""
        held = self.to_body()
        return next((name for name, value in expected.items() if held.get(name) != value), None)


@dataclass(frozen=True)
class ApprovalBody:
    expires_at: str
    binding: ApprovalBinding
    decision: str | None = None
    decided_by: str | None = None
    decided_at: str | None = None
    comment: str | None = None
    # The two-person rule (domain/second_approval.py), decided when the approval was
    # created: how many distinct people must approve, why, and the first approval.
    approvals_required: int = 1
    second_approval_reason: str | None = None
    first_approval: Mapping[str, str] | None = None
    # Separation of duties, as the workspace had it when the approval was created: the
    # run's creator may not approve it.
    separation_of_duties: bool = False

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> ApprovalBody:
        raw = body.get("binding")
        first = body.get("first_approval")
        required = body.get("approvals_required", 1)
        return cls(
            expires_at=str(body.get("expires_at", "")),
            binding=ApprovalBinding.from_body(raw if isinstance(raw, Mapping) else {}),
            decision=optional_text(body.get("decision")),
            decided_by=optional_text(body.get("decided_by")),
            decided_at=optional_text(body.get("decided_at")),
            comment=optional_text(body.get("comment")),
            approvals_required=int(required) if isinstance(required, int | Decimal) else 1,
            second_approval_reason=optional_text(body.get("second_approval_reason")),
            first_approval=(
                {str(k): str(v) for k, v in first.items()} if isinstance(first, Mapping) else None
            ),
            separation_of_duties=body.get("separation_of_duties") is True,
        )

    def to_body(self) -> dict[str, object]:
        body: dict[str, object] = {"expires_at": self.expires_at, "binding": self.binding.to_body()}
        if self.approvals_required != 1:
            body["approvals_required"] = self.approvals_required
        if self.separation_of_duties:
            body["separation_of_duties"] = True
        return body | _present(
            decision=self.decision,
            decided_by=self.decided_by,
            decided_at=self.decided_at,
            comment=self.comment,
            second_approval_reason=self.second_approval_reason,
            first_approval=None if self.first_approval is None else dict(self.first_approval),
        )


@dataclass(frozen=True)
class ApplyRecord:
    """Which attempt, lock and fence applied, and what state it published."""

    resulting_state_version_id: str | None = None
    attempt_id: str | None = None
    lock_id: str | None = None
    fence: int | None = None
    # Set as the record closes: why, whether state was published, how the run ended.
    reason: str | None = None
    state_published: bool | None = None
    run_status: str | None = None
    # Set by a recovery: the run's apply authorization was revoked, and by which one.
    authorization: str | None = None
    recovery_id: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> ApplyRecord:
        fence = body.get("fence")
        published = body.get("state_published")
        return cls(
            resulting_state_version_id=optional_text(body.get("resulting_state_version_id")),
            attempt_id=optional_text(body.get("attempt_id")),
            lock_id=optional_text(body.get("lock_id")),
            fence=int(fence) if isinstance(fence, int | str) else None,
            reason=optional_text(body.get("reason")),
            state_published=published if isinstance(published, bool) else None,
            run_status=optional_text(body.get("run_status")),
            authorization=optional_text(body.get("authorization")),
            recovery_id=optional_text(body.get("recovery_id")),
        )

    def to_body(self) -> dict[str, object]:
        closing = _present(
            state_published=self.state_published,
            reason=self.reason,
            run_status=self.run_status,
            authorization=self.authorization,
            recovery_id=self.recovery_id,
        )
        if self.state_published is not None:
            # The runner's report writes its reason with the publication, null or not.
            closing["reason"] = self.reason
        if self.attempt_id is None:
            return {"resulting_state_version_id": self.resulting_state_version_id} | closing
        return {
            "attempt_id": self.attempt_id,
            "lock_id": self.lock_id,
            "fence": self.fence,
            "resulting_state_version_id": self.resulting_state_version_id,
        } | closing


@dataclass(frozen=True)
class PolicyCheck:
    """The run's policy check: reserved with its plan, bound to the sanitized input's
    digest, then the evaluation's evidence and, for a soft failure, its override."""

    id: str
    input_digest: str | None = None
    # Set when the results are recorded (``result_digest`` covers the four before it).
    outcome: str | None = None
    policy_sets: tuple[Mapping[str, object], ...] | None = None
    runtime: str | None = None
    results: tuple[Mapping[str, object], ...] | None = None
    result_digest: str | None = None
    # Who overrode a soft-mandatory failure, when and why.
    override: Mapping[str, object] | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> PolicyCheck:
        override = body.get("override")
        return cls(
            id=str(body.get("id", "")),
            input_digest=optional_text(body.get("input_digest")),
            outcome=optional_text(body.get("outcome")),
            policy_sets=_documents(body.get("policy_sets")),
            runtime=optional_text(body.get("runtime")),
            results=_documents(body.get("results")),
            result_digest=optional_text(body.get("result_digest")),
            override=dict(override) if isinstance(override, Mapping) else None,
        )

    def to_body(self) -> dict[str, object]:
        def listed(docs: tuple[Mapping[str, object], ...] | None) -> list[object] | None:
            return None if docs is None else [dict(d) for d in docs]

        return {"id": self.id, "input_digest": self.input_digest} | _present(
            outcome=self.outcome,
            policy_sets=listed(self.policy_sets),
            runtime=self.runtime,
            results=listed(self.results),
            result_digest=self.result_digest,
            override=dict(self.override) if self.override is not None else None,
        )


@dataclass(frozen=True)
class RunInput:
    """The run's input snapshot, pinned at creation: what plan and apply read.

    The fields named here are the ones read back; ``extra`` keeps the rest of the
    document (where the run came from: a source, a trigger's details) as stored.
    """

    configuration_version_id: str | None = None
    configuration_artifact_id: str | None = None
    configuration_sha256: str | None = None
    variables_artifact_id: str | None = None
    variable_names: tuple[str, ...] = ()
    workspace_variable_names: tuple[str, ...] = ()
    engine_version: str | None = None
    message: str | None = None
    # A remote operation (the TFE CLI), as opposed to a run made through our API.
    source: str | None = None
    # Set when a run trigger or a schedule created the run.
    trigger: Mapping[str, object] | None = None
    schedule: Mapping[str, object] | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    _OPTIONAL: ClassVar[tuple[str, ...]] = (
        "configuration_version_id",
        "configuration_artifact_id",
        "configuration_sha256",
        "variables_artifact_id",
        "engine_version",
        "message",
        "source",
    )

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> RunInput:
        trigger, schedule = body.get("trigger"), body.get("schedule")
        named = {*cls._OPTIONAL, "variable_names", "workspace_variable_names"}
        return cls(
            **{name: optional_text(body.get(name)) for name in cls._OPTIONAL},
            variable_names=_strings(body.get("variable_names")),
            workspace_variable_names=_strings(body.get("workspace_variable_names")),
            trigger=dict(trigger) if isinstance(trigger, Mapping) else None,
            schedule=dict(schedule) if isinstance(schedule, Mapping) else None,
            extra={k: v for k, v in body.items() if k not in named | {"trigger", "schedule"}},
        )

    @property
    def credentials(self) -> PinnedCredentials:
        """The credential decisions the run pinned at creation (none for a run created
        before runs pinned them), kept in ``extra`` like the sensitive names."""
        return PinnedCredentials.from_input(self.extra)

    @property
    def options(self) -> RunOptions:
        """The plan options the run pinned (the defaults for a run created without any,
        or before runs had them), kept in ``extra``."""
        return RunOptions.from_body(self.extra.get("options"))

    @property
    def sensitive_variable_names(self) -> tuple[str, ...]:
        """The variables the engine is told are sensitive: the workspace's sensitive
        ones (empty for a run created before runs recorded them). Kept in ``extra`` so
        that a document without the key reads and writes back unchanged."""
        return _strings(self.extra.get("sensitive_variable_names"))

    @property
    def variable_entries(self) -> tuple[Mapping[str, object], ...]:
        """Each variable's name, category, source (with its variable set) and
        sensitivity, as the run's creation resolved them (empty for a run created before
        runs recorded them: its ``variable_names`` are Terraform variables). Kept in
        ``extra``, like ``sensitive_variable_names``."""
        entries = _documents(self.extra.get("variables"))
        return tuple(e for e in entries or () if isinstance(e.get("name"), str))

    def to_body(self) -> dict[str, object]:
        body: dict[str, object] = dict(self.extra)
        body.update({name: getattr(self, name) for name in self._OPTIONAL})
        body["variable_names"] = list(self.variable_names)
        body["workspace_variable_names"] = list(self.workspace_variable_names)
        # Absent keys stay absent, as creation wrote them only when they had a value.
        return {k: v for k, v in body.items() if v is not None or k in self._ALWAYS} | _present(
            trigger=dict(self.trigger) if self.trigger is not None else None,
            schedule=dict(self.schedule) if self.schedule is not None else None,
        )

    # Written at creation even without a value; the other named keys only with one.
    _ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {
            "configuration_version_id",
            "configuration_artifact_id",
            "configuration_sha256",
            "variables_artifact_id",
            "engine_version",
        }
    )


def _opt_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _documents(value: object) -> tuple[Mapping[str, object], ...] | None:
    if not isinstance(value, list | tuple):
        return None
    return tuple(dict(v) for v in value if isinstance(v, Mapping))


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _present(**fields: object) -> dict[str, object]:
    """The fields that have a value: a part's later keys are absent until set."""
    return {name: value for name, value in fields.items() if value is not None}


def required_part(parts: Mapping[str, RunPart | None], run_id: str, name: str) -> RunPart:
    """A part the run must have, from ``parts`` read together (``NotFound`` if absent)."""
    part = parts.get(name)
    if part is None:
        raise NotFound(f"{name} of run", run_id)
    return part
