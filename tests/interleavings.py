"""Seeded interleavings of approval decisions, cancellations, approval expiries, new runs,
apply results, recoveries and deadlines, with the run lifecycle's invariants checked after
every step.

A *schedule* is a world (one organization, one or two workspaces, runs brought to
awaiting approval the way the workflow brings them) and a sequence of operations drawn
from a seeded ``random.Random``: decisions by two reviewers with the reviewed binding, a
stale one or none; a decision split at its read (the review read first, other operations
committed, then the decision with what was read); a decision whose read another operation
lands behind (``FakeClock.on_next_reading``: between the decision's read and its write);
a cancellation (``Runs.cancel``) of any run in any state by a reviewer; the approval's
expiry (``WorkflowSteps.arbitrate_expiry``) of a run that had an approval; a cancellation
or an expiry whose read another operation (a decision, a cancellation, an expiry, the
apply's result, a deadline passing) lands behind; a new run queued behind the workspace's
writer; the workflow planning the run that holds the writer, applying an approved run
(which hands the writer on), or starting the apply (an open attempt holding a sandbox slot
and a runner session) and reporting its result later, or again once the run succeeded (a
duplicated report); an operator recovering an apply_interrupted run (``Recoveries.recover``:
the writer authority it kept ends, the fence advances, the writer goes to the run first in
line), replaying that recovery, or trying to recover any other run; the clock passing
approval deadlines.

After every step (``Schedule.check``) the state as the backend holds it is read back and:
at most one run of a workspace is past the writer wait (an apply_interrupted run counts:
it keeps the writer authority) and it is the holder, every queued run holds or waits, no
other ended run (canceled, expired...) holds or waits, nobody waits while no run holds;
the sandbox slots taken are the open attempts, an open attempt's runner session is not
revoked and a closed one's is; terminal statuses stay terminal; each
status change is a move of ``domain/transitions.py`` (one version per move), versions and
fences never decrease; a refused operation (any ``RunplaneError``) changed nothing; an
approved run's approval binds the plan and policy digests the decider reviewed, decided
by the one decision that succeeded, a canceled approval's run is canceled, an expired
approval's run expired; each decision's, cancellation's and expiry's outcome is the one the
run's state called for (for one another operation landed inside: the state it left), and
an expiry that did not expire the run wrote nothing; a recovery advances the fence by
exactly one and hands the writer to the run first in line (and wakes it), its replay
answers the same and writes nothing, and a recovered run no longer counts as a writer.
The runner's result is the workflow's step here (its attempt closed with the move), not
the runner report service; the state a run publishes is not modelled.

The same schedules run over the in-memory unit of work (tests/service/test_interleavings.py,
thousands of them) and over DynamoDB on moto (tests/integration/test_interleavings_moto.py,
a few), through a ``Backend`` each file builds. A failing schedule names its seed and its
steps; ``RUNPLANE_INTERLEAVING_SEED=<seed>`` runs that one schedule again.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cache
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from runplane.domain import transitions
from runplane.domain.entities import Run
from runplane.domain.errors import (
    AlreadyDecided,
    ApprovalExpired,
    Conflict,
    PolicyOverrideRequired,
    RunEnded,
    RunplaneError,
    SameApprover,
)
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.parts import UNDECIDED, ApprovalState, AttemptBody, AttemptState, RunPart
from runplane.domain.recovery import NotRecoverable, RecoveryRequest, Resolution
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.runner_reports import Applied
from runplane.domain.state import FINALIZED, StateVersion
from runplane.services.runs import Decision
from tests.fakes import FakeClock, seeded_letters

SEED_VARIABLE = "RUNPLANE_INTERLEAVING_SEED"

# Statuses past the writer wait: only the holder of the reservation may be in one.
PAST_THE_WAIT = frozenset(
    {
        RunStatus.PLANNING,
        RunStatus.PLAN_COMPLETE,
        RunStatus.POLICY_EVALUATING,
        RunStatus.POLICY_PASSED,
        RunStatus.AWAITING_APPROVAL,
        RunStatus.APPLYING,
    }
)
# Each status's reachable statuses (``transitions.reachable_from``), walked once.
_REACHABLE = {status: transitions.reachable_from(status) for status in RunStatus}
_TERMINAL = frozenset(status for status in RunStatus if status.is_terminal)
POLICY_STATES: tuple[str | None, ...] = ("passed", "passed", "soft_failed", None)
REVIEWERS = ("bob", "carol")
MAX_RUNS = 7
# The apply's attempt: open while the apply runs, holding a sandbox slot and a session.
ATTEMPT = "attempt#apply"
OPEN_ATTEMPT = frozenset({AttemptState.LAUNCHING, AttemptState.STARTED})
# A run ended by a reviewer or its deadline: it neither holds the writer nor waits.
_ENDED_BY_REVIEW = frozenset({RunStatus.CANCELED, RunStatus.EXPIRED})
# Where an approved run may be.
_APPROVED_RUN = frozenset(
    {
        RunStatus.AWAITING_APPROVAL,
        RunStatus.APPLYING,
        RunStatus.SUCCEEDED,
        # Canceled after the approval, before or during the apply.
        RunStatus.CANCELED,
        RunStatus.APPLY_INTERRUPTED,
    }
)
_ENDED_APPROVAL = frozenset({ApprovalState.CANCELED, ApprovalState.EXPIRED})


def replay_seed() -> int | None:
    """The one seed to replay, when ``RUNPLANE_INTERLEAVING_SEED`` names one."""
    raw = os.environ.get(SEED_VARIABLE, "").strip()
    return int(raw) if raw else None


class RunView(NamedTuple):
    """One run as the backend holds it (a tuple: each step reads every run)."""

    workspace_id: str
    status: RunStatus
    version: int
    approval: str | None
    binding: Mapping[str, object] | None
    decided_by: str | None
    approval_token: str | None
    # The apply's attempt: its state and the runner sessions it holds.
    attempt: str | None = None
    sessions: frozenset[str] = frozenset()
    # Who gave the first of two approvals a run needs (None: no one, or one is needed).
    first_by: str | None = None

    @classmethod
    def of(cls, run: Run, parts: Mapping[str, RunPart]) -> RunView:
        approval = parts.get("approval")
        body = approval.body if approval else {}
        binding = body.get("binding")
        attempt = parts.get(ATTEMPT)
        first = body.get("first_approval")
        return cls(
            run.workspace_id,
            run.status,
            run.version,
            approval.state if approval else None,
            dict(binding) if type(binding) is dict or isinstance(binding, Mapping) else None,
            str(body["decided_by"]) if body.get("decided_by") else None,
            approval.token if approval else None,
            attempt.state if attempt else None,
            attempt.session_keys if attempt else frozenset(),
            str(first["by"]) if isinstance(first, Mapping) and first.get("by") else None,
        )


class Observed(NamedTuple):
    """The world as the backend holds it after a step (a tuple: each step reads one)."""

    runs: dict[str, RunView]
    holders: dict[str, str | None]
    waiting: dict[str, tuple[str, ...]]
    fences: dict[str, int]
    # Sandboxes running per slot scope; each runner session held, and whether revoked.
    slots: Mapping[str, int] = MappingProxyType({})
    sessions: Mapping[str, bool] = MappingProxyType({})


class Backend(Protocol):
    """What a schedule drives: the real ``Runs.decide`` and the workflow's steps, over one
    unit of work implementation, and what it reads back."""

    @property
    def clock(self) -> FakeClock: ...

    @property
    def organization_id(self) -> str: ...

    @property
    def workspace_ids(self) -> Sequence[str]: ...

    def reset(self) -> None:
        """A new world: one organization, two workspaces, nothing else."""

    def create(self, run: Run) -> None:
        """Record ``run`` (dispatch_pending) with its input, as ``Runs.create`` does."""

    def move(self, run_id: str, target: RunStatus, updates: Mapping[str, Any] | None) -> None:
        """The workflow's move of the run as it is now (no writer effect)."""

    def reserve(self, run: Run, token: str) -> None:
        """The workflow's wait for the workspace writer: taken, or queued behind it."""

    def put_part(
        self, run_id: str, name: str, state: str, body: Mapping[str, Any], token: str | None
    ) -> None:
        """A part written through a unit of work, as the workflow writes it."""

    def finish(self, run_id: str, target: RunStatus) -> None:
        """The workflow's move through a unit of work, handing the writer on if it releases."""

    def start_apply(self, run_id: str, reference: str) -> None:
        """The workflow's move to applying, and the apply's attempt opened in sandbox
        ``reference``: a sandbox slot taken (and, where the backend holds them, a runner
        session)."""

    def end_apply(self, run_id: str) -> None:
        """The apply's result: its attempt closed as succeeded and the run's move to
        succeeded in one unit of work (refused when the run moved meanwhile)."""

    def cancel(self, principal: Principal, run_id: str) -> Run:
        """``Runs.cancel``."""
        ...

    def expire(self, run_id: str) -> Mapping[str, Any]:
        """``WorkflowSteps.arbitrate_expiry``."""
        ...

    def stopped(self) -> list[str]:
        """The sandboxes stopped so far (by reference), in order."""
        ...

    def decide(
        self, principal: Principal, run_id: str, decision: str, binding: Mapping[str, object] | None
    ) -> Decision:
        """``Runs.decide``."""
        ...

    def recover(self, principal: Principal, run_id: str) -> Mapping[str, Any]:
        """``Recoveries.recover`` of the run, verifying the workspace's current state
        (these worlds have none) as the truth."""
        ...

    def resumed(self) -> list[str]:
        """The workflow tokens resumed so far, in order."""
        ...

    def snapshot(self) -> object:
        """Everything written so far, comparable with ``==``."""
        ...

    def observe(self, run_ids: Sequence[str]) -> Observed: ...


@dataclass
class Tracked:
    """A run of the world, as the schedule made it."""

    name: str
    id: str
    workspace_id: str
    token: str
    binding: dict[str, object] | None = None
    deadline: datetime | None = None
    policy: str | None = None
    # How many people must approve it (the two-person rule), and who approved first.
    required: int = 1
    first: str | None = None


@dataclass
class Read:
    """A decision split at its read: what the reviewer read, decided on later."""

    reviewer: str
    run: Tracked
    decision: str
    binding: dict[str, object] | None


@dataclass
class Succeeded:
    reviewer: str
    decision: str
    submitted: Mapping[str, object] | None


class InvariantBroken(AssertionError):
    pass


# A decision's outcome: the refusal it meets, "ok", or None (either may happen).
Expected = type[RunplaneError] | str | None
DECISION_REFUSALS = (
    AlreadyDecided,
    ApprovalExpired,
    Conflict,
    PolicyOverrideRequired,
    SameApprover,
)


@dataclass
class Schedule:
    backend: Backend
    seed: int
    length: int
    rng: random.Random = field(init=False)
    steps: list[str] = field(default_factory=list)
    runs: list[Tracked] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    history: dict[str, list[RunStatus]] = field(default_factory=dict)
    decided: dict[str, Succeeded] = field(default_factory=dict)
    last: Observed | None = None
    # How each kind of decision ended, to show what the schedules reached.
    tally: Counter[str] = field(default_factory=Counter)
    _inner_after: object | None = None
    # What the backend held when the current step began.
    _before: object | None = None
    _plans: int = 0
    # The step whose outcome is being checked (steps nest when one lands inside another).
    _at: int = 0
    # Runs recovered: they keep their status as history, no longer the writer authority.
    recovered: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    # -- the run ---------------------------------------------------------------------

    def play(self) -> None:
        """Build the world and run the schedule, checking after every step; a broken
        invariant or an unexpected error is reported with the seed and the steps."""
        try:
            self._world()
            for _ in range(self.length):
                self._one()
        except AssertionError as broken:
            # The report says it all: the seed, each step and its outcome, what broke.
            raise InvariantBroken(self.report(broken)) from None
        except Exception as error:
            raise InvariantBroken(self.report(error)) from error

    def report(self, error: BaseException) -> str:
        steps = "\n".join(f"  {n:>2}. {step}" for n, step in enumerate(self.steps, 1))
        histories = "\n".join(
            f"  {t.name}: {' -> '.join(self.history.get(t.id, []))}" for t in self.runs
        )
        return (
            f"interleaving seed {self.seed} failed at step {self._at}: "
            f"{type(error).__name__}: {error}\n"
            f"steps:\n{steps}\n"
            f"statuses as last read:\n{histories}\n"
            f"replay: {SEED_VARIABLE}={self.seed} pytest <this test file>"
        )

    def _world(self) -> None:
        workspaces = self.backend.workspace_ids[: self.rng.choice((1, 2))]
        for workspace_id in workspaces:
            first = self._new_run(workspace_id)
            self._plan(first)
            if self.rng.random() < 0.7:
                self._new_run(workspace_id)

    def _one(self) -> None:
        assert self.last is not None
        views = self.last.runs
        # The runs in each status the operations draw from, in the order they were made.
        by_status: dict[RunStatus, list[Tracked]] = {}
        for t in self.runs:
            by_status.setdefault(views[t.id].status, []).append(t)
        awaiting = by_status.get(RunStatus.AWAITING_APPROVAL, [])
        plannable = [t for t in by_status.get(RunStatus.QUEUED, ()) if self._plannable(t)]
        approved = [t for t in awaiting if views[t.id].approval == ApprovalState.APPROVED]
        applying = by_status.get(RunStatus.APPLYING, [])
        interrupted = by_status.get(RunStatus.APPLY_INTERRUPTED, [])
        succeeded = by_status.get(RunStatus.SUCCEEDED, [])
        choices: list[tuple[float, Callable[[], object]]] = [
            (5.0, self._decide_now),
            (2.0, self._review),
            (3.0 if self.reads else 0.0, self._decide_read),
            (3.5 if awaiting else 0.0, self._race),
            (1.5 if len(self.runs) < MAX_RUNS else 0.0, self._queue_new_run),
            (3.0 if plannable else 0.0, lambda: self._plan(self.rng.choice(plannable))),
            (1.0 if approved else 0.0, lambda: self._apply(self.rng.choice(approved))),
            (1.5 if approved else 0.0, lambda: self._start_apply(self.rng.choice(approved))),
            (1.5 if applying else 0.0, lambda: self._end_apply(self.rng.choice(applying))),
            (2.0 if applying else 0.0, lambda: self._apply_race(self.rng.choice(applying))),
            (0.5 if interrupted else 0.0, lambda: self._end_apply(self.rng.choice(interrupted))),
            (1.0 if applying else 0.0, lambda: self._cancel_apply(self.rng.choice(applying))),
            (3.0 if interrupted else 0.1, self._recover),
            (0.5 if succeeded else 0.0, lambda: self._late_result(self.rng.choice(succeeded))),
            (1.0, self._advance),
            (1.0 if awaiting else 0.0, lambda: self._to_deadline(self.rng.choice(awaiting))),
            (2.0, self._cancel_now),
            (1.5, self._expire_now),
        ]
        weights = [weight for weight, _ in choices]
        [(_, operation)] = self.rng.choices(choices, weights=weights)
        operation()

    # -- operations ------------------------------------------------------------------

    def _pick_run(self) -> Tracked:
        awaiting = [t for t in self.runs if self._status(t) is RunStatus.AWAITING_APPROVAL]
        if awaiting and self.rng.random() < 0.75:
            return self.rng.choice(awaiting)
        return self.rng.choice(self.runs)

    def _binding_for(self, run: Tracked) -> tuple[str, dict[str, object] | None]:
        """A binding to decide with: the one reviewed now, a stale one, or none."""
        kind = self.rng.choices(("reviewed", "stale", "none"), weights=(6, 2, 2))[0]
        current = self._view(run).binding
        if kind == "none" or current is None:
            return "no binding", None
        if kind == "reviewed":
            return "the reviewed binding", dict(current)
        field_name = self.rng.choice(("plan_sha256", "policy_result_digest"))
        return f"a stale {field_name}", {**current, field_name: f"stale-{self.rng.randrange(99)}"}

    def _decide_now(self) -> None:
        run = self._pick_run()
        reviewer = self.rng.choice(REVIEWERS)
        decision = self.rng.choice(("approve", "reject"))
        described, binding = self._binding_for(run)
        expected = self._expected(run, decision, binding, reviewer)
        self._decide(reviewer, run, decision, binding, f"with {described}", expected)

    def _review(self) -> None:
        run = self._pick_run()
        reviewer = self.rng.choice(REVIEWERS)
        decision = self.rng.choice(("approve", "reject"))

        def read() -> None:
            # What the reviewer saw: the approval's binding as the run holds it now.
            binding = self._view(run).binding
            self.reads.append(
                Read(reviewer, run, decision, None if binding is None else dict(binding))
            )

        self._step(f"{reviewer} reviews {run.name} (to {decision} later)", read)

    def _decide_read(self) -> None:
        read = self.reads.pop(self.rng.randrange(len(self.reads)))
        expected = self._expected(read.run, read.decision, read.binding, read.reviewer)
        self._decide(
            read.reviewer,
            read.run,
            read.decision,
            read.binding,
            "with the binding read earlier",
            expected,
        )

    def _race(self) -> None:
        """A decision, a cancellation or an expiry that reads the run, then another
        operation commits, then it writes: the other operation runs at its first clock
        reading. An expiry in the race may find the clock moved to the deadline first,
        or to just before it (the deadline then passing after the other operation)."""
        awaiting = [t for t in self.runs if self._status(t) is RunStatus.AWAITING_APPROVAL]
        run = self.rng.choice(awaiting)
        outer = self.rng.choice(("decide", "decide", "cancel", "expire"))
        reviewer = self.rng.choice(REVIEWERS)
        decision = self.rng.choice(("approve", "reject"))
        other = REVIEWERS[1 - REVIEWERS.index(reviewer)]
        inner_kind = self.rng.choice(
            ("decide", "decide", "cancel", "expire", "advance", "new run", "apply")
        )
        passing = False
        if "expire" in (outer, inner_kind) and run.deadline is not None:
            near = self.rng.random()
            if near < 0.4:
                self._to_deadline(run)
            elif near < 0.7:
                passing = self._to_deadline(run, before=True)
        binding = self._view(run).binding
        fired: list[bool] = []
        # The outer operation's outcome, once the inner one landed (None: either).
        predicted: list[Expected] = [None]
        landing = "(landing inside another operation)"

        def inner() -> None:
            fired.append(True)
            if inner_kind == "decide":
                second = self.rng.choice(("approve", "reject"))
                self._decide(
                    other,
                    run,
                    second,
                    binding,
                    "(landing inside the other decision)" if outer == "decide" else landing,
                    self._expected(run, second, binding, other),
                    inner=True,
                )
            else:
                self._land(inner_kind, run, other, f" {landing}")
            if passing:
                self._step(
                    f"the deadline of {run.name} passes",
                    lambda: self.backend.clock.advance(timedelta(seconds=20)),
                )
            if outer == "cancel":
                predicted[0] = self._cancel_expected(run)
            elif outer == "expire":
                predicted[0] = self._expiry_after_read(run)
            self._inner_after = self.backend.snapshot()

        self._inner_after = None
        self.backend.clock.on_next_reading(inner)
        described = f"a {inner_kind} landing after its read"
        if outer == "decide":
            self._decide(
                reviewer, run, decision, binding, f"with the reviewed binding, {described}", None
            )
        elif outer == "cancel":
            before = self._cancel_expected(run)
            self._cancel(reviewer, run, f", {described}", lambda: predicted[0] if fired else before)
        else:
            before = self._expiry_expected(run)
            self._expire(run, f", {described}", lambda: predicted[0] if fired else before)
        if not fired:
            # Refused before its clock reading: the other operation runs on its own now.
            self.backend.clock.now()

    def _decide(
        self,
        reviewer: str,
        run: Tracked,
        decision: str,
        binding: Mapping[str, object] | None,
        described: str,
        expected: Expected,
        *,
        inner: bool = False,
    ) -> None:
        """``Runs.decide`` as one step; ``expected``: its refusal, ``"ok"``, or None when
        either may happen (another operation landed inside it)."""
        principal = self._principal(reviewer)
        label = f"{reviewer} {decision}s {run.name} {described}"

        def act() -> None:
            resumed = len(self.backend.resumed())
            made = self.backend.decide(principal, run.id, decision, binding)
            if made.decision == "approve_first":
                # The first of two approvals: the run waits on, its wait not resumed.
                if run.first is not None or run.required < 2:
                    raise AssertionError(f"{run.name}: a first approval it did not need")
                run.first = reviewer
                if run.token in self.backend.resumed()[resumed:]:
                    raise AssertionError(f"a first approval resumed {run.token}")
                return
            if run.id in self.decided:
                raise AssertionError(f"{run.name} was decided twice: {self.decided[run.id]}")
            self.decided[run.id] = Succeeded(reviewer, decision, binding)
            if run.token not in self.backend.resumed()[resumed:]:
                raise AssertionError(f"the approval wait {run.token} was not resumed")

        outcome = self._step(label, act)
        kind = "landing between another decision's read and write" if inner else described
        self.tally[
            f"{decision} {kind}: {_name(outcome if isinstance(outcome, type) else 'ok')}"
        ] += 1
        got: Expected = outcome if isinstance(outcome, type) else "ok"
        if expected is not None and got is not expected and got != expected:
            raise AssertionError(f"{label}: expected {_name(expected)}, got {_name(got)}")
        if isinstance(got, type) and not issubclass(got, DECISION_REFUSALS):
            raise AssertionError(f"{label}: refused with {got.__name__}")

    def _land(self, kind: str, run: Tracked, reviewer: str, landing: str) -> None:
        """An operation other than a decision landing inside another one on ``run``."""
        if kind == "cancel":
            self._cancel(reviewer, run, landing, self._cancel_expected(run))
        elif kind == "expire":
            self._expire(run, landing, self._expiry_expected(run))
        elif kind == "advance":
            self._advance()
        elif kind == "new run" and len(self.runs) < MAX_RUNS:
            self._new_run(run.workspace_id)
        elif self._view(run).approval == ApprovalState.APPROVED:
            self._apply(run)
        else:
            self._step("nothing lands", lambda: None)

    def _cancel_now(self) -> None:
        """A reviewer cancels a run in any state (half the time any run at all)."""
        run = self.rng.choice(self.runs) if self.rng.random() < 0.5 else self._pick_run()
        self._cancel(self.rng.choice(REVIEWERS), run, "", self._cancel_expected(run))

    def _cancel_apply(self, run: Tracked) -> None:
        """A reviewer cancels a run while it applies: the apply is interrupted."""
        self._cancel(self.rng.choice(REVIEWERS), run, "", self._cancel_expected(run))

    def _cancel(
        self,
        reviewer: str,
        run: Tracked,
        described: str,
        expected: Expected | Callable[[], Expected],
    ) -> None:
        """``Runs.cancel`` as one step; ``expected``: its refusal or the status it ends
        the run in (a callable: known once another operation landed inside it)."""
        principal = self._principal(reviewer)
        label = f"{reviewer} cancels {run.name}{described}"

        def act() -> str:
            stopped = len(self.backend.stopped())
            canceled = self.backend.cancel(principal, run.id)
            if canceled.status is RunStatus.APPLY_INTERRUPTED:
                attempt = self.backend.observe([run.id]).runs[run.id].attempt
                reference = f"sandbox-{run.name}"
                if attempt != AttemptState.STOPPED:
                    raise AssertionError(f"{run.name} interrupted, its attempt {attempt}")
                if reference not in self.backend.stopped()[stopped:]:
                    raise AssertionError(f"{run.name} interrupted, {reference} not stopped")
            return canceled.status.value

        outcome = self._step(label, act)
        self._outcome(f"cancel{_raced(described)}", label, outcome, expected)

    def _expire_now(self) -> None:
        """The approval's expiry of a run that had an approval (mostly one awaiting it)."""
        had = [t for t in self.runs if self._view(t).approval is not None]
        awaiting = [t for t in had if self._status(t) is RunStatus.AWAITING_APPROVAL]
        if not had:
            self._step("no approval to expire", lambda: None)
            return
        pool = awaiting if awaiting and self.rng.random() < 0.9 else had
        run = self.rng.choice(pool)
        self._expire(run, "", self._expiry_expected(run))

    def _expire(
        self, run: Tracked, described: str, expected: Expected | Callable[[], Expected]
    ) -> None:
        """``arbitrate_expiry`` as one step; ``expected``: its refusal or the decision it
        returns. One that does not expire the run writes nothing (after any operation
        that landed inside it)."""
        label = f"the approval of {run.name} times out{described}"

        def act() -> str:
            before = self._before
            decision = str(self.backend.expire(run.id)["decision"])
            baseline = before if self._inner_after is None else self._inner_after
            if decision != "expired" and self.backend.snapshot() != baseline:
                raise AssertionError(f"{label}: the expiry lost ({decision}) but wrote")
            return decision

        outcome = self._step(label, act)
        self._outcome(f"expiry{_raced(described)}", label, outcome, expected)

    def _outcome(
        self,
        kind: str,
        label: str,
        outcome: object,
        expected: Expected | Callable[[], Expected],
    ) -> None:
        got: Expected = outcome if isinstance(outcome, type) else str(outcome)
        self.tally[f"{kind}: {_name(got)}"] += 1
        wanted = expected() if callable(expected) and not isinstance(expected, type) else expected
        if wanted is not None and got is not wanted and got != wanted:
            raise AssertionError(f"{label}: expected {_name(wanted)}, got {_name(got)}")
        if isinstance(got, type) and not issubclass(got, (AlreadyDecided, RunEnded)):
            raise AssertionError(f"{label}: refused with {got.__name__}")

    def _queue_new_run(self) -> None:
        self._new_run(self.rng.choice(sorted({t.workspace_id for t in self.runs})))

    def _new_run(self, workspace_id: str) -> Tracked:
        number = len(self.runs)
        run_id = "run-" + seeded_letters(random.Random(f"{self.seed}-{number}"))
        tracked = Tracked(f"r{number}", run_id, workspace_id, token=f"approval-{number}")
        self.runs.append(tracked)

        def create() -> None:
            now = self.backend.clock.now()
            run = Run(
                id=run_id,
                organization_id=self.backend.organization_id,
                workspace_id=workspace_id,
                kind=RunKind.PLAN_AND_APPLY,
                status=RunStatus.DISPATCH_PENDING,
                version=1,
                created_at=now,
                updated_at=now,
                created_by="user:ada",
            )
            self.backend.create(run)
            self.backend.move(run_id, RunStatus.QUEUED, None)
            self.backend.reserve(
                replace(run, status=RunStatus.QUEUED, version=2), f"writer-{number}"
            )

        self._step(
            f"new run {tracked.name} on {self._ws(workspace_id)}, waiting for the writer", create
        )
        return tracked

    def _plan(self, run: Tracked) -> None:
        """The workflow takes the run holding the writer to awaiting approval: a plan with
        changes, its policy, and an approval bound to both, due in one to four hours."""
        self._plans += 1
        binding: dict[str, object] = {
            "plan_sha256": f"sha256:plan-{self._plans}",
            "predecessor_state_version_id": f"sv-{self._plans}",
            "policy_input_digest": f"in-{self._plans}",
            "policy_result_digest": f"out-{self._plans}",
        }
        policy = self.rng.choice(POLICY_STATES)
        hours = self.rng.randint(1, 4)
        # Some runs need two approvers (a destroy under the two-person rule).
        required = 2 if self.rng.random() < 0.3 else 1

        def plan() -> None:
            deadline = self.backend.clock.now() + timedelta(hours=hours)
            updates: dict[RunStatus, dict[str, Any]] = {
                RunStatus.PLAN_COMPLETE: {"plan_has_changes": True},
                RunStatus.AWAITING_APPROVAL: {"approval_expires_at": deadline},
            }
            path = transitions.MAIN_PATH
            start, end = path.index(RunStatus.PLANNING), path.index(RunStatus.AWAITING_APPROVAL)
            for target in path[start : end + 1]:
                self.backend.move(run.id, target, updates.get(target))
            if policy is not None:
                self.backend.put_part(
                    run.id, "policy", policy, {"digest": binding["policy_result_digest"]}, None
                )
            body: dict[str, Any] = {"expires_at": deadline.isoformat(), "binding": binding}
            if required > 1:
                body["approvals_required"] = required
            self.backend.put_part(run.id, "approval", ApprovalState.WAITING, body, run.token)
            run.binding, run.deadline, run.policy = binding, deadline, policy
            run.required = required

        needs = f", {required} approvers" if required > 1 else ""
        self._step(
            f"the workflow plans {run.name} (policy {policy}, due in {hours} h{needs})", plan
        )

    def _apply(self, run: Tracked) -> None:
        def apply() -> None:
            self.backend.start_apply(run.id, f"sandbox-{run.name}")
            self.backend.end_apply(run.id)

        self._step(f"the workflow applies {run.name}", apply)

    def _start_apply(self, run: Tracked) -> None:
        self._step(
            f"the workflow starts applying {run.name}",
            lambda: self.backend.start_apply(run.id, f"sandbox-{run.name}"),
        )

    def _end_apply(self, run: Tracked, described: str = "") -> None:
        """The apply's result: it succeeds while the run applies, and is refused (writing
        nothing) once a cancellation interrupted the apply."""
        applying = self._status(run) is RunStatus.APPLYING and not described
        label = f"the apply of {run.name} succeeds{described}"
        outcome = self._step(label, lambda: self.backend.end_apply(run.id))
        got = outcome if isinstance(outcome, type) else "ok"
        kind = " (duplicate)" if "duplicate" in described else " (raced)" if described else ""
        self.tally[f"apply result{kind}: {_name(got)}"] += 1
        if (got == "ok") is not applying:
            raise AssertionError(f"{label}: expected {'success' if applying else 'a refusal'}")
        if applying and self._status(run) is not RunStatus.SUCCEEDED:
            # The publication under the attempt's lock and fence is what confirms it.
            raise AssertionError(f"{label}: the run is {self._status(run)}, not succeeded")
        if isinstance(got, type) and not issubclass(got, Conflict):
            raise AssertionError(f"{label}: refused with {got.__name__}")

    def _late_result(self, run: Tracked) -> None:
        """The apply's result again, for a run that already succeeded (a duplicated or
        late report): refused, writing nothing."""
        self._end_apply(run, " again (a duplicate)")

    def _recover(self) -> None:
        """An operator recovers an apply_interrupted run (mostly), or any other run (a
        refusal). The first recovery ends its writer authority: the fence advances by
        one and the writer goes to the run first in line, woken; a replay returns the
        same result and writes nothing; any other run is not recoverable."""
        interrupted = [t for t in self.runs if self._status(t) is RunStatus.APPLY_INTERRUPTED]
        pool = interrupted if interrupted and self.rng.random() < 0.8 else self.runs
        run = self.rng.choice(pool)
        assert self.last is not None
        before = self.last
        status = self._status(run)
        replay = run.id in self.recovered
        holder = before.holders.get(run.workspace_id)
        recoverable = status is RunStatus.APPLY_INTERRUPTED and (replay or holder == run.id)
        principal = replace(self._principal("oncall"), auth_time=self.backend.clock.now())
        label = f"oncall recovers {run.name}"

        def act() -> str:
            resumed, snapshot = len(self.backend.resumed()), self.backend.snapshot()
            result = self.backend.recover(principal, run.id)
            after = self.backend.observe([t.id for t in self.runs])
            if replay:
                if result != self.recovered[run.id] or self.backend.snapshot() != snapshot:
                    raise AssertionError(f"{label}: a replay wrote or answered otherwise")
                return "replayed"
            self.recovered[run.id] = result
            fence = before.fences.get(run.workspace_id, 0)
            if after.fences.get(run.workspace_id) != fence + 1:
                raise AssertionError(f"{label}: the fence did not advance by one from {fence}")
            queue = before.waiting.get(run.workspace_id, ())
            heir = queue[0] if queue else None
            if after.holders.get(run.workspace_id) != heir:
                raise AssertionError(f"{label}: the writer went to {after.holders}, not {heir}")
            woken = self.backend.resumed()[resumed:]
            if (heir is None) is not (woken == []):
                raise AssertionError(f"{label}: {heir} was next in line, woken: {woken}")
            return "recovered"

        outcome = self._step(label, act)
        got = outcome if isinstance(outcome, type) else str(outcome)
        self.tally[f"recovery: {_name(got)}"] += 1
        wanted = ("replayed" if replay else "recovered") if recoverable else NotRecoverable
        if got != wanted:
            raise AssertionError(f"{label}: expected {_name(wanted)}, got {_name(got)}")

    def _apply_race(self, run: Tracked) -> None:
        """A cancellation and the apply's result, one landing between the other's read
        and its write: the result first ends the run succeeded (the cancellation, trying
        again, is refused); the cancellation first interrupts the apply, keeping the
        writer authority, and the result is refused."""
        reviewer = self.rng.choice(REVIEWERS)
        fired: list[bool] = []
        predicted: list[Expected] = [self._cancel_expected(run)]
        cancel_first = self.rng.random() < 0.5

        def inner() -> None:
            fired.append(True)
            if cancel_first:
                self._cancel(reviewer, run, " (landing inside the apply's result)", predicted[0])
            else:
                self._end_apply(run)
                predicted[0] = self._cancel_expected(run)
            self._inner_after = self.backend.snapshot()

        self._inner_after = None
        self.backend.clock.on_next_reading(inner)
        if cancel_first:
            self._end_apply(run, ", a cancel landing after its read")
        else:
            self._cancel(
                reviewer, run, ", the apply's result landing after its read", lambda: predicted[0]
            )
        if not fired:
            raise AssertionError(f"nothing landed inside the race on {run.name}")

    def _to_deadline(self, run: Tracked, *, before: bool = False) -> bool:
        """The clock moved to just past ``run``'s approval deadline (or ten seconds
        before it), if it is not there yet; whether it moved."""
        assert run.deadline is not None
        target = run.deadline + (timedelta(seconds=-10) if before else timedelta(seconds=2))
        if self.backend.clock.current >= target:
            return False
        where = "ten seconds before" if before else "past"
        self._step(
            f"the clock moves {where} {run.name}'s deadline",
            lambda: setattr(self.backend.clock, "current", target),
        )
        return True

    def _advance(self) -> None:
        minutes = self.rng.choice((30, 60, 90))
        self._step(
            f"{minutes} minutes pass",
            lambda: self.backend.clock.advance(timedelta(minutes=minutes)),
        )

    # -- what a decision should meet -------------------------------------------------

    def _expected(
        self,
        run: Tracked,
        decision: str,
        binding: Mapping[str, object] | None,
        reviewer: str,
    ) -> Expected:
        """The refusal (or "ok"; None: too near the deadline to say) the run's state
        calls for, in the order ``Runs.decide`` checks: expiry and earlier decisions, not
        awaiting, the deadline, the binding, the policy."""
        view = self._view(run)
        if view.status is RunStatus.EXPIRED or view.approval == ApprovalState.EXPIRED:
            return ApprovalExpired
        if view.approval is not None and (
            view.approval not in UNDECIDED or view.status.is_terminal
        ):
            return AlreadyDecided
        if view.status is not RunStatus.AWAITING_APPROVAL or view.approval is None:
            return Conflict
        assert run.deadline is not None
        assert run.binding is not None
        # The decision reads the clock (a millisecond on) before comparing.
        left = run.deadline - self.backend.clock.current
        if abs(left) < timedelta(seconds=1):
            return None
        if left <= timedelta(0):
            return ApprovalExpired
        if binding is not None and any(run.binding.get(k) != v for k, v in binding.items()):
            return Conflict
        if decision == "approve" and view.first_by == f"user:{reviewer}":
            return SameApprover
        if decision == "approve" and run.policy == "soft_failed":
            return PolicyOverrideRequired
        return "ok"

    def _cancel_expected(self, run: Tracked) -> Expected:
        """A cancellation's outcome: refused once the run ended, else the run ends
        apply_interrupted during apply and canceled before it (a decision landing
        first only makes it try again)."""
        status = self._status(run)
        if status.is_terminal:
            return AlreadyDecided
        if status is RunStatus.APPLYING:
            return RunStatus.APPLY_INTERRUPTED.value
        return RunStatus.CANCELED.value

    def _expiry_expected(self, run: Tracked) -> Expected:
        """An expiry's outcome as ``arbitrate_expiry`` decides it: an ended run refuses
        it, a decision recorded first is returned, before the deadline it is pending,
        past it the run expires (None: too near the deadline to say)."""
        view = self._view(run)
        if view.status.is_terminal:
            return RunEnded
        if view.approval in {ApprovalState.APPROVED, ApprovalState.REJECTED}:
            return _decision_of(view.approval)
        assert run.deadline is not None
        left = run.deadline - self.backend.clock.current
        if abs(left) < timedelta(seconds=1):
            return None
        return "pending" if left > timedelta(0) else "expired"

    def _expiry_after_read(self, run: Tracked) -> Expected:
        """An expiry's outcome when it read the approval waiting and another operation
        then landed: the clock it reads now decides pending; past the deadline it
        expires the run if the approval still waits, else returns what was decided."""
        assert run.deadline is not None
        if self.backend.clock.current < run.deadline:
            return "pending"
        view = self._view(run)
        if view.approval in UNDECIDED:
            return "expired"
        return _decision_of(view.approval)

    # -- steps and invariants ----------------------------------------------------------

    def _step(self, label: str, action: Callable[[], object]) -> type[RunplaneError] | object:
        """Run ``action`` as one step: a refusal must leave everything as it was (after
        any operation that landed inside it), and the invariants must hold after it."""
        self.steps.append(label)
        index = len(self.steps) - 1
        before = self._before = self.backend.snapshot()
        self._inner_after = None
        try:
            result = action()
        except RunplaneError as refused:
            self._at = index + 1
            self.steps[index] += f"  -> refused: {type(refused).__name__}"
            baseline = before if self._inner_after is None else self._inner_after
            if self.backend.snapshot() != baseline:
                raise AssertionError(
                    f"{label}: refused with {type(refused).__name__} ({refused}) but wrote"
                ) from refused
            self.check()
            return type(refused)
        self._at = index + 1
        self.steps[index] += "  -> ok"
        self.check()
        return result

    def check(self) -> None:
        """The invariants, against what the backend holds now."""
        now = self.backend.observe([t.id for t in self.runs])
        by_id = {t.id: t for t in self.runs}
        previous = self.last.runs if self.last else {}
        for run_id, view in now.runs.items():
            name = by_id[run_id].name
            was = previous.get(run_id)
            history = self.history.get(run_id)
            if history is None:
                history = self.history[run_id] = [view.status]
            # A run read as it was last changed nothing this step.
            if was is not None and was != view:
                if view.version < was.version:
                    raise AssertionError(
                        f"{name}: version went back {was.version} -> {view.version}"
                    )
                if was.status in _TERMINAL and (view.status, view.version) != (
                    was.status,
                    was.version,
                ):
                    raise AssertionError(f"{name}: left terminal {was.status} for {view.status}")
                if view.status is not was.status:
                    moves = view.version - was.version
                    if moves < 1:
                        raise AssertionError(
                            f"{name}: {was.status} -> {view.status} without a new version"
                        )
                    if moves == 1 and transitions.find(was.status, view.status) is None:
                        raise AssertionError(
                            f"{name}: {was.status} -> {view.status} is no move of the table"
                        )
                    if view.status not in _REACHABLE[was.status]:
                        raise AssertionError(
                            f"{name}: {view.status} is unreachable from {was.status}"
                        )
                    history.append(view.status)
                elif view.version != was.version:
                    raise AssertionError(f"{name}: a new version without a move ({view.status})")
            self._check_approval(by_id[run_id], view)
        for workspace_id, fence in now.fences.items():
            if self.last and fence < self.last.fences.get(workspace_id, 0):
                raise AssertionError(f"{self._ws(workspace_id)}: the fence went back")
        names = {t.id: t.name for t in self.runs}
        for workspace_id in {t.workspace_id for t in self.runs}:
            self._check_writer(workspace_id, now, names)
        self._check_sandboxes(now, names)
        self.last = now

    @staticmethod
    def _check_sandboxes(now: Observed, names: Mapping[str, str]) -> None:
        """The slots taken are the open attempts; an open attempt's runner sessions are
        not revoked, a closed one's are."""
        running = [r for r, view in now.runs.items() if view.attempt in OPEN_ATTEMPT]
        taken = sum(now.slots.values())
        if taken != len(running):
            named = sorted(names[r] for r in running)
            raise AssertionError(f"{taken} sandbox slots taken, the open attempts are {named}")
        for run_id, view in now.runs.items():
            for key in view.sessions:
                revoked = now.sessions.get(key)
                if revoked is None:
                    raise AssertionError(f"{names[run_id]}: its runner session {key} is gone")
                if revoked is (view.attempt in OPEN_ATTEMPT):
                    state = "revoked" if revoked else "not revoked"
                    raise AssertionError(
                        f"{names[run_id]}: its attempt is {view.attempt}, its session {state}"
                    )

    @staticmethod
    def _check_approved(run: Tracked, view: RunView, decided: Succeeded | None) -> None:
        """An approved run: approved by the one approval that succeeded (the second of
        two, from another person, where two were needed), bound to what was planned and
        reviewed."""
        if decided is None or decided.decision != "approve":
            raise AssertionError(f"{run.name}: approved with no approval that succeeded")
        if view.binding != run.binding:
            raise AssertionError(f"{run.name}: approved for {view.binding}, planned {run.binding}")
        if decided.submitted is not None and dict(decided.submitted) != view.binding:
            raise AssertionError(
                f"{run.name}: {decided.reviewer} reviewed {decided.submitted}, "
                f"the approval binds {view.binding}"
            )
        if view.decided_by != f"user:{decided.reviewer}":
            raise AssertionError(
                f"{run.name}: approved by {view.decided_by}, not {decided.reviewer}"
            )
        if run.required > 1 and (view.first_by is None or view.first_by == view.decided_by):
            raise AssertionError(
                f"{run.name}: needs two approvers, approved by {view.first_by} and "
                f"{view.decided_by}"
            )
        if view.status not in _APPROVED_RUN:
            raise AssertionError(f"{run.name}: approved but {view.status}")

    def _check_approval(self, run: Tracked, view: RunView) -> None:
        decided = self.decided.get(run.id)
        if view.approval == ApprovalState.APPROVED:
            self._check_approved(run, view, decided)
        elif view.approval == ApprovalState.REJECTED:
            if decided is None or decided.decision != "reject":
                raise AssertionError(f"{run.name}: rejected with no rejection that succeeded")
            if view.status is not RunStatus.REJECTED:
                raise AssertionError(f"{run.name}: its approval is rejected, the run {view.status}")
        elif view.approval in UNDECIDED:
            if decided is not None:
                raise AssertionError(f"{run.name}: decided ({decided}) but its approval waits")
            if view.status is not RunStatus.AWAITING_APPROVAL:
                raise AssertionError(f"{run.name}: its approval waits, the run is {view.status}")
            first = None if run.first is None else f"user:{run.first}"
            if view.first_by != first:
                raise AssertionError(f"{run.name}: first approved by {view.first_by}, not {first}")
        if view.status is RunStatus.REJECTED and view.approval != ApprovalState.REJECTED:
            raise AssertionError(f"{run.name}: rejected, its approval {view.approval}")
        self._check_ended_approval(run, view, decided)

    @staticmethod
    def _check_ended_approval(run: Tracked, view: RunView, decided: Succeeded | None) -> None:
        """A canceled approval's run was canceled and an expired one's expired, neither
        decided by a decision that succeeded."""
        ended = view.approval in _ENDED_APPROVAL
        if ended and decided is not None:
            raise AssertionError(
                f"{run.name}: decided ({decided}) but its approval {view.approval}"
            )
        if view.approval == ApprovalState.CANCELED and view.status is not RunStatus.CANCELED:
            raise AssertionError(f"{run.name}: its approval is canceled, the run {view.status}")
        if (view.status is RunStatus.EXPIRED) != (view.approval == ApprovalState.EXPIRED):
            raise AssertionError(f"{run.name}: {view.status}, its approval {view.approval}")

    def _check_writer(self, workspace_id: str, now: Observed, names: Mapping[str, str]) -> None:
        holder = now.holders.get(workspace_id)
        waiting = now.waiting.get(workspace_id, ())
        mine = {
            run_id: view for run_id, view in now.runs.items() if view.workspace_id == workspace_id
        }
        # An apply_interrupted run keeps the writer authority until recovery.
        writers = [
            run_id
            for run_id, view in mine.items()
            if view.status in PAST_THE_WAIT
            or (view.status is RunStatus.APPLY_INTERRUPTED and run_id not in self.recovered)
        ]
        if len(writers) > 1:
            past = [names[run_id] for run_id in sorted(writers)]
            raise AssertionError(
                f"{self._ws(workspace_id)}: {len(writers)} runs past the writer wait: {past}"
            )
        if writers and writers[0] != holder:
            raise AssertionError(
                f"{self._ws(workspace_id)}: {names[writers[0]]} is past the wait, "
                f"the writer is {names.get(holder or '', holder)}"
            )
        if len(set(waiting)) != len(waiting) or holder in waiting:
            raise AssertionError(
                f"{self._ws(workspace_id)}: the queue {self._named(waiting, names)} repeats a "
                f"run or holds the writer {names.get(holder or '', holder)}"
            )
        if holder is None and waiting:
            raise AssertionError(
                f"{self._ws(workspace_id)}: {self._named(waiting, names)} wait, "
                "but nobody holds the writer"
            )
        for run_id in [*([holder] if holder else []), *waiting]:
            view = mine.get(run_id)
            interrupted = view is not None and view.status is RunStatus.APPLY_INTERRUPTED
            if run_id == holder and interrupted and run_id not in self.recovered:
                continue
            if view is not None and view.status in _ENDED_BY_REVIEW:
                place = "holds the writer" if run_id == holder else "keeps its queue place"
                raise AssertionError(
                    f"{self._ws(workspace_id)}: {names.get(run_id, run_id)} {place}, {view.status}"
                )
            if view is None or view.status.is_terminal:
                raise AssertionError(
                    f"{self._ws(workspace_id)}: {names.get(run_id, run_id)} holds or waits, "
                    f"but is {view and view.status}"
                )
        for run_id, view in mine.items():
            if view.status is RunStatus.QUEUED and run_id != holder and run_id not in waiting:
                raise AssertionError(
                    f"{self._ws(workspace_id)}: queued {names[run_id]} neither holds the "
                    "writer nor waits"
                )

    @staticmethod
    def _named(run_ids: Sequence[str], names: Mapping[str, str]) -> list[str]:
        return [names.get(run_id, run_id) for run_id in run_ids]

    # -- reading ---------------------------------------------------------------------

    def _view(self, run: Tracked) -> RunView:
        assert self.last is not None
        return self.last.runs[run.id]

    def _status(self, run: Tracked) -> RunStatus:
        return self._view(run).status

    def _plannable(self, run: Tracked) -> bool:
        assert self.last is not None
        return (
            self._status(run) is RunStatus.QUEUED
            and self.last.holders.get(run.workspace_id) == run.id
        )

    def _principal(self, reviewer: str) -> Principal:
        return _reviewer(self.backend.organization_id, reviewer)

    def _ws(self, workspace_id: str) -> str:
        return f"w{list(self.backend.workspace_ids).index(workspace_id)}"


@cache
def _reviewer(organization_id: str, reviewer: str) -> Principal:
    """A reviewer of the organization with every permission (immutable: made once)."""
    return Principal(
        kind=PrincipalKind.USER,
        id=reviewer,
        organization_id=organization_id,
        permissions=frozenset(Permission),
        display=reviewer,
    )


def _raced(described: str) -> str:
    if "landing inside" in described:
        return " landing inside another operation"
    return " with another operation landing after its read" if described else ""


def _decision_of(approval: str | None) -> str:
    """What ``arbitrate_expiry`` returns for an approval no longer waiting."""
    decisions = {str(ApprovalState.APPROVED): "approve", str(ApprovalState.REJECTED): "reject"}
    return decisions.get(str(approval), str(approval))


def _name(outcome: object) -> str:
    if outcome is None or outcome == "ok":
        return "success"
    return outcome.__name__ if isinstance(outcome, type) else str(outcome)


def play_all(backend: Backend, chosen: Sequence[int], length: int, label: str) -> Counter[str]:
    """Play each seed's schedule on a new world; a failure raises with its seed and steps.
    Prints how fast it went and what the schedules reached; returns that."""
    started, steps, tally = time.perf_counter(), 0, Counter[str]()
    for seed in chosen:
        backend.reset()
        schedule = Schedule(backend, seed, length)
        schedule.play()
        steps += len(schedule.steps)
        tally += schedule.tally
    elapsed = time.perf_counter() - started
    print(
        f"\n{label} interleavings: {len(chosen)} schedules ({steps} steps) in {elapsed:.2f} s, "
        f"{len(chosen) / elapsed:.1f} schedules/s"
    )
    print("\n".join(f"  {count:>6}  {what}" for what, count in sorted(tally.items())))
    return tally


# What a schedule's runner reports when its engine applied (it names a log it never
# uploaded: the outcome stands, the log is refused, as RunnerReports says).
APPLIED = Applied(log_artifact_id="log-never-uploaded")


def published(run: Run, attempt: AttemptBody, now: datetime) -> StateVersion:
    """The state version a run's apply attempt publishes, stamped with its run, attempt,
    sandbox, lock and fence, after the run's pinned predecessor."""
    return StateVersion(
        id=f"sv-{attempt.attempt_id}",
        workspace_id=run.workspace_id,
        organization_id=run.organization_id,
        serial=1,
        lineage="lineage-1",
        md5="0" * 32,
        status=FINALIZED,
        created_at=now,
        created_by=f"runner:{attempt.attempt_id}",
        predecessor_id=run.predecessor_sv_id,
        provenance={
            "run_id": run.id,
            "attempt_id": attempt.attempt_id,
            "sandbox_id": attempt.sandbox_id,
            "fence": attempt.fence,
        },
        lock_id=attempt.lock_id,
    )


def verified_recovery(current_state_version_id: str | None) -> RecoveryRequest:
    """What a schedule's operator submits: the workspace's current state is the truth."""
    return RecoveryRequest(
        resolution=Resolution.CURRENT_STATE_VERIFIED,
        reason="the apply was interrupted before it wrote anything",
        confirm_authority_revocation=True,
        current_state_version_id=current_state_version_id,
    )


def seeds(first: int, count: int) -> list[int]:
    """The seeds to play: ``count`` from ``first``, or the one to replay."""
    replay = replay_seed()
    return [replay] if replay is not None else list(range(first, first + count))
