"""Launch controls and running-sandbox counts of several scopes, read in one request."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from runplane.domain.launch_controls import Controls
from runplane.store import batch, sandbox_slots
from runplane.store.models import (
    LaunchControlsItem,
    SandboxCountItem,
    launch_controls_key,
    sandbox_count_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.transaction import Transaction


def read(
    scopes: Sequence[str], *, counts: bool, reads: IdentityMap
) -> tuple[dict[str, LaunchControlsItem | None], dict[str, int]]:
    """Each scope's controls item (None: never set) and, with ``counts``, how many
    sandboxes it runs: one strongly consistent request for all of them (those ``reads``
    holds served from it)."""
    keys = [launch_controls_key(scope) for scope in scopes]
    if counts:
        keys += [sandbox_count_key(scope) for scope in scopes]
    found = batch.get_many(keys, reads=reads)
    controls: dict[str, LaunchControlsItem | None] = {}
    running: dict[str, int] = {}
    for scope in scopes:
        raw = found.get(launch_controls_key(scope))
        controls[scope] = LaunchControlsItem.from_raw_data(raw) if raw else None
        if counts:
            raw_count = found.get(sandbox_count_key(scope))
            count = SandboxCountItem.from_raw_data(raw_count) if raw_count else None
            running[scope] = int(count.active or 0) if count else 0
    return controls, running


def _to_controls(item: LaunchControlsItem | None) -> Controls:
    """The controls an item holds; a scope never set is ``Controls()`` (the inverse of
    ``_item``)."""
    if item is None:
        return Controls()
    return Controls(
        launches_enabled=bool(item.launches_enabled),
        suspended=bool(item.suspended),
        allowed_regions=tuple(item.allowed_regions or ()),
        runner_releases=tuple(item.runner_releases or ()),
        policy_runtimes=tuple(item.policy_runtimes or ()),
        max_sandboxes=None if item.max_sandboxes is None else int(item.max_sandboxes),
    )


def _item(scope: str, controls: Controls, by: str, at: datetime) -> LaunchControlsItem:
    """The item holding ``scope``'s ``controls`` (the inverse of ``_to_controls``)."""
    return LaunchControlsItem(
        *launch_controls_key(scope),
        scope=scope,
        launches_enabled=controls.launches_enabled,
        suspended=controls.suspended,
        allowed_regions=list(controls.allowed_regions),
        runner_releases=list(controls.runner_releases),
        policy_runtimes=list(controls.policy_runtimes),
        max_sandboxes=controls.max_sandboxes,
        updated_at=at,
        updated_by=by,
    )


class DynamoLaunchControls:
    """``LaunchControlStore`` on the table (``services.repositories.operations``); a read
    of several scopes is served from the request's identity map (``scope``) where it was
    read ahead."""

    def __init__(self, scope: RequestScope = REQUEST) -> None:
        self._scope = scope

    def read(
        self, scopes: Sequence[str], *, counts: bool
    ) -> tuple[dict[str, Controls], dict[str, int]]:
        items, running = read(scopes, counts=counts, reads=self._scope.reads())
        return {scope: _to_controls(item) for scope, item in items.items()}, running

    def get(self, scope: str) -> Controls:
        try:
            item = LaunchControlsItem.get(*launch_controls_key(scope), consistent_read=True)
        except LaunchControlsItem.DoesNotExist:
            return Controls()
        return _to_controls(item)

    def running(self, scope: str) -> int:
        return sandbox_slots.active(scope)

    def put(self, scope: str, controls: Controls, *, by: str, at: datetime) -> None:
        Transaction().put(_item(scope, controls, by, at)).commit()
