"""GitHub sources over the in-memory stores: a binding needs an installation its
organization holds and a valid branch and directory; a webhook delivery is recorded
once, reaches only the workspaces of the organization holding its installation, and
starts one source ingestion, which fetches the commit for each bound workspace (a pull
request's as a speculative plan). Every refusal writes nothing. The real webhook
handler, its HTTP replies and GitHub's own API are end to end
(tests/e2e/test_github.py); the source workflow on Step Functions is
tests/statemachines/test_source_asl.py."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any

import pytest

from runplane.adapters.github import Archive, GitHubApp
from runplane.adapters.secrets import Secrets
from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import (
    Conflict,
    GitHubInstallationTaken,
    InvalidInput,
    NotFound,
    WebhookReplayRefused,
    WebhookSignatureInvalid,
)
from runplane.domain.github import Binding
from runplane.domain.github_connect import AuditNote, GitHubAccount, Installation
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.run import RunKind
from runplane.services.artifacts import ArtifactStore
from runplane.services.github import GitHubConfig, GitHubSources
from runplane.services.github_installations import ConnectConfig, GitHubInstallations
from runplane.wiring import run_lifecycle
from tests.fakes import InMemoryArtifactRecords, InMemoryObjects, LocalDataKeys, RecordingWorkflow
from tests.fakes_access import InMemoryGitHubInstallations, InMemoryWebSessions
from tests.fakes_github import InMemoryGitHubSources
from tests.github_fake import tarball
from tests.service.conftest import Tier

WEBHOOK_SECRET = "webhook-secret"
REPOSITORY = "acme/infra"
SHA = "b" * 40
CONFIG = GitHubConfig(
    api_url="https://api.github.example",
    app_id="7",
    private_key_secret_arn="arn:aws:secretsmanager:us-east-1:1:secret:key",
    webhook_secret_arn="arn:aws:secretsmanager:us-east-1:1:secret:hook",
    delivery_window=timedelta(hours=1),
    webhook_max_bytes=1024 * 1024,
    archive_max_bytes=1024 * 1024,
    review_url="https://runplane.example",
)


class KnownSecrets(Secrets):
    """The webhook secret and the App's key without Secrets Manager."""

    def __init__(self) -> None:
        super().__init__(client=None)

    def read(self, arn: str | None, what: str) -> str:
        return WEBHOOK_SECRET if arn == CONFIG.webhook_secret_arn else "app-private-key"


class StartedWorkflow(RecordingWorkflow):
    """The source workflow: the executions it would start, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.named: list[tuple[str, dict[str, str]]] = []

    def start_named(self, name: str, ids: Mapping[str, str]) -> None:
        self.named.append((name, dict(ids)))


class ScriptedApp(GitHubApp):
    """The GitHub App's API without HTTP: a token per installation, the commit
    tarballs it serves, and the commit statuses posted."""

    def __init__(self, archives: dict[tuple[str, str], bytes]) -> None:
        self.archives = archives
        self.tokens: list[int] = []
        self.statuses: list[Mapping[str, str]] = []

    def installation_token(self, installation_id: int, now: datetime) -> str:
        self.tokens.append(installation_id)
        return f"token-{installation_id}"

    def download_archive(
        self, token: str, repository: str, sha: str, sink: IO[bytes], max_bytes: int
    ) -> Archive:
        data = self.archives[(repository, sha)]
        sink.write(data)
        return Archive(hashlib.sha256(data).hexdigest(), len(data))

    def post_status(self, token: str, repository: str, sha: str, status: Mapping[str, str]) -> None:
        self.statuses.append(status)


@dataclass
class Scene:
    tier: Tier
    installations: InMemoryGitHubInstallations
    store: InMemoryGitHubSources
    workflow: StartedWorkflow
    app: ScriptedApp
    sources: GitHubSources
    deliveries: int = 0

    def organization(self, name: str, installation_id: int) -> Organization:
        """An organization holding one installation."""
        org = self.tier.tenancy.create_organization(name)
        self.installations.claim(
            Installation(
                installation_id=installation_id,
                organization_id=org.id,
                account=GitHubAccount(name, "Organization", installation_id),
                verified_github_user=f"{name}-owner",
                claimed_by="user:ada",
                claimed_at=self.tier.clock.now(),
                bindings=0,
            ),
            cap=5,
            note=_note(f"{org.id}-{installation_id}"),
            now=self.tier.clock.now(),
        )
        return org

    def bound(
        self,
        org: Organization,
        name: str,
        installation_id: int,
        *,
        working_directory: str = "",
        push_run_kind: str = "plan_and_apply",
    ) -> Workspace:
        workspace = self.tier.tenancy.create_workspace(org.id, name)
        self.sources.bind(
            self.tier.admin(org),
            workspace.id,
            repository=REPOSITORY,
            branch="main",
            working_directory=working_directory,
            installation_id=installation_id,
            push_run_kind=push_run_kind,
        )
        return workspace

    def deliver(
        self,
        event: str,
        payload: Any,
        *,
        delivery: str | None = None,
        secret: str = WEBHOOK_SECRET,
    ) -> tuple[int, dict[str, Any]]:
        body = json.dumps(payload).encode()
        if delivery is None:
            self.deliveries += 1
            delivery = f"delivery-{self.deliveries}"
        signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        reply = self.sources.receive(
            {
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": delivery,
                "X-Hub-Signature-256": f"sha256={signature}",
            },
            body,
        )
        return reply.status, reply.body

    def written(self) -> tuple[object, ...]:
        s, i = self.store, self.installations
        return (
            dict(s.bindings),
            dict(s.deliveries),
            dict(s.ingestions),
            dict(s.configurations),
            dict(i.holders),
            dict(i.installations),
            list(i.audit_events),
        )

    def push(self, installation_id: int, *, age: timedelta = timedelta()) -> dict[str, Any]:
        at = self.tier.clock.current - age
        return {
            "ref": "refs/heads/main",
            "after": SHA,
            "repository": {"full_name": REPOSITORY},
            "installation": {"id": installation_id},
            "sender": {"login": "alice"},
            "head_commit": {"timestamp": at.isoformat(), "message": "Add a bucket"},
        }

    def pull_request(self, installation_id: int) -> dict[str, Any]:
        return {
            "action": "opened",
            "repository": {"full_name": REPOSITORY},
            "installation": {"id": installation_id},
            "sender": {"login": "bob"},
            "pull_request": {
                "number": 7,
                "title": "Add a bucket",
                "user": {"login": "bob"},
                "updated_at": self.tier.clock.current.isoformat(),
                "base": {"ref": "main"},
                "head": {"sha": SHA},
            },
        }


def _note(tag: str) -> AuditNote:
    return AuditNote(f"evt-{tag}", "github.installation.connected", "user:ada", {})


@pytest.fixture
def scene(tier: Tier) -> Scene:
    installations = InMemoryGitHubInstallations()
    store = InMemoryGitHubSources(installations)
    workflow = StartedWorkflow()
    app = ScriptedApp({})
    sources = GitHubSources(
        tier.clock,
        tier.ids,
        tier.workspaces,
        tier.runs,
        run_lifecycle(tier.clock, tier.ids),
        ArtifactStore(
            tier.clock,
            tier.ids,
            InMemoryObjects(),
            LocalDataKeys(),
            records=InMemoryArtifactRecords(),
        ),
        workflow,
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
        app=lambda *args: app,
    )
    return Scene(tier, installations, store, workflow, app, sources)


# -- bindings ----------------------------------------------------------------------------------


def test_a_workspace_is_bound_with_an_installation_its_organization_holds(scene: Scene) -> None:
    # Given an organization holding installation 10
    org = scene.organization("acme", 10)
    workspace = scene.tier.tenancy.create_workspace(org.id, "network")
    # When an admin binds a workspace with it (names as GitHub spells them)
    bound = scene.sources.bind(
        scene.tier.admin(org),
        workspace.id,
        repository="Acme/Infra",
        branch="main",
        working_directory="./envs//prod/",
        installation_id=10,
        push_run_kind="plan_only",
    )
    # Then the binding is stored normalised, and the installation counts it
    expected = Binding(
        workspace.id, org.id, "acme/infra", "main", "envs/prod", 10, RunKind.PLAN_ONLY
    )
    assert bound == expected
    assert scene.sources.binding(scene.tier.admin(org), workspace.id) == expected
    held = scene.installations.held(org.id, 10)
    assert held is not None
    assert held.bindings == 1


def test_an_installation_another_organization_holds_binds_nothing(scene: Scene) -> None:
    # Given org-b holding installation 20 and org-a holding 10
    scene.organization("beta", 20)
    org = scene.organization("acme", 10)
    workspace = scene.tier.tenancy.create_workspace(org.id, "network")
    before = scene.written()
    # When org-a binds a workspace with org-b's installation, or one nobody holds
    for installation_id in (20, 30):
        with pytest.raises(GitHubInstallationTaken) as refused:
            scene.sources.bind(
                scene.tier.admin(org),
                workspace.id,
                repository=REPOSITORY,
                branch="main",
                working_directory="",
                installation_id=installation_id,
                push_run_kind="plan_only",
            )
        # Then it is refused as a conflict (409), writing nothing
        assert refused.value.http_status == 409
    assert scene.written() == before


@pytest.mark.parametrize(
    ("field", "value", "pointer"),
    [
        ("repository", "not a repository", "/repository"),
        ("branch", "bad..branch", "/branch"),
        ("branch", "refs/heads/main", "/branch"),
        ("working_directory", "../outside", "/working_directory"),
        ("working_directory", "/etc", "/working_directory"),
        ("installation_id", 0, "/installation_id"),
        ("push_run_kind", "speculative", "/push_run_kind"),
    ],
)
def test_an_invalid_binding_names_its_field_and_writes_nothing(
    scene: Scene, field: str, value: Any, pointer: str
) -> None:
    # Given an organization holding installation 10
    org = scene.organization("acme", 10)
    workspace = scene.tier.tenancy.create_workspace(org.id, "network")
    before = scene.written()
    arguments: dict[str, Any] = {
        "repository": REPOSITORY,
        "branch": "main",
        "working_directory": "",
        "installation_id": 10,
        "push_run_kind": "plan_only",
        field: value,
    }
    # When a binding with one invalid field is asked for
    with pytest.raises(InvalidInput) as invalid:
        scene.sources.bind(scene.tier.admin(org), workspace.id, **arguments)
    # Then that field is named and nothing was written
    assert invalid.value.pointer == pointer
    assert scene.written() == before


def test_only_an_updater_of_the_organization_binds_sees_or_unbinds(scene: Scene) -> None:
    # Given a workspace of org-a bound with its installation, and org-b
    org = scene.organization("acme", 10)
    other = scene.organization("beta", 20)
    workspace = scene.bound(org, "network", 10)
    reader = Principal(
        PrincipalKind.USER, "rita", org.id, frozenset({Permission.WORKSPACE_READ}), "rita"
    )
    before = scene.written()
    # Then a reader may see the binding but not change it (403)
    assert scene.sources.binding(reader, workspace.id).installation_id == 10
    for change in (
        lambda: scene.sources.unbind(reader, workspace.id),
        lambda: scene.sources.bind(
            reader,
            workspace.id,
            repository=REPOSITORY,
            branch="dev",
            working_directory="",
            installation_id=10,
            push_run_kind="plan_only",
        ),
    ):
        with pytest.raises(Forbidden):
            change()
    # And another organization's admin finds no such workspace (404)
    for attempt in (
        lambda: scene.sources.binding(scene.tier.admin(other), workspace.id),
        lambda: scene.sources.unbind(scene.tier.admin(other), workspace.id),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert scene.written() == before


def test_a_binding_changed_meanwhile_is_not_overwritten(scene: Scene) -> None:
    # Given a bound workspace, whose binding another admin moves to another branch
    # between this bind's read and its write
    org = scene.organization("acme", 10)
    workspace = scene.bound(org, "network", 10)
    meanwhile = Binding(workspace.id, org.id, REPOSITORY, "dev", "", 10, RunKind.PLAN_ONLY)

    def other_admin() -> None:
        current = scene.store.binding(workspace.id)
        scene.store.bind(
            meanwhile,
            current,
            actor="user:other",
            now=scene.tier.clock.current,
            release_note=lambda: _note("unused"),
        )

    scene.tier.clock.on_next_reading(other_admin)
    # When this admin's bind lands
    with pytest.raises(Conflict):
        scene.sources.bind(
            scene.tier.admin(org),
            workspace.id,
            repository=REPOSITORY,
            branch="release",
            working_directory="",
            installation_id=10,
            push_run_kind="plan_only",
        )
    # Then the other admin's binding stands, counted once
    assert scene.store.binding(workspace.id) == meanwhile
    held = scene.installations.held(org.id, 10)
    assert held is not None
    assert held.bindings == 1


def test_unbinding_the_last_workspace_releases_the_installation(scene: Scene) -> None:
    # Given two workspaces bound with installation 10
    org = scene.organization("acme", 10)
    first, second = scene.bound(org, "network", 10), scene.bound(org, "storage", 10)
    # When both are unbound
    scene.sources.unbind(scene.tier.admin(org), first.id)
    assert scene.installations.holder_of(10) == org.id
    scene.sources.unbind(scene.tier.admin(org), second.id)
    # Then neither has a binding, and the last one released the installation
    for workspace in (first, second):
        with pytest.raises(NotFound):
            scene.sources.binding(scene.tier.admin(org), workspace.id)
    assert scene.installations.holder_of(10) is None
    released = [e for e in scene.installations.audit_events if e.organization_id == org.id]
    assert [e.type for e in released][-1] == "github.installation.released"
    assert released[-1].actor == scene.tier.admin(org).ref
    assert released[-1].details == {
        "installation_id": "10",
        "reason": "its last binding was removed",
    }


# -- deliveries ------------------------------------------------------------------------------


def test_a_push_is_recorded_once_and_starts_one_ingestion(scene: Scene) -> None:
    # Given a workspace bound to the repository's main branch
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    # When GitHub delivers a push to main
    status, body = scene.deliver("push", scene.push(10))
    # Then it is accepted with one pending ingestion of the commit, its workflow started
    assert (status, body["status"]) == (202, "accepted")
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    assert (source.status, source.event, source.organization_id) == ("pending", "push", org.id)
    assert (source.commit_sha, source.ref, source.sender) == (SHA, "refs/heads/main", "alice")
    assert scene.workflow.named == [(source.id, {"action": "ingest", "source_id": source.id})]


def test_a_duplicate_delivery_is_answered_as_before_and_writes_nothing(scene: Scene) -> None:
    # Given a push delivered and accepted
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    payload = scene.push(10)
    status, first = scene.deliver("push", payload, delivery="delivery-once")
    written = scene.written()
    # When GitHub delivers it again
    again_status, again = scene.deliver("push", payload, delivery="delivery-once")
    # Then the first answer is repeated, marked as a duplicate, and nothing was written
    assert (again_status, again) == (status, {**first, "duplicate": True})
    assert scene.written() == written
    # And its still-pending ingestion's workflow is asked for again by the same name
    # (an execution Step Functions starts at most once)
    assert {name for name, _ in scene.workflow.named} == {first["source_id"]}


def test_a_delivery_id_reused_with_another_body_is_refused(scene: Scene) -> None:
    # Given a delivery recorded
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    scene.deliver("push", scene.push(10), delivery="delivery-once")
    written = scene.written()
    # When the same delivery ID comes with another body
    with pytest.raises(WebhookReplayRefused):
        scene.deliver("push", {**scene.push(10), "after": "c" * 40}, delivery="delivery-once")
    # Then nothing more was written or started
    assert scene.written() == written
    assert len(scene.workflow.named) == 1


def test_refused_deliveries_write_nothing(scene: Scene) -> None:
    # Given a bound workspace
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    before = scene.written()
    # When a delivery is signed with another secret, or is for an event too old
    with pytest.raises(WebhookSignatureInvalid):
        scene.deliver("push", scene.push(10), secret="wrong")
    with pytest.raises(WebhookReplayRefused):
        scene.deliver("push", scene.push(10, age=timedelta(hours=2)))
    # Then nothing was recorded or started
    assert scene.written() == before
    assert scene.workflow.named == []


def test_a_delivery_from_another_organizations_installation_reaches_none_of_its_workspaces(
    scene: Scene,
) -> None:
    # Given org-a's workspace bound to the repository with installation 10, and org-b
    # holding installation 20 (of an account that can push to the same repository name)
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10)
    scene.organization("beta", 20)
    # When a push to the repository arrives from installation 20
    status, body = scene.deliver("push", scene.push(20))
    # Then it is acknowledged, starting nothing: no workspace is bound with it
    assert (status, body["status"]) == (200, "ignored")
    assert "no workspace is bound" in body["reason"]
    assert scene.store.ingestions == {}
    assert scene.workflow.named == []


def test_an_event_that_starts_nothing_is_recorded_with_its_reason(scene: Scene) -> None:
    # When GitHub delivers an issue comment
    status, body = scene.deliver("issues", {"action": "opened"})
    # Then it is acknowledged with why, recorded once, starting nothing
    assert (status, body["status"]) == (200, "ignored")
    assert "does not start runs" in body["reason"]
    assert list(scene.store.deliveries) == ["delivery-1"]
    assert scene.store.ingestions == {}


# -- the source workflow ---------------------------------------------------------------------


def _serve_commit(scene: Scene) -> None:
    scene.app.archives[(REPOSITORY, SHA)] = tarball(
        f"acme-infra-{SHA[:7]}",
        {"main.tf": 'output "x" { value = 1 }\n', "envs/prod/main.tf": "# prod\n"},
    )


def test_a_push_records_a_configuration_per_bound_workspace_with_its_push_kind(
    scene: Scene,
) -> None:
    # Given two workspaces of org-a bound with different directories and push kinds,
    # and one of org-b bound to the same repository with its own installation
    org = scene.organization("acme", 10)
    root = scene.bound(org, "network", 10, push_run_kind="plan_only")
    prod = scene.bound(org, "prod", 10, working_directory="envs/prod")
    other = scene.organization("beta", 20)
    scene.bound(other, "theirs", 20)
    _serve_commit(scene)
    _, body = scene.deliver("push", scene.push(10))
    # When the ingestion step runs
    result = scene.sources.ingest(body["source_id"])
    # Then each of org-a's workspaces got a configuration version of its directory,
    # planned as its binding says; org-b's workspace got nothing
    assert result == {"source_id": body["source_id"], "status": "ready", "targets": 2}
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    kinds = {t.workspace_id: (t.working_directory, t.kind) for t in source.targets}
    assert kinds == {
        root.id: ("", RunKind.PLAN_ONLY),
        prod.id: ("envs/prod", RunKind.PLAN_AND_APPLY),
    }
    recorded = {
        c.fetched.target.workspace_id: c.fetched.speculative
        for c in scene.store.configurations.values()
    }
    assert recorded == {root.id: False, prod.id: False}
    assert scene.app.tokens == [10]


def test_a_pull_request_records_speculative_plans(scene: Scene) -> None:
    # Given a workspace bound to the pull request's base branch
    org = scene.organization("acme", 10)
    workspace = scene.bound(org, "network", 10)
    _serve_commit(scene)
    # When a pull request is opened and its ingestion runs
    status, body = scene.deliver("pull_request", scene.pull_request(10))
    scene.sources.ingest(body["source_id"])
    # Then the ingestion is the pull request's, and its target a speculative plan
    assert status == 202
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    assert (source.event, source.pull_request, source.ref) == (
        "pull_request",
        7,
        "refs/pull/7/head",
    )
    assert [(t.workspace_id, t.kind) for t in source.targets] == [
        (workspace.id, RunKind.SPECULATIVE)
    ]
    assert [c.fetched.speculative for c in scene.store.configurations.values()] == [True]


def test_a_commit_without_the_bound_directory_fails_the_ingestion(scene: Scene) -> None:
    # Given a workspace bound to a directory the commit does not have
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10, working_directory="envs/missing")
    _serve_commit(scene)
    _, body = scene.deliver("push", scene.push(10))
    # When the ingestion step runs
    result = scene.sources.ingest(body["source_id"])
    # Then the ingestion failed, saying why, and recorded no configuration
    assert result == {"source_id": body["source_id"], "status": "failed"}
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    assert source.status == "failed"
    assert "envs/missing" in (source.reason or "")
    assert scene.store.configurations == {}
    # And a failure reported afterwards changes nothing
    assert scene.sources.fail(body["source_id"], "late")["status"] == "failed"
    assert scene.store.ingestion(body["source_id"]) == source


def test_targets_of_a_workspace_no_longer_bound_create_no_run(scene: Scene) -> None:
    # Given a ready ingestion whose workspace was unbound after the commit was fetched
    org = scene.organization("acme", 10)
    workspace = scene.bound(org, "network", 10)
    _serve_commit(scene)
    _, body = scene.deliver("push", scene.push(10))
    scene.sources.ingest(body["source_id"])
    scene.sources.unbind(scene.tier.admin(org), workspace.id)
    # When the run-creation step runs
    result = scene.sources.create_runs(body["source_id"])
    # Then no run is created, and the target says why
    assert result == {"source_id": body["source_id"], "runs": 0}
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    assert [(t.run_id, t.error) for t in source.targets] == [(None, "UNBOUND")]
