"""A pull request's comment and check runs over the in-memory stores: one comment per
organization and pull request, created once and edited in place on every push and run
report; a check run per workspace and commit; GitHub failing a post is retried and never
holds back the runs. Over real HTTP with the real engine: tests/e2e/test_github_pr_comments.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from runplane.domain.errors import GitHubUnavailable
from runplane.domain.identity import Principal
from runplane.domain.plan_view import build_view
from runplane.domain.pr_comments import ReportRecord, comment_key, comment_marker
from runplane.services.artifacts import ArtifactStore
from runplane.services.github import GitHubSources
from runplane.services.github_installations import ConnectConfig, GitHubInstallations
from runplane.services.github_reports import PullRequestReports
from runplane.services.plan_views import PlanState, PlanViews, RunPlan
from tests.fakes import InMemoryArtifactRecords, InMemoryObjects, LocalDataKeys
from tests.fakes_access import InMemoryGitHubInstallations, InMemoryWebSessions
from tests.fakes_github import InMemoryGitHubSources
from tests.fakes_github_reports import InMemoryGitHubReports
from tests.github_fake import tarball
from tests.service.conftest import Tier
from tests.service.test_github_sources import (
    CONFIG,
    REPOSITORY,
    KnownSecrets,
    Scene,
    ScriptedApp,
    StartedWorkflow,
)

SHAS = ["1" * 40, "2" * 40, "3" * 40]


class ReportingApp(ScriptedApp):
    """The scripted App, with comments and check runs; ``failures`` answers that many
    comment or check-run posts with GitHub's 502."""

    def __init__(self) -> None:
        super().__init__({})
        self.comments: dict[int, dict[str, Any]] = {}
        self.checks: dict[int, dict[str, Any]] = {}
        self.failures = 0
        self._ids = 100

    def _fail(self) -> None:
        if self.failures:
            self.failures -= 1
            raise GitHubUnavailable("GitHub answered 502; retrying later")

    def _new_id(self) -> int:
        self._ids += 1
        return self._ids

    def create_comment(self, token: str, repository: str, number: int, body: str) -> int:
        self._fail()
        found = self._new_id()
        self.comments[found] = {"repository": repository, "number": number, "body": body}
        self.comments[found]["edits"] = 0
        return found

    def edit_comment(self, token: str, repository: str, comment_id: int, body: str) -> None:
        self._fail()
        self.comments[comment_id].update(body=body, edits=self.comments[comment_id]["edits"] + 1)

    def find_comment(self, token: str, repository: str, number: int, marker: str) -> int | None:
        self._fail()
        return next(
            (i for i, c in self.comments.items() if c["body"].startswith(marker)),
            None,
        )

    def create_check_run(self, token: str, repository: str, check: Mapping[str, Any]) -> int:
        self._fail()
        found = self._new_id()
        self.checks[found] = dict(check) | {"updates": 0}
        return found

    def update_check_run(
        self, token: str, repository: str, check_run_id: int, check: Mapping[str, Any]
    ) -> None:
        self._fail()
        self.checks[check_run_id].update(check)
        self.checks[check_run_id]["updates"] += 1


class OnePlan(PlanViews):
    """Every run's plan: one bucket created (the plan the engine would have made)."""

    def of(self, principal: Principal, run_id: str, page: int = 1, page_size: int = 100) -> RunPlan:
        change = {"actions": ["create"], "before": None, "after": {"bucket": "logs"}}
        document = {
            "format_version": "0.2",
            "resource_changes": [
                {"address": "aws_s3_bucket.logs", "type": "aws_s3_bucket", "change": change}
            ],
        }
        return RunPlan(run_id, PlanState.SHOWN, build_view(document))


class ReportScene(Scene):
    app: ReportingApp
    reports: InMemoryGitHubReports

    def pushed(self, installation_id: int, sha: str, action: str = "synchronize") -> str:
        """A pull request event for ``sha`` through ingestion and run creation."""
        self.app.archives[(REPOSITORY, sha)] = tarball(
            f"acme-infra-{sha[:7]}", {"main.tf": 'output "x" { value = 1 }\n'}
        )
        self.tier.clock.advance(timedelta(seconds=5))
        body = self.flow("pull_request", self.pull_request(installation_id, action, sha))
        return str(body["source_id"])

    def run_ids(self, source_id: str) -> list[str]:
        source = self.store.ingestion(source_id)
        assert source is not None
        return [t.run_id for t in source.targets if t.run_id]


@pytest.fixture
def scene(tier: Tier) -> ReportScene:
    installations = InMemoryGitHubInstallations()
    store = InMemoryGitHubSources(installations, tier.configurations)
    app = ReportingApp()
    reports = InMemoryGitHubReports()
    artifacts = ArtifactStore(
        tier.clock, tier.ids, InMemoryObjects(), LocalDataKeys(), records=InMemoryArtifactRecords()
    )
    sources = GitHubSources(
        tier.clock,
        tier.ids,
        tier.workspaces,
        tier.runs,
        # Where a report reads its run: the tier's ledger (the runs were created there).
        SimpleNamespace(runs=SimpleNamespace(get=tier.run_reader.get_run)),  # type: ignore[arg-type]
        artifacts,
        StartedWorkflow(),
        KnownSecrets(),
        CONFIG,
        GitHubInstallations(
            tier.clock,
            tier.ids,
            KnownSecrets(),
            ConnectConfig(
                web_url="https://github.example",
                api_url=CONFIG.api_url,
                app_slug="runplane",
                client_id="Iv1.runplane",
                client_secret_arn=None,
                max_installations=5,
            ),
            installations,
            InMemoryWebSessions(),
        ),
        store,
        tier.auto_destroys,
        app=lambda *args: app,
        reports=PullRequestReports(
            tier.clock,
            reports,
            tier.runs,
            tier.workspaces,
            OnePlan(tier.runs, artifacts, tier.new_unit),
            "https://runplane.example",
        ),
    )
    made = ReportScene(tier, installations, store, StartedWorkflow(), app, sources)
    made.reports = reports
    return made


def test_one_comment_is_created_then_edited_in_place_across_three_pushes(
    scene: ReportScene,
) -> None:
    # Given two workspaces bound to the repository
    org = scene.organization("acme", 10)
    network = scene.bound(org, "network", 10)
    scene.bound(org, "dns", 10)

    # When a pull request is opened, then pushed to twice, each run reporting its status
    sources = [scene.pushed(10, SHAS[0], "opened")]
    sources += [scene.pushed(10, sha) for sha in SHAS[1:]]
    for run_id in scene.run_ids(sources[-1]):
        scene.sources.report_status(run_id)

    # Then there is one comment, edited in place, showing the last commit's runs
    assert len(scene.app.comments) == 1
    comment = next(iter(scene.app.comments.values()))
    assert (comment["repository"], comment["number"]) == (REPOSITORY, 7)
    assert comment["edits"] == 4
    body = comment["body"]
    assert body.startswith(comment_marker(org.id))
    assert f"`{SHAS[2][:12]}`" in body
    assert "| network | dispatch&#95;pending | +1 ~0 -0 |" in body
    assert "| dns |" in body
    assert "aws&#95;s3&#95;bucket.logs" in body
    last_runs = scene.run_ids(sources[-1])
    assert all(f"https://runplane.example/ui/runs/{r}" in body for r in last_runs)
    # And each commit got a check run per workspace, the last ones updated by the reports
    assert sorted(c["head_sha"] for c in scene.app.checks.values()) == sorted(SHAS * 2)
    last = [c for c in scene.app.checks.values() if c["head_sha"] == SHAS[2]]
    assert {c["name"] for c in last} >= {f"runplane/{network.id}"}
    assert [c["updates"] for c in last] == [1, 1]
    assert all(c["status"] == "in_progress" for c in last)


def test_a_report_of_an_older_push_leaves_the_comment_to_the_newer_one(
    scene: ReportScene,
) -> None:
    # Given a pull request pushed to twice
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    first = scene.pushed(10, SHAS[0], "opened")
    scene.pushed(10, SHAS[1])
    comment = next(iter(scene.app.comments.values()))
    before = dict(comment)

    # When the first push's run reports late
    scene.sources.report_status(scene.run_ids(first)[0])

    # Then the comment still shows the newer commit, untouched
    assert comment == before
    assert f"`{SHAS[1][:12]}`" in comment["body"]


def test_github_failing_the_comment_never_fails_the_runs_and_the_report_is_retried(
    scene: ReportScene,
) -> None:
    # Given GitHub answering 502 to every comment and check-run post for a while
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    scene.app.failures = 100

    # When a pull request is opened
    source = scene.pushed(10, SHAS[0], "opened")

    # Then its run was created all the same, and nothing was posted
    [run_id] = scene.run_ids(source)
    assert scene.app.comments == {}
    assert scene.app.checks == {}
    # And its report fails as worth retrying while GitHub fails ...
    with pytest.raises(GitHubUnavailable):
        scene.sources.report_status(run_id)
    # ... and, once GitHub answers, the retry posts one comment and one check run
    scene.app.failures = 0
    scene.sources.report_status(run_id)
    scene.sources.report_status(run_id)
    assert len(scene.app.comments) == 1
    assert len(scene.app.checks) == 1


def test_a_comment_being_created_by_another_report_is_not_created_twice(
    scene: ReportScene,
) -> None:
    # Given a pull request whose comment another reporter has just claimed
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    key = comment_key(org.id, REPOSITORY, 7)
    claim = ReportRecord(key, org.id, scene.tier.clock.now() + timedelta(seconds=5))
    scene.reports.claim_report(claim)

    # When a report of the pull request's run comes meanwhile
    source = scene.pushed(10, SHAS[0], "opened")
    run_id = scene.run_ids(source)[0]
    with pytest.raises(GitHubUnavailable):
        scene.sources.report_status(run_id)

    # Then it posted no comment (it is retried once the claim is settled)
    assert scene.app.comments == {}


def test_a_claim_left_by_a_crashed_report_is_taken_over_without_a_second_comment(
    scene: ReportScene,
) -> None:
    # Given a report that posted the comment and crashed before recording its ID
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    source = scene.pushed(10, SHAS[0], "opened")
    [comment_id] = scene.app.comments
    key = comment_key(org.id, REPOSITORY, 7)
    recorded = scene.reports.report(key)
    assert recorded is not None
    scene.reports.records[key] = ReportRecord(key, org.id, recorded.claimed_at)

    # When a report comes once the claim is stale
    scene.tier.clock.advance(timedelta(minutes=3))
    scene.sources.report_status(scene.run_ids(source)[0])

    # Then it found the comment by its marker and edited it: still one comment
    assert list(scene.app.comments) == [comment_id]
    assert scene.app.comments[comment_id]["edits"] == 1
    settled = scene.reports.report(key)
    assert settled is not None
    assert settled.github_id == comment_id


def test_two_organizations_get_a_comment_each_with_only_their_workspaces(
    scene: ReportScene,
) -> None:
    # Given two organizations, each with its installation, binding the same repository
    acme = scene.organization("acme", 10)
    scene.bound(acme, "acme-network", 10)
    beta = scene.organization("beta", 20)
    scene.bound(beta, "beta-network", 20)

    # When each installation delivers the same pull request
    scene.pushed(10, SHAS[0], "opened")
    scene.pushed(20, SHAS[0], "opened")

    # Then each organization has its own comment, naming only its own workspace
    bodies = {c["body"].split("\n", 1)[0]: c["body"] for c in scene.app.comments.values()}
    assert set(bodies) == {comment_marker(acme.id), comment_marker(beta.id)}
    assert "acme-network" in bodies[comment_marker(acme.id)]
    assert "beta-network" not in bodies[comment_marker(acme.id)]
    assert "acme-network" not in bodies[comment_marker(beta.id)]
