"""Launch controls and running-sandbox counts of several scopes, read in one request."""

from __future__ import annotations

from collections.abc import Sequence

from runplane.store import batch
from runplane.store.models import (
    LaunchControlsItem,
    SandboxCountItem,
    launch_controls_key,
    sandbox_count_key,
)


def read(
    scopes: Sequence[str], *, counts: bool
) -> tuple[dict[str, LaunchControlsItem | None], dict[str, int]]:
    """Each scope's controls item (None: never set) and, with ``counts``, how many
    sandboxes it runs: one strongly consistent request for all of them."""
    keys = [launch_controls_key(scope) for scope in scopes]
    if counts:
        keys += [sandbox_count_key(scope) for scope in scopes]
    found = batch.get_many(keys)
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
