"""Reading runs over the in-memory reader: permission, visibility and paging."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.identity import Forbidden, Permission, Principal
from runplane.domain.run import RunKind, RunStatus
from tests.service.conftest import Tier


def _workspace(tier: Tier, org_name: str = "acme") -> tuple[Principal, Workspace]:
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    return admin, tier.workspaces.create(admin, org_name, "network")


def _run(tier: Tier, workspace: Workspace, run_id: str, seconds: int = 0) -> Run:
    at = tier.clock.current + timedelta(seconds=seconds)
    run = Run(
        id=run_id,
        organization_id=workspace.organization_id,
        workspace_id=workspace.id,
        kind=RunKind.PLAN_ONLY,
        status=RunStatus.PLAN_COMPLETE,
        version=3,
        created_at=at,
        updated_at=at,
        created_by="user:ada",
    )
    tier.run_reader.add(run)
    return run


def test_a_run_is_read_by_whoever_may_read_runs_in_its_organization(tier: Tier) -> None:
    # Given a run in acme's workspace
    admin, workspace = _workspace(tier)
    run = _run(tier, workspace, "run-1")
    # When acme's admin reads it, and lists the workspace's runs
    # Then both show it
    assert tier.runs.get(admin, "run-1") == run
    assert tier.runs.list(admin, workspace.id) == [run]


def test_without_the_read_permission_a_run_is_forbidden(tier: Tier) -> None:
    # Given a run, and a principal of its organization without run:read
    admin, workspace = _workspace(tier)
    _run(tier, workspace, "run-1")
    reader = replace(admin, permissions=admin.permissions - {Permission.RUN_READ})
    # When that principal reads the run or lists the workspace's runs
    # Then both are refused for the missing permission (403), not hidden
    with pytest.raises(Forbidden):
        tier.runs.get(reader, "run-1")
    with pytest.raises(Forbidden):
        tier.runs.list(reader, workspace.id)


def test_another_organizations_run_is_not_found(tier: Tier) -> None:
    # Given a run in another organization's workspace
    admin, _ = _workspace(tier)
    _, theirs = _workspace(tier, "other")
    _run(tier, theirs, "run-theirs")
    # When acme's admin asks for it, or for that workspace's runs
    # Then neither reveals it: not found, as an unknown run is
    with pytest.raises(NotFound) as hidden:
        tier.runs.get(admin, "run-theirs")
    with pytest.raises(NotFound) as unknown:
        tier.runs.get(admin, "run-none")
    assert hidden.value.message == unknown.value.message.replace("run-none", "run-theirs")
    with pytest.raises(NotFound):
        tier.runs.list(admin, theirs.id)


def test_a_workspace_scoped_principal_does_not_see_another_workspaces_run(tier: Tier) -> None:
    admin, workspace = _workspace(tier)
    other = tier.workspaces.create(admin, "acme", "storage")
    _run(tier, other, "run-other")
    scoped = replace(admin, workspace_id=workspace.id)
    with pytest.raises(NotFound):
        tier.runs.get(scoped, "run-other")


def test_a_workspaces_runs_are_paged_newest_first(tier: Tier) -> None:
    # Given five runs in a workspace, one a second after another, and one elsewhere
    admin, workspace = _workspace(tier)
    for n in range(5):
        _run(tier, workspace, f"run-{n}", seconds=n)
    other = tier.workspaces.create(admin, "acme", "storage")
    _run(tier, other, "run-elsewhere", seconds=10)
    # When the workspace's runs are read two to a page
    pages = [tier.runs.page(admin, workspace.id, number, 2) for number in (1, 2, 3, 4)]
    # Then the pages hold the newest first, the last one partly, and past the end none
    assert [[r.id for r in p.items] for p in pages] == [
        ["run-4", "run-3"],
        ["run-2", "run-1"],
        ["run-0"],
        [],
    ]
    # And a page counts the runs up to it and one more (never the whole history): a page
    # with runs after it says one more page follows, the last ones know the total
    assert [(p.total, p.pages) for p in pages] == [(3, 2), (5, 3), (5, 3), (5, 3)]


@pytest.mark.parametrize(("number", "size"), [(0, 20), (1, 0), (1, 101)])
def test_a_page_out_of_range_is_invalid_input(tier: Tier, number: int, size: int) -> None:
    admin, workspace = _workspace(tier)
    with pytest.raises(InvalidInput):
        tier.runs.page(admin, workspace.id, number, size)
