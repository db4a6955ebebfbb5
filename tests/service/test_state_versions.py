"""Reading state versions over the in-memory store: the workspace's current version, a
version by ID, the history oldest first and the listing newest first, what a runner
session sees (its run's pin and what its run published), and tenancy (another
organization's workspace or version is 404, as an unknown one). There is no paging: a
workspace's versions are read whole. Publishing, which moves the workspace's state pointer
under the writer's lock and fence, is tested in test_state_publication.py."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from runplane.adapters.keys import DataKeys
from runplane.adapters.object_store import ObjectStore
from runplane.domain.entities import Workspace
from runplane.domain.errors import NotFound
from runplane.domain.identity import (
    RUNNER_PERMISSIONS,
    Forbidden,
    Permission,
    Principal,
    PrincipalKind,
)
from runplane.domain.state import FINALIZED, PENDING, StateVersion
from runplane.services.artifacts import ArtifactStore
from runplane.services.state import StateVersions
from tests.fakes import InMemoryArtifactRecords, InMemoryStateVersions
from tests.fakes_state import InMemoryStatePublication
from tests.service.conftest import Tier

AT = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class StateTier:
    tier: Tier
    reader: InMemoryStateVersions
    state: StateVersions
    admin: Principal
    workspace: Workspace


@pytest.fixture
def st(tier: Tier) -> StateTier:
    region = "us-east-1"
    # Reads never reach the artifact store (only downloads do); the guard in conftest
    # fails a test that does.
    artifacts = ArtifactStore(
        tier.clock,
        tier.ids,
        ObjectStore(boto3.client("s3", region_name=region), "artifacts"),
        DataKeys(boto3.client("kms", region_name=region), "alias/artifacts"),
        records=InMemoryArtifactRecords(),
    )
    reader = InMemoryStateVersions()
    state = StateVersions(
        tier.clock,
        tier.ids,
        tier.workspaces,
        lambda: artifacts,
        reader=reader,
        publication=InMemoryStatePublication(tier.directory, reader, tier.run_reader),
    )
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    return StateTier(tier, reader, state, admin, tier.workspaces.create(admin, "acme", "network"))


def _version(
    ws: Workspace, serial: int, *, status: str = FINALIZED, run_id: str | None = None
) -> StateVersion:
    return StateVersion(
        id=f"sv-{ws.name}-{serial}",
        workspace_id=ws.id,
        organization_id=ws.organization_id,
        serial=serial,
        lineage="lin-1",
        md5="0" * 32,
        status=status,
        created_at=AT + timedelta(seconds=serial),
        created_by="user:ada",
        provenance={"run_id": run_id} if run_id else None,
    )


def _with_state(st: StateTier, ws: Workspace, *serials: int) -> list[StateVersion]:
    """Versions published in turn, the last one current (as the pointer move leaves it)."""
    versions = [_version(ws, serial) for serial in serials]
    for version in versions:
        st.reader.add(version)
    last = versions[-1]
    st.tier.directory.workspaces[ws.id] = replace(
        st.tier.directory.get_workspace(ws.id),
        current_state_version_id=last.id,
        current_serial=last.serial,
        current_lineage=last.lineage,
    )
    return versions


def _runner(ws: Workspace, run_id: str) -> Principal:
    return Principal(
        PrincipalKind.RUNNER,
        "ses-1",
        ws.organization_id,
        RUNNER_PERMISSIONS,
        "runner",
        run_id=run_id,
        workspace_id=ws.id,
    )


def test_the_current_version_and_the_history_in_both_orders(st: StateTier) -> None:
    # Given a workspace with three versions and one still pending
    versions = _with_state(st, st.workspace, 3, 10, 12)
    st.reader.add(_version(st.workspace, 13, status=PENDING))
    # Then the current one is the last published
    assert st.state.current(st.admin, st.workspace.id) == versions[-1]
    # And the history is oldest first, the listing by names newest first, neither pending
    assert st.state.history(st.admin, st.workspace.id) == versions
    assert st.state.listing(st.admin, "acme", "network") == versions[::-1]
    # And a version reads back by ID
    assert st.state.get(st.admin, versions[0].id) == versions[0]


def test_a_workspace_without_state_has_no_current_version(st: StateTier) -> None:
    with pytest.raises(NotFound) as refused:
        st.state.current(st.admin, st.workspace.id)
    assert refused.value.http_status == 404
    assert st.state.history(st.admin, st.workspace.id) == []


def test_reading_state_needs_state_read(st: StateTier) -> None:
    (version,) = _with_state(st, st.workspace, 1)
    reader = Principal(
        PrincipalKind.USER,
        "dev",
        st.admin.organization_id,
        frozenset({Permission.WORKSPACE_READ}),
        "dev",
    )
    with pytest.raises(Forbidden):
        st.state.current(reader, st.workspace.id)
    with pytest.raises(Forbidden):
        st.state.get(reader, version.id)
    with pytest.raises(Forbidden):
        st.state.history(reader, st.workspace.id)


def test_another_organizations_state_is_not_found_as_an_unknown_one(st: StateTier) -> None:
    # Given another organization's workspace with state
    other = st.tier.tenancy.create_organization("someone-else")
    theirs = st.tier.workspaces.create(st.tier.admin(other), "someone-else", "theirs")
    (version,) = _with_state(st, theirs, 1)
    # When our admin reads it by workspace ID, by version ID, or by names
    # Then each is 404, saying no more than for something that does not exist
    for read in (
        lambda: st.state.current(st.admin, theirs.id),
        lambda: st.state.history(st.admin, theirs.id),
        lambda: st.state.get(st.admin, version.id),
        lambda: st.state.listing(st.admin, "someone-else", "theirs"),
    ):
        with pytest.raises(NotFound) as refused:
            read()
        assert refused.value.http_status == 404
    with pytest.raises(NotFound) as unknown:
        st.state.get(st.admin, "sv-unknown")
    assert unknown.value.to_body()["code"] == "NOT_FOUND"


def test_a_runner_sees_its_runs_pin_and_what_its_run_published(st: StateTier) -> None:
    # Given a run that pinned version 1, then a version 2 published by someone else and a
    # version 3 published by the run itself
    ws = st.workspace
    v1, v2 = _with_state(st, ws, 1, 2)
    v3 = _version(ws, 3, run_id="run-1")
    st.reader.add(v3)
    st.reader.add_run("run-1", v1.id)
    runner = _runner(ws, "run-1")
    # Then its current version is the pin, not the workspace's current one
    assert st.state.current(runner, ws.id) == v1
    # And it reads the pin and its own run's version, and nothing else
    assert st.state.history(runner, ws.id) == [v1, v3]
    assert st.state.get(runner, v3.id) == v3
    with pytest.raises(NotFound):
        st.state.get(runner, v2.id)


def test_a_runner_cannot_read_another_workspaces_state(st: StateTier) -> None:
    other = st.tier.workspaces.create(st.admin, "acme", "other")
    (theirs,) = _with_state(st, other, 1)
    st.reader.add_run("run-1", None)
    runner = _runner(st.workspace, "run-1")
    with pytest.raises(NotFound):
        st.state.current(runner, other.id)
    with pytest.raises(NotFound):
        st.state.get(runner, theirs.id)
    # And a run that pinned nothing has no current version
    with pytest.raises(NotFound):
        st.state.current(runner, st.workspace.id)
