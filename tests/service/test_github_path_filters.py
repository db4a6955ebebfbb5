"""Path filters over the in-memory stores: a binding's trigger and ignore patterns decide
per bound workspace whether a push or pull request runs; the decision, with its counts,
is recorded on the ingestion; a skipped pull request gets a commit status saying so; an
incomplete list of changed files runs the change. The glob rules themselves are
tests/unit/domain/test_path_filters.py; GitHub's real API shape is end to end
(tests/e2e/test_github_path_filters.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.github import Ingestion
from runplane.domain.identity import Principal
from runplane.domain.path_filters import FALLBACK_TRUNCATED, ChangedFiles
from tests.service.test_github_sources import REPOSITORY, SHA, Scene, _serve_commit
from tests.service.test_github_sources import scene as scene_fixture  # noqa: F401

BEFORE = "a" * 40


@pytest.fixture
def scene(scene_fixture: Scene) -> Iterator[Scene]:  # noqa: F811
    """The GitHub sources scene of tests/service/test_github_sources.py. Its organization
    is forgotten with it: a later scene may be given the same id()."""
    yield scene_fixture
    _ORGS.pop(id(scene_fixture), None)


def _bind(
    scene: Scene, workspace: Workspace, *, triggers: list[str], ignores: tuple[str, ...] = ()
) -> None:
    scene.sources.bind(
        _admin(scene),
        workspace.id,
        repository=REPOSITORY,
        branch="main",
        working_directory="envs/prod",
        installation_id=10,
        push_run_kind="plan_only",
        trigger_patterns=triggers,
        ignore_patterns=list(ignores),
    )


_ORGS: dict[int, Organization] = {}


def _admin(scene: Scene) -> Principal:
    return scene.tier.admin(_ORGS[id(scene)])


def _filtered(
    scene: Scene, name: str, *, triggers: list[str], ignores: tuple[str, ...] = ()
) -> Workspace:
    """A workspace of acme (holding installation 10) bound with path filters."""
    if id(scene) not in _ORGS:
        _ORGS[id(scene)] = scene.organization("acme", 10)
    workspace = scene.tier.tenancy.create_workspace(_ORGS[id(scene)].id, name)
    _bind(scene, workspace, triggers=triggers, ignores=ignores)
    return workspace


def _ingestion(scene: Scene, source_id: str) -> Ingestion:
    found = scene.store.ingestion(source_id)
    assert found is not None
    return found


def test_a_pull_request_touching_only_docs_starts_nothing_and_records_why(scene: Scene) -> None:
    # Given a workspace bound with trigger patterns and the pull request's files: docs only
    workspace = _filtered(scene, "first", triggers=["modules/**"])
    _serve_commit(scene)
    scene.app.pull_request_changes[7] = ChangedFiles(("docs/guide.md", "README.md"))
    # When the pull request is opened and its workflow runs
    body = scene.flow("pull_request", scene.pull_request(10))
    # Then no configuration or run was made, the archive was not even downloaded,
    source = _ingestion(scene, body["source_id"])
    assert (source.status, source.targets, source.archive_sha256) == ("ready", (), None)
    assert scene.store.configurations == {}
    # the decision is recorded with its counts,
    [decision] = source.path_decisions
    assert decision.to_dict() == {
        "workspace_id": workspace.id,
        "decision": "skipped",
        "reason": "none of the 2 changed files matches the trigger patterns",
        "files_considered": 2,
        "files_matched": 0,
        "fallback": None,
    }
    # and the pull request's commit status says it was skipped
    [status] = scene.app.statuses
    assert status["state"] == "success"
    assert status["context"] == f"runplane/{workspace.id}"
    assert status["description"].startswith("skipped: none of the 2 changed files")
    assert status["target_url"].endswith(f"/api/v1/github/ingestions/{source.id}")


def test_a_pull_request_touching_the_working_directory_runs(scene: Scene) -> None:
    # Given the same binding and a change inside its working directory
    workspace = _filtered(scene, "first", triggers=["modules/**"])
    _serve_commit(scene)
    scene.app.pull_request_changes[7] = ChangedFiles(("docs/guide.md", "envs/prod/main.tf"))
    # When the pull request is opened
    body = scene.flow("pull_request", scene.pull_request(10))
    # Then its speculative plan was made, and the decision says what matched
    source = _ingestion(scene, body["source_id"])
    assert [t.workspace_id for t in source.targets] == [workspace.id]
    assert source.targets[0].run_id is not None
    [decision] = source.path_decisions
    assert (decision.triggered, decision.files_considered, decision.files_matched) == (True, 2, 1)
    assert [s["state"] for s in scene.app.statuses] == ["pending"]


def test_each_binding_decides_for_itself(scene: Scene) -> None:
    # Given two workspaces on one branch: one for modules, one ignoring markdown
    modules = _filtered(scene, "first", triggers=["modules/**"])
    anything = _filtered(scene, "second", triggers=[], ignores=("**/*.md",))
    _serve_commit(scene)
    scene.app.compared[(BEFORE, SHA)] = ChangedFiles(("main.tf", "docs/a.md"))
    # When a push changes a root file and a doc
    body = scene.flow("push", {**scene.push(10), "before": BEFORE})
    # Then only the second runs, and both decisions are recorded
    source = _ingestion(scene, body["source_id"])
    assert [t.workspace_id for t in source.targets] == [anything.id]
    decided = {d.workspace_id: d.triggered for d in source.path_decisions}
    assert decided == {modules.id: False, anything.id: True}
    # and a push gets no commit status
    assert scene.app.statuses == []


def test_a_change_whose_files_all_match_ignore_patterns_is_skipped(scene: Scene) -> None:
    _filtered(scene, "first", triggers=[], ignores=("**/*.md",))
    _serve_commit(scene)
    scene.app.compared[(BEFORE, SHA)] = ChangedFiles(("envs/prod/README.md",))
    body = scene.flow("push", {**scene.push(10), "before": BEFORE})
    [decision] = _ingestion(scene, body["source_id"]).path_decisions
    assert not decision.triggered
    assert "ignore pattern" in decision.reason


@pytest.mark.parametrize(
    ("before", "forced", "changes", "fallback"),
    [
        ("0" * 40, False, None, "new_branch"),
        (BEFORE, True, None, "force_push"),
        (BEFORE, False, None, "unavailable"),  # GitHub refuses the comparison
        (BEFORE, False, ChangedFiles(("docs/a.md",) * 300, FALLBACK_TRUNCATED), "truncated"),
    ],
)
def test_an_incomplete_list_of_changed_files_runs_and_records_the_fallback(
    scene: Scene, before: str, forced: bool, changes: ChangedFiles | None, fallback: str
) -> None:
    # Given a filtered binding and a push whose changed files cannot all be known
    workspace = _filtered(scene, "first", triggers=["modules/**"])
    _serve_commit(scene)
    if changes is not None:
        scene.app.compared[(before, SHA)] = changes
    # When the push is ingested
    body = scene.flow("push", {**scene.push(10), "before": before, "forced": forced})
    # Then the workspace runs (fail open), and the fallback is recorded
    source = _ingestion(scene, body["source_id"])
    assert [t.workspace_id for t in source.targets] == [workspace.id]
    [decision] = source.path_decisions
    assert (decision.triggered, decision.fallback) == (True, fallback)


def test_a_pull_request_listing_failure_runs(scene: Scene) -> None:
    # Given GitHub fails to list the pull request's files
    workspace = _filtered(scene, "first", triggers=["modules/**"])
    _serve_commit(scene)
    body = scene.flow("pull_request", scene.pull_request(10))
    source = _ingestion(scene, body["source_id"])
    assert [t.workspace_id for t in source.targets] == [workspace.id]
    assert source.path_decisions[0].fallback == "unavailable"


def test_bindings_without_filters_never_ask_for_changed_files(scene: Scene) -> None:
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    _serve_commit(scene)
    body = scene.flow("push", {**scene.push(10), "before": BEFORE})
    source = _ingestion(scene, body["source_id"])
    assert scene.app.file_listings == 0
    assert [d.reason for d in source.path_decisions] == ["the binding has no path filters"]


def test_bad_patterns_bind_nothing(scene: Scene) -> None:
    # Given a bound workspace
    workspace = _filtered(scene, "first", triggers=["modules/**"])
    before = scene.written()
    # When it is rebound with a bad pattern
    with pytest.raises(InvalidInput) as refused:
        _bind(scene, workspace, triggers=["modules/**", "src/[ab]/*.tf"])
    # Then 422 pointing at it, and nothing changed
    assert refused.value.pointer == "/trigger_patterns/1"
    assert scene.written() == before
    assert scene.sources.binding(_admin(scene), workspace.id).trigger_patterns == ("modules/**",)


def test_an_ingestion_is_read_only_by_its_organization(scene: Scene) -> None:
    # Given an ingestion of org acme, and another organization
    _filtered(scene, "first", triggers=["modules/**"])
    other = scene.organization("beta", 20)
    _serve_commit(scene)
    scene.app.pull_request_changes[7] = ChangedFiles(("docs/guide.md",))
    body = scene.flow("pull_request", scene.pull_request(10))
    # When each reads it
    mine = scene.sources.ingestion(_admin(scene), body["source_id"])
    # Then acme sees its decisions; beta is told it does not exist
    assert mine.skipped[0].files_considered == 1
    with pytest.raises(NotFound):
        scene.sources.ingestion(scene.tier.admin(other), body["source_id"])
    confined = replace(_admin(scene), workspace_id="ws-elsewhere")
    with pytest.raises(NotFound):
        scene.sources.ingestion(confined, body["source_id"])
