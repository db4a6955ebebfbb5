"""A run and some of its parts (they share its partition), read in one request; and the
reads ahead that serve a block's first reads (in the request's identity map, through the
``store.request_reads`` scope they are given)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from runplane.domain.artifacts import ArtifactRecord
from runplane.domain.entities import Run
from runplane.domain.errors import NotFound
from runplane.domain.parts import RunPart, required_part
from runplane.domain.read_ahead import Read, ReadAhead
from runplane.store import artifacts, batch, prefetch, run_parts, variable_sets
from runplane.store.models import (
    RunItem,
    artifact_key,
    cloud_settings_key,
    configuration_version_key,
    launch_controls_key,
    policy_set_tally_key,
    run_key,
    run_part_key,
    sandbox_count_key,
    tally_key,
    workspace_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.runs import pinned_state_of, to_run


def run_and_parts(
    run_id: str, names: Iterable[str], *, reads: IdentityMap
) -> tuple[Run, dict[str, RunPart | None]]:
    """The run (``NotFound`` if absent) and each named part (None if absent), read
    together and strongly consistent, as one ``get`` of each would be (those ``reads``
    holds served from it)."""
    run, parts, _ = run_parts_and_artifacts(run_id, names, (), reads=reads)
    return run, parts


def run_parts_and_artifacts(
    run_id: str, names: Iterable[str], artifact_ids: Sequence[str], *, reads: IdentityMap
) -> tuple[Run, dict[str, RunPart | None], dict[str, ArtifactRecord]]:
    """``run_and_parts`` and the records of ``artifact_ids`` (those found), in the same
    request: a runner's manifest names its inputs' records up front."""
    wanted = list(dict.fromkeys(names))
    keys = {name: run_part_key(run_id, name) for name in wanted}
    records = {artifact_id: artifact_key(artifact_id) for artifact_id in artifact_ids}
    found = batch.get_many([run_key(run_id), *keys.values(), *records.values()], reads=reads)
    raw_run = found.get(run_key(run_id))
    if raw_run is None:
        raise NotFound("run", run_id)
    parts = {
        name: run_parts.from_raw(found[key]) if key in found else None for name, key in keys.items()
    }
    artifact_records = {
        artifact_id: artifacts.from_raw(found[key])
        for artifact_id, key in records.items()
        if key in found
    }
    return to_run(RunItem.from_raw_data(raw_run)), parts, artifact_records


def require(parts: dict[str, RunPart | None], run_id: str, name: str) -> RunPart:
    """A part ``run_and_parts`` must have found (as ``run_parts.require``)."""
    return required_part(parts, run_id, name)


@contextmanager
def reading_ahead(
    run_id: str,
    names: Iterable[str],
    *,
    workspace_id: str | None = None,
    control_scopes: Sequence[str] = (),
    artifact_ids: Sequence[str] = (),
    policy_tally_of: str | None = None,
    scope: RequestScope = REQUEST,
) -> Iterator[None]:
    """Read the run, its parts ``names``, the workspace, the launch controls of
    ``control_scopes``, the records of ``artifact_ids`` and the policy-set tally of the
    organization ``policy_tally_of`` in one consistent request, and serve each (found or
    absent) to the block's first read of it (in the identity map of ``scope``'s request:
    once each, and none after a write).

    A key the block never reads costs nothing more; one it reads under another ID (a
    workspace that is not the run's) is read as it would have been."""
    keys = [run_key(run_id), *(run_part_key(run_id, name) for name in names)]
    if workspace_id is not None:
        keys.append(workspace_key(workspace_id))
    keys += [launch_controls_key(control) for control in control_scopes]
    keys += [artifact_key(artifact_id) for artifact_id in artifact_ids]
    if policy_tally_of is not None:
        keys.append(policy_set_tally_key(policy_tally_of))
    with _ahead(keys, scope):
        yield


def engine_start_items(run_id: str, workspace_id: str, *, reads: IdentityMap) -> ReadAhead:
    """What the reads a phase's engine starts with all read: its run, its workspace, the
    state version the run pinned and, where this process knows which it is, that
    version's artifact record (found or absent). The run, which names the pin, comes
    first (from what this request's authentication read, where it did); the others in
    one more request (each served from ``reads`` if it holds it)."""
    from runplane.store import state_versions  # only the Cloud API's runner calls

    raw_run = batch.get_many([run_key(run_id)], reads=reads).get(run_key(run_id))
    if raw_run is None:
        raise NotFound("run", run_id)
    asked = [Read.workspace(workspace_id)]
    pinned = pinned_state_of(raw_run)
    if pinned:
        asked.append(Read.state_version(pinned))
        artifact_id = state_versions.known_state_artifact(pinned)
        if artifact_id:
            asked.append(Read.artifact(artifact_id))
    found = batch.get_many([prefetch.key_of(read) for read in asked], reads=reads)
    return ReadAhead.of({Read.run(run_id): raw_run}).with_(prefetch.read_ahead(asked, found))


@contextmanager
def creation_reads(
    workspace_id: str,
    configuration_version_id: str,
    control_scopes: Sequence[str],
    organization_id: str | None = None,
    *,
    scope: RequestScope = REQUEST,
) -> Iterator[None]:
    """What creating a run reads first (its workspace, its configuration version, the
    tally of the workspace's variables, its cloud settings, the launch controls and
    sandbox counts of ``control_scopes``, and the tally of ``organization_id``'s
    variable sets), in one request, served as ``reading_ahead`` serves."""
    keys = [
        workspace_key(workspace_id),
        configuration_version_key(configuration_version_id),
        tally_key(workspace_id),
        cloud_settings_key(workspace_id),
        *(launch_controls_key(control) for control in control_scopes),
        *(sandbox_count_key(control) for control in control_scopes),
        *([variable_sets.tally_key(organization_id)] if organization_id else []),
    ]
    with _ahead(keys, scope):
        yield


@contextmanager
def _ahead(keys: Sequence[tuple[str, str]], scope: RequestScope) -> Iterator[None]:
    found = batch.get_many(keys, reads=scope.reads())
    with scope.serving(found, absent=[key for key in keys if key not in found]):
        yield
