"""Path filters of GitLab bindings over the in-memory stores: a binding's trigger and
ignore patterns are checked on bind; a merge request or push whose changed files (as
GitLab lists them) match none is recorded as skipped, downloads nothing and creates no
run (a skipped merge request gets a commit status saying so); an incomplete list makes
the change run, with the reason recorded."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import InvalidInput
from runplane.domain.github import Ingestion
from runplane.domain.path_filters import ChangedFiles
from runplane.services.github_path_filters import ingestion_view
from tests.service.conftest import Tier
from tests.service.test_gitlab_sources import ACCESS_TOKEN, SHA, Scene, gitlab_scene

BEFORE = "b" * 40


@pytest.fixture
def scene(tier: Tier) -> Scene:
    return gitlab_scene(tier)


def bound_with_filters(
    scene: Scene, org: Organization, *, trigger: list[str], ignore: list[str] | None = None
) -> Workspace:
    workspace = scene.tier.tenancy.create_workspace(org.id, "network")
    made = scene.sources.bind(
        scene.tier.admin(org),
        workspace.id,
        base_url="https://gitlab.example.com",
        project="acme/infra",
        branch="main",
        working_directory="",
        push_run_kind="plan_only",
        access_token=ACCESS_TOKEN,
        trigger_patterns=trigger,
        ignore_patterns=ignore or [],
    )
    scene.tokens[workspace.id] = made.webhook_token
    return workspace


def push_from(scene: Scene, before: str) -> dict[str, Any]:
    return {**scene.push(), "before": before}


def ingestion(scene: Scene, body: dict[str, Any]) -> Ingestion:
    found = scene.store.ingestion(body["source_id"])
    assert found is not None
    return found


def test_patterns_are_kept_normalised_and_shown_in_the_binding(scene: Scene) -> None:
    # Given an organization
    org = scene.tier.tenancy.create_organization("acme")
    # When a workspace is bound with trigger and ignore patterns
    workspace = bound_with_filters(
        scene, org, trigger=["/modules/**/*.tf", "modules/**/*.tf"], ignore=["**/*.md"]
    )
    # Then the binding shows them, a leading slash removed and the duplicate dropped
    shown = scene.sources.binding(scene.tier.admin(org), workspace.id).to_dict()
    assert shown["trigger_patterns"] == ["modules/**/*.tf"]
    assert shown["ignore_patterns"] == ["**/*.md"]


@pytest.mark.parametrize(
    ("trigger", "ignore", "pointer"),
    [
        (["modules/[ab].tf"], [], "/trigger_patterns/0"),
        (["*.tf"], ["docs/../x"], "/ignore_patterns/0"),
        (["a**/b"], [], "/trigger_patterns/0"),
        ([f"p{i}" for i in range(26)], [], "/trigger_patterns"),
    ],
)
def test_an_invalid_pattern_is_refused_and_writes_nothing(
    scene: Scene, trigger: list[str], ignore: list[str], pointer: str
) -> None:
    # Given an organization
    org = scene.tier.tenancy.create_organization("acme")
    # When a workspace is bound with an invalid pattern
    with pytest.raises(InvalidInput) as refused:
        bound_with_filters(scene, org, trigger=trigger, ignore=ignore)
    # Then it is refused pointing at the pattern, and nothing is bound
    assert refused.value.pointer == pointer
    assert scene.bindings.bindings == {}


def test_a_merge_request_touching_no_trigger_pattern_starts_nothing(scene: Scene) -> None:
    # Given a binding triggered by Terraform files only, and a merge request changing docs
    org = scene.tier.tenancy.create_organization("acme")
    workspace = bound_with_filters(scene, org, trigger=["**/*.tf"])
    scene.project.merge_request_changes[7] = ChangedFiles(("README.md", "docs/guide.md"))
    # When GitLab delivers the merge request and the source workflow runs
    body = scene.flow(workspace.id, "Merge Request Hook", scene.merge_request())
    # Then nothing was downloaded and no run was created
    source = ingestion(scene, body)
    assert scene.project.downloads == []
    assert source.status == "ready"
    assert source.targets == ()
    # And the ingestion records why, readable like GitHub's
    (decided,) = ingestion_view(source)["path_filters"]
    assert decided == {
        "workspace_id": workspace.id,
        "decision": "skipped",
        "reason": "none of the 2 changed files matches the trigger patterns",
        "files_considered": 2,
        "files_matched": 0,
        "fallback": None,
    }
    # And the merge request's commit status says it was skipped (not a failure)
    (status,) = scene.project.statuses
    assert status["state"] == "success"
    assert status["name"] == f"runplane/{workspace.id}"
    assert status["description"].startswith("skipped: none of the 2 changed files")
    assert status["target_url"].endswith(f"/api/v1/github/ingestions/{source.id}")


def test_a_merge_request_touching_a_trigger_pattern_plans(scene: Scene) -> None:
    # Given a binding triggered by Terraform files, and a merge request changing one
    org = scene.tier.tenancy.create_organization("acme")
    workspace = bound_with_filters(scene, org, trigger=["**/*.tf"])
    scene.project.merge_request_changes[7] = ChangedFiles(("README.md", "envs/main.tf"))
    # When GitLab delivers the merge request and the source workflow runs
    body = scene.flow(workspace.id, "Merge Request Hook", scene.merge_request())
    # Then the workspace's speculative plan was created, with the decision recorded
    source = ingestion(scene, body)
    (target,) = source.targets
    assert target.run_id is not None
    assert scene.project.downloads == [SHA]
    (decision,) = source.path_decisions
    assert decision.triggered
    assert decision.files_matched == 1
    assert scene.project.statuses[0]["state"] == "pending"


def test_a_push_whose_matching_files_are_all_ignored_starts_nothing(scene: Scene) -> None:
    # Given a binding ignoring the docs directory, and a push changing only docs
    org = scene.tier.tenancy.create_organization("acme")
    workspace = bound_with_filters(scene, org, trigger=[], ignore=["docs/**"])
    scene.project.compared[(BEFORE, SHA)] = ChangedFiles(("docs/a.tf", "docs/b.md"))
    # When GitLab delivers the push and the source workflow runs
    body = scene.flow(workspace.id, "Push Hook", push_from(scene, BEFORE))
    # Then the comparison of the previous head with the new one was skipped: no download,
    # no run, and a push posts no commit status
    source = ingestion(scene, body)
    assert source.targets == ()
    assert scene.project.downloads == []
    assert scene.project.statuses == []
    (decision,) = source.skipped
    assert decision.files_considered == 2
    assert decision.reason.endswith("an ignore pattern")


@pytest.mark.parametrize(
    ("before", "compared", "fallback", "words"),
    [
        ("0" * 40, None, "new_branch", "a new branch's first push"),
        (BEFORE, None, "unavailable", "GitLab did not list the changed files"),
        (
            BEFORE,
            ChangedFiles(("docs/a.md",), "truncated"),
            "truncated",
            "GitLab listed only part of the changed files",
        ),
    ],
)
def test_a_push_whose_changed_files_are_not_all_known_runs(
    scene: Scene, before: str, compared: ChangedFiles | None, fallback: str, words: str
) -> None:
    # Given a binding triggered by Terraform files only, and a push whose changed files
    # GitLab cannot list whole (a new branch, GitLab failing, or a cut list)
    org = scene.tier.tenancy.create_organization("acme")
    workspace = bound_with_filters(scene, org, trigger=["**/*.tf"])
    if compared is not None:
        scene.project.compared[(before, SHA)] = compared
    # When GitLab delivers the push and the source workflow runs
    body = scene.flow(workspace.id, "Push Hook", push_from(scene, before))
    # Then the push runs (none is skipped unseen), and the ingestion says why
    source = ingestion(scene, body)
    (target,) = source.targets
    assert target.run_id is not None
    (decision,) = source.path_decisions
    assert decision.triggered
    assert decision.fallback == fallback
    assert decision.reason.startswith(words)


def test_a_binding_without_filters_never_asks_for_the_changed_files(scene: Scene) -> None:
    # Given a binding with no path filters (and GitLab listing nothing)
    org = scene.tier.tenancy.create_organization("acme")
    workspace = bound_with_filters(scene, org, trigger=[])
    # When a push is delivered
    body = scene.flow(workspace.id, "Push Hook", push_from(scene, BEFORE))
    # Then it runs, recorded as unfiltered
    (decision,) = ingestion(scene, body).path_decisions
    assert decision.triggered
    assert decision.reason == "the binding has no path filters"
