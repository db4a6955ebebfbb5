"""The facts of a run besides its status: each a small document with its own state.

Every change names the state it expects, so two writers racing on a part
(an approval and an expiry, a result and a timeout) cannot both win.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane.domain.errors import ConcurrentChange, NotFound, PartTokenChanged
from runplane.domain.parts import OPEN_ATTEMPT, AttemptBody, AttemptState, PlanEvidence, RunPart
from runplane.store.models import PART_PREFIX, RunPartItem, run_part_key
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, OnRefused, Transaction


def _to_part(item: RunPartItem) -> RunPart:
    """The part an item holds (the inverse of ``_item``)."""
    return RunPart(
        run_id=item.run_id,
        name=item.part,
        state=item.state,
        body=dict(item.body or {}),
        token=item.token,
        created_at=item.created_at,
        updated_at=item.updated_at,
        session_keys=frozenset(item.session_keys or ()),
    )


def _item(part: RunPart) -> RunPartItem:
    """The item holding ``part`` (the inverse of ``_to_part``)."""
    return RunPartItem(
        *run_part_key(part.run_id, part.name),
        run_id=part.run_id,
        part=part.name,
        state=part.state,
        body=dict(part.body),
        token=part.token,
        created_at=part.created_at,
        updated_at=part.updated_at,
        session_keys=set(part.session_keys) or None,
    )


def from_raw(raw: dict[str, Any]) -> RunPart:
    """A part from the raw item a batch read returned."""
    return _to_part(RunPartItem.from_raw_data(raw))


def get(run_id: str, name: str, *, reads: IdentityMap) -> RunPart | None:
    """The part (consistent; None if absent), served from ``reads`` if it was read ahead
    there."""
    prefetched = reads.take(run_part_key(run_id, name))
    if prefetched is not None:
        return from_raw(prefetched)
    try:
        return _to_part(RunPartItem.get(*run_part_key(run_id, name), consistent_read=True))
    except RunPartItem.DoesNotExist:
        return None


def require(run_id: str, name: str, *, reads: IdentityMap | None = None) -> RunPart:
    """The part, ``NotFound`` if absent (read from the table unless ``reads`` is given)."""
    part = get(run_id, name, reads=IdentityMap() if reads is None else reads)
    if part is None:
        raise NotFound(f"{name} of run", run_id)
    return part


def attempt_body(part: RunPart) -> AttemptBody:
    return AttemptBody.from_body(part.body)


def plan_evidence(run_id: str) -> PlanEvidence:
    """The run's committed plan evidence (NotFound before the plan committed)."""
    return PlanEvidence.from_body(require(run_id, "plan").body)


def all_of(run_id: str) -> dict[str, RunPart]:
    items = RunPartItem.query(
        run_part_key(run_id, "")[0], RunPartItem.sk.startswith(PART_PREFIX), consistent_read=True
    )
    return {item.part: _to_part(item) for item in items}


def put(
    run_id: str,
    name: str,
    *,
    state: str,
    body: Mapping[str, Any],
    now: datetime,
    token: str | None = None,
    on_refused: OnRefused | None = None,
) -> Transaction:
    """A new part: refused if it exists already (parts are created once)."""
    return Transaction().put_new(
        _item(
            RunPart(
                run_id=run_id,
                name=name,
                state=str(state),
                body=dict(body),
                token=token,
                created_at=now,
                updated_at=now,
            )
        ),
        on_refused=on_refused
        or (lambda current: ConcurrentChange(f"run {run_id} already has its {name}")),
    )


def note_session(
    run_id: str, name: str, session_key: str, now: datetime, on_refused: OnRefused
) -> Transaction:
    """Add a runner session to its attempt ``name``, only while the attempt is open: the
    write creating the session carries it, so the write closing the attempt knows every
    session to revoke without searching for them."""
    return Transaction().update(
        RunPartItem(*run_part_key(run_id, name)),
        [RunPartItem.session_keys.add({session_key}), RunPartItem.updated_at.set(now)],
        condition=RunPartItem.state.is_in(*(str(state) for state in OPEN_ATTEMPT)),
        on_refused=on_refused,
    )


_KEEP = object()


def change(
    run_id: str,
    name: str,
    *,
    expected_state: str | tuple[str, ...],
    state: str | None = None,
    body: Mapping[str, Any] | None = None,
    token: str | object | None = _KEEP,
    expected_token: str | object | None = _KEEP,
    now: datetime,
    on_refused: OnRefused | None = None,
) -> Transaction:
    """Change a part iff it is in ``expected_state`` (and, given ``expected_token``, holds
    exactly that token, or none for None); ``body`` replaces the document."""
    expected = (
        (str(expected_state),)
        if isinstance(expected_state, str)
        else tuple(str(s) for s in expected_state)
    )
    actions = [RunPartItem.updated_at.set(now)]
    if state is not None:
        actions.append(RunPartItem.state.set(str(state)))
    if body is not None:
        actions.append(RunPartItem.body.set(dict(body)))
    if token is None:
        actions.append(RunPartItem.token.remove())
    elif token is not _KEEP:
        actions.append(RunPartItem.token.set(str(token)))

    def refused(current: Item | None) -> Exception:
        held = current.get("state") if current else "missing"
        if expected_token is not _KEEP and current is not None and held in expected:
            # Its state as expected: the token is what moved.
            token = current.get("token")
            return PartTokenChanged(run_id, name, None if token is None else str(token))
        if on_refused is not None:
            return on_refused(current)
        return ConcurrentChange(f"run {run_id}: {name} is {held}, expected {'/'.join(expected)}")

    condition = RunPartItem.state.is_in(*expected)
    if expected_token is None:
        condition &= RunPartItem.token.does_not_exist()
    elif expected_token is not _KEEP:
        condition &= RunPartItem.token == str(expected_token)
    return Transaction().update(
        RunPartItem(*run_part_key(run_id, name)),
        actions,
        condition=condition,
        on_refused=refused,
    )


def expect(
    run_id: str,
    name: str,
    states: frozenset[str] | frozenset[AttemptState] | tuple[str, ...],
    on_refused: OnRefused,
) -> Transaction:
    """A condition check, to commit with other writes: the part is in one of ``states``."""
    condition = RunPartItem.state.is_in(*sorted(str(s) for s in states))
    return Transaction().check(RunPartItem, run_part_key(run_id, name), condition, on_refused)
