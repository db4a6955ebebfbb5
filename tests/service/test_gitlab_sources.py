"""GitLab sources over the in-memory stores: a binding seals its project access token and
hands out its webhook token once; a delivery is accepted only with that token, recorded
once, and starts one ingestion of the bound workspace, which fetches the commit with the
token and creates the run (a merge request's as a speculative plan, with commit
statuses). Every refusal writes nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import IO, Any

import pytest

from runplane.adapters.github import Archive
from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import (
    GitHubUnavailable,
    InvalidBody,
    InvalidInput,
    NotFound,
    SourceRefused,
    WebhookReplayRefused,
    WebhookTokenInvalid,
    WebhookTooLarge,
)
from runplane.domain.path_filters import ChangedFiles
from runplane.domain.run import RunKind
from runplane.services.artifacts import ArtifactStore
from runplane.services.github_reports import PullRequestReports
from runplane.services.gitlab import GitLabConfig, GitLabSources
from tests.fakes import InMemoryArtifactRecords, InMemoryObjects, LocalDataKeys, RecordingWorkflow
from tests.fakes_access import InMemoryGitHubInstallations
from tests.fakes_github import InMemoryGitHubSources
from tests.fakes_github_reports import InMemoryGitHubReports
from tests.fakes_gitlab import InMemoryGitLabBindings
from tests.github_fake import tarball
from tests.service.conftest import Tier
from tests.service.test_github_reports import OnePlan

SHA = "c" * 40
ACCESS_TOKEN = "glpat-project-access-token-123"
CONFIG = GitLabConfig(
    delivery_window=timedelta(hours=1),
    webhook_max_bytes=64 * 1024,
    archive_max_bytes=1024 * 1024,
    review_url="https://runplane.example",
)


class StartedWorkflow(RecordingWorkflow):
    """Records the source workflow executions started (name and input)."""

    def __init__(self) -> None:
        super().__init__()
        self.named: list[tuple[str, dict[str, str]]] = []

    def start_named(self, name: str, ids: Mapping[str, str]) -> None:
        self.named.append((name, dict(ids)))


@dataclass
class ScriptedProject:
    """GitLab's API for one project without HTTP: archives served, statuses posted."""

    archives: dict[str, bytes]
    statuses: list[Mapping[str, str]] = field(default_factory=list)
    opened_with: list[tuple[str, str, str]] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    # What GitLab lists as changed, by merge request and by (before, after); anything
    # else is refused, as GitLab would refuse it.
    merge_request_changes: dict[int, ChangedFiles] = field(default_factory=dict)
    compared: dict[tuple[str, str], ChangedFiles] = field(default_factory=dict)

    def merge_request_files(self, merge_request: int) -> ChangedFiles:
        if merge_request not in self.merge_request_changes:
            raise SourceRefused("GitLab refused the merge request's changed files (403)")
        return self.merge_request_changes[merge_request]

    def compare_files(self, before: str, after: str) -> ChangedFiles:
        if (before, after) not in self.compared:
            raise GitHubUnavailable("GitLab answered 503 for the comparison; retrying later")
        return self.compared[(before, after)]

    def download_archive(self, sha: str, sink: IO[bytes], max_bytes: int) -> Archive:
        self.downloads.append(sha)
        data = self.archives[sha]
        sink.write(data)
        return Archive(hashlib.sha256(data).hexdigest(), len(data))

    def post_status(self, sha: str, status: Mapping[str, str]) -> None:
        self.statuses.append(dict(status))

    notes: dict[int, tuple[int, str]] = field(default_factory=dict)
    note_edits: int = 0
    # A note request then fails with this error (GitLab down, or refusing).
    notes_fail_with: Exception | None = None

    def create_note(self, merge_request: int, body: str) -> int:
        self._note_outage()
        note_id = len(self.notes) + 1
        self.notes[note_id] = (merge_request, body)
        return note_id

    def edit_note(self, merge_request: int, note_id: int, body: str) -> None:
        self._note_outage()
        assert self.notes[note_id][0] == merge_request
        self.notes[note_id] = (merge_request, body)
        self.note_edits += 1

    def find_note(self, merge_request: int, marker: str) -> int | None:
        self._note_outage()
        found = [
            i for i, (mr, b) in self.notes.items() if mr == merge_request and b.startswith(marker)
        ]
        return found[0] if found else None

    def _note_outage(self) -> None:
        if self.notes_fail_with is not None:
            raise self.notes_fail_with


@dataclass
class Scene:
    tier: Tier
    bindings: InMemoryGitLabBindings
    store: InMemoryGitHubSources
    workflow: StartedWorkflow
    project: ScriptedProject
    sources: GitLabSources
    tokens: dict[str, str] = field(default_factory=dict)
    uuids: int = 0

    def bound(self, org: Organization, name: str, **options: str) -> Workspace:
        workspace = self.tier.tenancy.create_workspace(org.id, name)
        made = self.sources.bind(
            self.tier.admin(org),
            workspace.id,
            base_url=options.get("base_url", "https://gitlab.example.com/"),
            project=options.get("project", "Acme/Infra"),
            branch="main",
            working_directory="",
            push_run_kind=options.get("push_run_kind", "plan_and_apply"),
            access_token=ACCESS_TOKEN,
        )
        self.tokens[workspace.id] = made.webhook_token
        return workspace

    def deliver(
        self,
        workspace_id: str,
        event: str,
        payload: Any,
        *,
        uuid: str | None = None,
        token: str | None = None,
        body: bytes | None = None,
    ) -> tuple[int, dict[str, Any]]:
        if uuid is None:
            self.uuids += 1
            uuid = f"00000000-0000-0000-0000-{self.uuids:012d}"
        reply = self.sources.receive(
            {
                "X-Gitlab-Event": event,
                "X-Gitlab-Event-UUID": uuid,
                "X-Gitlab-Token": self.tokens.get(workspace_id, "") if token is None else token,
            },
            json.dumps(payload).encode() if body is None else body,
        )
        return reply.status, reply.body

    def push(self, *, age: timedelta = timedelta(), project_id: int = 42) -> dict[str, Any]:
        at = self.tier.clock.current - age
        return {
            "object_kind": "push",
            "ref": "refs/heads/main",
            "after": SHA,
            "user_username": "alice",
            "project": {"id": project_id, "path_with_namespace": "acme/infra"},
            "commits": [{"id": SHA, "message": "Add a bucket", "timestamp": at.isoformat()}],
        }

    def merge_request(
        self, action: str = "open", source_project_id: int = 42, sha: str = SHA
    ) -> dict[str, Any]:
        return {
            "object_kind": "merge_request",
            "user": {"username": "bob"},
            "project": {"id": 42, "path_with_namespace": "acme/infra"},
            "object_attributes": {
                "iid": 7,
                "action": action,
                "title": "Add a bucket",
                "target_branch": "main",
                "source_project_id": source_project_id,
                "updated_at": self.tier.clock.current.strftime("%Y-%m-%d %H:%M:%S UTC"),
                "last_commit": {"id": sha},
                # An update with new commits names the commit it replaced.
                "oldrev": SHA if sha != SHA else None,
            },
        }

    def flow(self, workspace_id: str, event: str, payload: Any) -> dict[str, Any]:
        _, body = self.deliver(workspace_id, event, payload)
        if body.get("source_id"):
            self.sources.ingest(body["source_id"])
            self.sources.create_runs(body["source_id"])
        return body

    def written(self) -> tuple[object, ...]:
        s = self.store
        return (dict(self.bindings.bindings), dict(s.deliveries), dict(s.ingestions))


@pytest.fixture
def scene(tier: Tier) -> Scene:
    return gitlab_scene(tier)


def gitlab_scene(tier: Tier) -> Scene:
    """Bindings, source records and a scripted project over the tier's services."""
    store = InMemoryGitHubSources(InMemoryGitHubInstallations(), tier.configurations)
    bindings = InMemoryGitLabBindings()
    workflow = StartedWorkflow()
    project = ScriptedProject(
        {SHA: tarball(f"infra-{SHA}-{SHA}", {"main.tf": 'output "x" { value = 1 }\n'})}
    )

    def opened(base_url: str, project_ref: str, token: str) -> ScriptedProject:
        project.opened_with.append((base_url, project_ref, token))
        return project

    artifacts = ArtifactStore(
        tier.clock, tier.ids, InMemoryObjects(), LocalDataKeys(), records=InMemoryArtifactRecords()
    )
    sources = GitLabSources(
        tier.clock,
        tier.ids,
        tier.workspaces,
        tier.runs,
        # Where a report reads its run: the tier's ledger (the runs were created there).
        SimpleNamespace(runs=SimpleNamespace(get=tier.run_reader.get_run)),  # type: ignore[arg-type]
        artifacts,
        workflow,
        LocalDataKeys(),
        CONFIG,
        bindings,
        store,
        project=opened,
        reports=PullRequestReports(
            tier.clock,
            InMemoryGitHubReports(),
            tier.runs,
            tier.workspaces,
            OnePlan(tier.runs, artifacts, tier.new_unit),
            "https://runplane.example",
        ),
    )
    return Scene(tier, bindings, store, workflow, project, sources)


# -- bindings -----------------------------------------------------------------------------


def test_a_binding_seals_its_access_token_and_shows_its_webhook_token_once(scene: Scene) -> None:
    # Given an organization
    org = scene.tier.tenancy.create_organization("acme")
    # When a workspace is bound to a project of a self-managed instance
    workspace = scene.bound(org, "network")
    # Then the binding reads back normalised, without either secret
    shown = scene.sources.binding(scene.tier.admin(org), workspace.id).to_dict()
    assert shown == {
        "workspace_id": workspace.id,
        "provider": "gitlab",
        "base_url": "https://gitlab.example.com",
        "project": "acme/infra",
        "branch": "main",
        "working_directory": "",
        "push_run_kind": "plan_and_apply",
        "trigger_patterns": [],
        "ignore_patterns": [],
    }
    # And the stored binding holds neither the access token nor the webhook token
    stored = repr(scene.bindings.bindings[workspace.id].__dict__)
    assert ACCESS_TOKEN.encode() not in scene.bindings.bindings[workspace.id].access_token_sealed
    assert ACCESS_TOKEN not in stored
    prefix = f"rpgl_{workspace.id}_"
    assert scene.tokens[workspace.id].startswith(prefix)
    # (the secret part is base64url, so it may itself hold "_")
    assert scene.tokens[workspace.id].removeprefix(prefix) not in stored


@pytest.mark.parametrize(
    ("field_name", "value", "pointer"),
    [
        ("base_url", "http://gitlab.example.com", "/base_url"),
        ("base_url", "https://user:pw@gitlab.example.com", "/base_url"),
        ("base_url", "https://gitlab.example.com/?x=1", "/base_url"),
        ("project", "../etc", "/project"),
        ("project", "acme", "/project"),
        ("push_run_kind", "destroy", "/push_run_kind"),
    ],
)
def test_an_invalid_binding_is_refused_and_writes_nothing(
    scene: Scene, field_name: str, value: str, pointer: str
) -> None:
    # Given an organization's workspace
    org = scene.tier.tenancy.create_organization("acme")
    # When it is bound with one invalid field
    with pytest.raises(InvalidInput) as refused:
        scene.bound(org, "network", **{field_name: value})
    # Then it is refused naming the field, and nothing is bound
    assert refused.value.pointer == pointer
    assert scene.bindings.bindings == {}


def test_another_organizations_binding_is_not_found(scene: Scene) -> None:
    # Given acme's bound workspace
    acme = scene.tier.tenancy.create_organization("acme")
    workspace = scene.bound(acme, "network")
    beta = scene.tier.tenancy.create_organization("beta")
    # When beta's admin reads or removes it, Then it is not found and stays bound
    with pytest.raises(NotFound):
        scene.sources.binding(scene.tier.admin(beta), workspace.id)
    with pytest.raises(NotFound):
        scene.sources.unbind(scene.tier.admin(beta), workspace.id)
    assert workspace.id in scene.bindings.bindings


# -- the webhook --------------------------------------------------------------------------


def test_a_push_to_the_bound_branch_runs_the_push_kind_with_the_sealed_token(
    scene: Scene,
) -> None:
    # Given a workspace bound with plan_only pushes
    org = scene.tier.tenancy.create_organization("acme")
    workspace = scene.bound(org, "network", push_run_kind="plan_only")
    # When GitLab delivers a push to main and the workflow's steps run
    body = scene.flow(workspace.id, "Push Hook", scene.push())
    # Then one plan_only run of the commit exists, fetched with the binding's token
    assert body["status"] == "accepted"
    runs = scene.tier.run_reader.runs_of_workspace(workspace.id)
    assert [r.kind for r in runs] == [RunKind.PLAN_ONLY]
    assert scene.project.opened_with == [("https://gitlab.example.com", "acme/infra", ACCESS_TOKEN)]
    # And the ingestion keeps the provenance: project, commit, delivery, pusher
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    assert (source.repository, source.commit_sha, source.sender, source.delivery_id) == (
        "gitlab.example.com/acme/infra",
        SHA,
        "alice",
        body["delivery_id"],
    )
    assert body["delivery_id"].startswith(f"gitlab:{workspace.id}:")
    # And a push posts no commit status
    assert scene.project.statuses == []


def test_a_merge_request_plans_speculatively_and_reports_its_status(scene: Scene) -> None:
    # Given a bound workspace
    org = scene.tier.tenancy.create_organization("acme")
    workspace = scene.bound(org, "network")
    # When a merge request is opened against main
    body = scene.flow(workspace.id, "Merge Request Hook", scene.merge_request())
    # Then a speculative plan exists, with a pending status naming its workspace
    [run] = scene.tier.run_reader.runs_of_workspace(workspace.id)
    assert run.kind is RunKind.SPECULATIVE
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    assert (source.pull_request, source.ref) == (7, "refs/merge-requests/7/head")
    [status] = scene.project.statuses
    assert status["state"] == "pending"
    assert status["name"] == f"runplane/{workspace.id}"
    assert status["target_url"] == f"https://runplane.example/api/v1/runs/{run.id}"


@pytest.mark.parametrize(
    ("event", "payload_of", "reason"),
    [
        ("Merge Request Hook", lambda s: s.merge_request(source_project_id=99), "fork"),
        ("Merge Request Hook", lambda s: s.merge_request(action="update"), "no new code"),
        (
            "Push Hook",
            lambda s: (
                s.push(project_id=43)
                | {"project": {"id": 43, "path_with_namespace": "other/infra"}}
            ),
            "not the bound project",
        ),
        ("Tag Push Hook", lambda s: s.push(), "does not start runs"),
    ],
)
def test_events_that_start_nothing_are_recorded_as_ignored(
    scene: Scene, event: str, payload_of: Any, reason: str
) -> None:
    # Given a bound workspace
    org = scene.tier.tenancy.create_organization("acme")
    workspace = scene.bound(org, "network")
    # When GitLab delivers an event that carries nothing to plan
    status, body = scene.deliver(workspace.id, event, payload_of(scene))
    # Then it is acknowledged with its reason and starts nothing
    assert status == 200
    assert body["status"] == "ignored"
    assert reason in body["reason"]
    assert scene.store.ingestions == {}
    assert scene.workflow.named == []


def test_a_repeated_delivery_answers_the_first_outcome_and_writes_nothing(scene: Scene) -> None:
    # Given a push delivered once
    org = scene.tier.tenancy.create_organization("acme")
    workspace = scene.bound(org, "network")
    payload = scene.push()
    _, first = scene.deliver(workspace.id, "Push Hook", payload, uuid="same-uuid")
    before = scene.written()
    # When GitLab delivers it again
    status, again = scene.deliver(workspace.id, "Push Hook", payload, uuid="same-uuid")
    # Then the first outcome is answered as a duplicate and nothing new is written
    assert (status, again) == (202, {**first, "duplicate": True})
    assert scene.written() == before


def test_every_refusal_writes_nothing(scene: Scene) -> None:
    # Given two organizations' bound workspaces
    acme = scene.tier.tenancy.create_organization("acme")
    ours = scene.bound(acme, "network")
    beta = scene.tier.tenancy.create_organization("beta")
    theirs = scene.bound(beta, "network")
    scene.deliver(ours.id, "Push Hook", scene.push(), uuid="taken")
    before = scene.written()
    forged = f"rpgl_{ours.id}_" + "A" * 43
    refusals: list[tuple[type[Exception], dict[str, Any]]] = [
        (WebhookTooLarge, {"body": b" " * (CONFIG.webhook_max_bytes + 1)}),
        (WebhookTokenInvalid, {"token": ""}),
        (WebhookTokenInvalid, {"token": forged}),
        (WebhookTokenInvalid, {"token": scene.tokens[theirs.id].replace(theirs.id, ours.id)}),
        (InvalidInput, {"uuid": "bad uuid!"}),
        (WebhookReplayRefused, {"uuid": "taken", "body": b'{"other": 1}'}),
        (InvalidBody, {"body": b"not json"}),
    ]
    for error, changes in refusals:
        # When a delivery fails one check
        with pytest.raises(error):
            scene.deliver(ours.id, "Push Hook", scene.push(), **changes)
    # And a push older than the replay window arrives
    with pytest.raises(WebhookReplayRefused):
        scene.deliver(ours.id, "Push Hook", scene.push(age=timedelta(hours=2)))
    # Then nothing was written by any of them
    assert scene.written() == before


# -- the merge request note ---------------------------------------------------------------


def test_one_note_is_created_then_edited_in_place_across_three_pushes(scene: Scene) -> None:
    # Given a bound workspace and a merge request opened against main
    org = scene.tier.tenancy.create_organization("acme")
    workspace = scene.bound(org, "network")
    scene.flow(workspace.id, "Merge Request Hook", scene.merge_request())
    # When two more commits are pushed to it
    for sha in ("d" * 40, "e" * 40):
        scene.project.archives[sha] = scene.project.archives[SHA]
        scene.tier.clock.advance(timedelta(seconds=5))
        scene.flow(workspace.id, "Merge Request Hook", scene.merge_request("update", sha=sha))
    # Then the merge request has one note, edited on each push, about the last commit
    [(merge_request, body)] = scene.project.notes.values()
    assert merge_request == 7
    assert scene.project.note_edits == 2
    assert body.startswith("<!-- runplane:pull-request-summary ")
    assert "`eeeeeeeeeeee`" in body
    assert "merge request &#33;7" in body
    assert "| network | dispatch&#95;pending | +1 ~0 -0 |" in body
    assert "aws&#95;s3&#95;bucket.logs (create)" in body
    runs = scene.tier.run_reader.runs_of_workspace(workspace.id)
    assert len(runs) == 3
    assert any(f"https://runplane.example/ui/runs/{run.id}" in body for run in runs)
    assert ACCESS_TOKEN not in body


def test_a_note_gitlab_fails_never_holds_back_the_run(scene: Scene) -> None:
    # Given GitLab's notes API is down
    org = scene.tier.tenancy.create_organization("acme")
    workspace = scene.bound(org, "network")
    scene.project.notes_fail_with = GitHubUnavailable("GitLab answered 502; retrying later")
    # When a merge request is opened
    scene.flow(workspace.id, "Merge Request Hook", scene.merge_request())
    # Then its run and pending status exist all the same, without a note
    [run] = scene.tier.run_reader.runs_of_workspace(workspace.id)
    assert [s["state"] for s in scene.project.statuses] == ["pending"]
    assert scene.project.notes == {}
    # And the run's own report is retried (the step raises), then posts the note
    with pytest.raises(GitHubUnavailable):
        scene.sources.report_status(run.id)
    scene.project.notes_fail_with = None
    assert scene.sources.report_status(run.id)["reported"] is True
    assert len(scene.project.notes) == 1
