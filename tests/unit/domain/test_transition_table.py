"""The transition table is the only definition of allowed moves."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.domain import transitions
from runplane.domain.errors import IllegalTransition
from runplane.domain.run import ACTIVE_STATUSES, RunKind, RunStatus, Stage, StageStatus
from runplane.domain.transitions import (
    TRANSITIONS,
    WRITER_ON_ENTRY,
    Requires,
    RunFacts,
    WriterEffect,
)

S = RunStatus
ALL_FACTS = [RunFacts(kind, changes) for kind in RunKind for changes in (None, True, False)]


def facts_allowing(row: transitions.Transition) -> RunFacts:
    return next(facts for facts in ALL_FACTS if row.allows(facts))


def test_every_row_is_accepted_for_the_runs_it_names() -> None:
    for row in TRANSITIONS:
        assert transitions.check(row.source, row.target, facts_allowing(row)) is row


def test_every_pair_outside_the_table_is_rejected_for_every_run() -> None:
    allowed = {(row.source, row.target) for row in TRANSITIONS}
    rejected = 0
    for source, target in itertools.product(RunStatus, RunStatus):
        if (source, target) in allowed:
            continue
        for facts in ALL_FACTS:
            with pytest.raises(IllegalTransition):
                transitions.check(source, target, facts)
            rejected += 1
    assert rejected == (len(RunStatus) ** 2 - len(allowed)) * len(ALL_FACTS)


def test_each_move_appears_once() -> None:
    moves = [(row.source, row.target) for row in TRANSITIONS]
    assert len(moves) == len(set(moves))


@pytest.mark.parametrize(
    ("facts", "target"),
    [
        (RunFacts(RunKind.PLAN_ONLY, True), S.SUCCEEDED),
        (RunFacts(RunKind.SPECULATIVE, True), S.SUCCEEDED),
        (RunFacts(RunKind.PLAN_AND_APPLY, False), S.SUCCEEDED),
        (RunFacts(RunKind.PLAN_AND_APPLY, True), S.AWAITING_APPROVAL),
    ],
)
def test_policy_passed_goes_to_approval_only_when_there_is_something_to_apply(
    facts: RunFacts, target: RunStatus
) -> None:
    other = S.AWAITING_APPROVAL if target is S.SUCCEEDED else S.SUCCEEDED
    assert transitions.check(S.POLICY_PASSED, target, facts).target is target
    with pytest.raises(IllegalTransition, match="requires"):
        transitions.check(S.POLICY_PASSED, other, facts)


def test_a_plan_and_apply_run_with_an_unknown_plan_cannot_skip_approval() -> None:
    unknown = RunFacts(RunKind.PLAN_AND_APPLY, None)
    for target in (S.SUCCEEDED, S.AWAITING_APPROVAL):
        with pytest.raises(IllegalTransition):
            transitions.check(S.POLICY_PASSED, target, unknown)


def test_only_runs_that_may_apply_reach_apply_statuses() -> None:
    apply_statuses = {S.AWAITING_APPROVAL, S.APPLYING, S.APPLY_FAILED, S.NEEDS_RECOVERY}
    for kind in (RunKind.PLAN_ONLY, RunKind.SPECULATIVE):
        reachable = _reachable_for(RunFacts(kind, True))
        assert not reachable & apply_statuses


def _reachable_for(facts: RunFacts) -> set[RunStatus]:
    seen, frontier = {S.DISPATCH_PENDING}, [S.DISPATCH_PENDING]
    while frontier:
        source = frontier.pop()
        for row in TRANSITIONS:
            if row.source is source and row.allows(facts) and row.target not in seen:
                seen.add(row.target)
                frontier.append(row.target)
    return seen


def test_every_status_is_reachable_and_every_active_status_can_end() -> None:
    assert transitions.reachable_from(S.DISPATCH_PENDING) == frozenset(RunStatus)
    for status in ACTIVE_STATUSES:
        assert {t for t in transitions.targets_from(status) if t.is_terminal}


def test_cancel_is_allowed_from_every_active_status_before_apply() -> None:
    for status in ACTIVE_STATUSES - {S.APPLYING}:
        assert transitions.find(status, S.CANCELED) is not None
    # During apply a winning cancellation interrupts instead.
    assert transitions.find(S.APPLYING, S.CANCELED) is None
    assert transitions.find(S.APPLYING, S.APPLY_INTERRUPTED) is not None


def test_terminal_statuses_are_absorbing() -> None:
    for status in RunStatus:
        assert status.is_terminal == (not list(transitions.targets_from(status)))


def test_each_status_says_what_it_does_to_the_writer_reservation() -> None:
    assert set(WRITER_ON_ENTRY) == set(RunStatus)
    for status in RunStatus:
        keeps = WRITER_ON_ENTRY[status] is WriterEffect.KEEP
        assert keeps == (not status.is_terminal)
    for status in (S.APPLY_START_UNCERTAIN, S.APPLY_INTERRUPTED, S.NEEDS_RECOVERY):
        assert WRITER_ON_ENTRY[status] is WriterEffect.RETAIN_FOR_RECOVERY
    assert WRITER_ON_ENTRY[S.APPLY_FAILED] is WriterEffect.RELEASE_UNLESS_STATE_PUBLISHED


def test_every_status_has_a_meaning() -> None:
    assert all(status.meaning for status in RunStatus)


def test_guards_only_use_the_known_requirements() -> None:
    assert {row.requires for row in TRANSITIONS} <= set(Requires)


# -- property tests over random move sequences ------------------------------------------

moves = st.lists(st.sampled_from(list(RunStatus)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(list(RunKind)), changes=st.booleans(), attempts=moves)
def test_random_moves_keep_the_run_on_the_lifecycle(
    kind: RunKind, changes: bool, attempts: list[RunStatus]
) -> None:
    """Whatever is attempted, the run only ever takes allowed moves: its status is
    reachable from dispatch_pending, its stages change legally, and once it is
    terminal nothing moves it again."""
    status = S.DISPATCH_PENDING
    stages = dict.fromkeys(Stage, StageStatus.PENDING)
    reachable = transitions.reachable_from(S.DISPATCH_PENDING)
    for target in attempts:
        facts = RunFacts(kind, changes if status not in _BEFORE_PLAN else None)
        try:
            row = transitions.check(status, target, facts)
        except IllegalTransition:
            continue
        assert not status.is_terminal, "a terminal status moved"
        for stage, new in row.stages.items():
            old = stages[stage]
            assert not old.is_closed, f"{stage} reopened from {old}"
            assert new is not StageStatus.RUNNING or old is StageStatus.PENDING
            stages[stage] = new
        status = target
        assert status in reachable
    if status.is_terminal:
        assert all(stage.is_closed for stage in stages.values()), stages
        assert not list(transitions.targets_from(status))


_BEFORE_PLAN = {S.DISPATCH_PENDING, S.QUEUED, S.PLANNING}


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(list(RunKind)), changes=st.booleans(), data=st.data())
def test_every_run_driven_to_its_end_closes_all_stages(
    kind: RunKind, changes: bool, data: st.DataObject
) -> None:
    status = S.DISPATCH_PENDING
    stages = dict.fromkeys(Stage, StageStatus.PENDING)
    while not status.is_terminal:
        facts = RunFacts(kind, changes if status not in _BEFORE_PLAN else None)
        options = [row for row in TRANSITIONS if row.source is status and row.allows(facts)]
        assert options, f"{kind} is stuck in {status}"
        row = data.draw(st.sampled_from(options))
        stages.update(row.stages)
        status = row.target
    assert all(stage.is_closed for stage in stages.values()), (status, stages)


def test_a_failed_step_ends_every_active_run_by_a_move_in_the_table() -> None:
    # Given every active status, when a workflow step fails in it (apply step or not),
    # then the failure outcome is never a success and is a move the table holds.
    for status in ACTIVE_STATUSES:
        for during_apply in (False, True):
            target = transitions.failure_outcome(status, during_apply=during_apply)
            assert target is not None, status
            assert target is not RunStatus.SUCCEEDED, status
            assert transitions.find(status, target) is not None, (status, target)
    assert transitions.failure_outcome(RunStatus.AWAITING_APPROVAL, during_apply=True) is (
        RunStatus.APPLY_START_UNCERTAIN
    )
    assert transitions.failure_outcome(RunStatus.SUCCEEDED, during_apply=False) is None
