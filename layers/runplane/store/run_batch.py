"""A run and some of its parts (they share its partition), read in one request."""

from __future__ import annotations

from collections.abc import Iterable

from runplane.domain.entities import Run
from runplane.domain.errors import NotFound
from runplane.store import batch, run_parts
from runplane.store.models import RunItem, run_key, run_part_key
from runplane.store.run_parts import RunPart
from runplane.store.runs import to_run


def run_and_parts(run_id: str, names: Iterable[str]) -> tuple[Run, dict[str, RunPart | None]]:
    """The run (``NotFound`` if absent) and each named part (None if absent), read
    together and strongly consistent, as one ``get`` of each would be."""
    wanted = list(dict.fromkeys(names))
    keys = {name: run_part_key(run_id, name) for name in wanted}
    found = batch.get_many([run_key(run_id), *keys.values()])
    raw_run = found.get(run_key(run_id))
    if raw_run is None:
        raise NotFound("run", run_id)
    parts = {
        name: run_parts.from_raw(found[key]) if key in found else None for name, key in keys.items()
    }
    return to_run(RunItem.from_raw_data(raw_run)), parts


def require(parts: dict[str, RunPart | None], run_id: str, name: str) -> RunPart:
    """A part ``run_and_parts`` must have found (as ``run_parts.require``)."""
    part = parts.get(name)
    if part is None:
        raise NotFound(f"{name} of run", run_id)
    return part
