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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import IO, Any

import pytest

from runplane.adapters.github import Archive, GitHubApp
from runplane.adapters.secrets import Secrets
from runplane.domain.audit import DEPLOYMENT_TRAIL
from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import (
    Conflict,
    GitHubInstallationTaken,
    GitHubUnavailable,
    InvalidInput,
    NotFound,
    SourceRefused,
    WebhookReplayRefused,
    WebhookSignatureInvalid,
)
from runplane.domain.github import Binding
from runplane.domain.github_connect import AuditNote, GitHubAccount, Installation
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.path_filters import ChangedFiles
from runplane.domain.run import RunKind
from runplane.services.artifacts import ArtifactStore
from runplane.services.audit import AuditTrail
from runplane.services.github import GitHubConfig, GitHubSources
from runplane.services.github_installations import ConnectConfig, GitHubInstallations
from runplane.wiring import run_lifecycle
from tests.fakes import InMemoryArtifactRecords, InMemoryObjects, LocalDataKeys, RecordingWorkflow
from tests.fakes_access import InMemoryGitHubInstallations, InMemoryWebSessions
from tests.fakes_audit import InMemorySecurityTrail
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
        # The changed files it lists: by pull request, and by (base, head) compared.
        self.pull_request_changes: dict[int, ChangedFiles] = {}
        self.compared: dict[tuple[str, str], ChangedFiles] = {}
        self.file_listings = 0

    def pull_request_files(self, token: str, repository: str, number: int) -> ChangedFiles:
        self.file_listings += 1
        if number not in self.pull_request_changes:
            raise GitHubUnavailable("GitHub answered 502")
        return self.pull_request_changes[number]

    def compare_files(self, token: str, repository: str, base: str, head: str) -> ChangedFiles:
        self.file_listings += 1
        if (base, head) not in self.compared:
            raise SourceRefused("GitHub refused the comparison (404)")
        return self.compared[(base, head)]

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
    # The refused deliveries' records (the fixture's sources record into it).
    trail: InMemorySecurityTrail = field(default_factory=InMemorySecurityTrail)

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
        pull_request_workspaces: bool = False,
        pull_request_auto_apply_destroy: bool = False,
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
            pull_request_workspaces=pull_request_workspaces,
            pull_request_auto_apply_destroy=pull_request_auto_apply_destroy,
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
            dict(s.previews),
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

    def pull_request(
        self, installation_id: int, action: str = "opened", sha: str = SHA, number: int = 7
    ) -> dict[str, Any]:
        return {
            "action": action,
            "repository": {"full_name": REPOSITORY},
            "installation": {"id": installation_id},
            "sender": {"login": "bob"},
            "pull_request": {
                "number": number,
                "title": "Add a bucket",
                "user": {"login": "bob"},
                "updated_at": self.tier.clock.current.isoformat(),
                "base": {"ref": "main"},
                "head": {"sha": sha, "repo": {"full_name": REPOSITORY}},
            },
        }

    def flow(self, event: str, payload: Any) -> dict[str, Any]:
        """Deliver an event and run its source workflow's steps (ingest, create runs)."""
        _, body = self.deliver(event, payload)
        if body.get("source_id"):
            self.sources.ingest(body["source_id"])
            self.sources.create_runs(body["source_id"])
        return body


def _note(tag: str) -> AuditNote:
    return AuditNote(f"evt-{tag}", "github.installation.connected", "user:ada", {})


@pytest.fixture
def scene(tier: Tier) -> Scene:
    installations = InMemoryGitHubInstallations()
    trail = InMemorySecurityTrail()
    store = InMemoryGitHubSources(installations, tier.configurations)
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
        tier.auto_destroys,
        app=lambda *args: app,
        refusals=AuditTrail(tier.clock, tier.ids, trail),
    )
    return Scene(tier, installations, store, workflow, app, sources, trail=trail)


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


def test_a_reader_unbinding_an_unbound_workspace_is_refused_not_told_it_is_unbound(
    scene: Scene,
) -> None:
    # Given a workspace with no binding, and a reader of it
    org = scene.organization("acme", 10)
    workspace = scene.tier.tenancy.create_workspace(org.id, "network")
    reader = Principal(
        PrincipalKind.USER, "rita", org.id, frozenset({Permission.WORKSPACE_READ}), "rita"
    )
    # When the reader unbinds it, then the permission is what refuses (403), as when bound
    with pytest.raises(Forbidden):
        scene.sources.unbind(reader, workspace.id)
    # And an admin is told there is no binding
    with pytest.raises(NotFound):
        scene.sources.unbind(scene.tier.admin(org), workspace.id)


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


def test_a_refusal_is_recorded_under_the_organization_only_once_the_signature_verifies(
    scene: Scene,
) -> None:
    # Given acme holding installation 10, and installation 99 held by no one
    org = scene.organization("acme", 10)
    # When a verified delivery for 10 is refused (too old), one for 99 too, and an
    # unverified one naming 10 is refused
    with pytest.raises(WebhookReplayRefused):
        scene.deliver("push", scene.push(10, age=timedelta(hours=2)), delivery="d-old")
    with pytest.raises(WebhookReplayRefused):
        scene.deliver("push", scene.push(99, age=timedelta(hours=2)), delivery="d-unclaimed")
    with pytest.raises(WebhookSignatureInvalid):
        scene.deliver("push", scene.push(10), delivery="d-forged", secret="wrong")
    # Then each wrote one refused record: the verified one naming a claimed
    # installation under its organization, the others on the deployment's trail
    where = {r.details["delivery_id"]: r.organization_id for r in scene.trail.records}
    assert where == {
        "d-old": org.id,
        "d-unclaimed": DEPLOYMENT_TRAIL,
        "d-forged": DEPLOYMENT_TRAIL,
    }
    assert {r.details["reason"] for r in scene.trail.records} == {
        WebhookReplayRefused.code,
        WebhookSignatureInvalid.code,
    }


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


# -- preview workspaces for pull requests --------------------------------------------------


def _workspaces_of(scene: Scene, org: Organization) -> dict[str, str]:
    return {w.name: w.id for w in scene.tier.directory.list_workspaces(org.id)}


def _runs(scene: Scene, workspace_id: str) -> list[tuple[str, RunKind]]:
    return [(r.id, r.kind) for r in scene.tier.run_reader.runs_of_workspace(workspace_id)]


def test_a_binding_records_its_pull_request_options_false_unless_asked(scene: Scene) -> None:
    # Given an organization holding installation 10
    org = scene.organization("acme", 10)
    # When one workspace is bound without the options and another with both
    plain = scene.bound(org, "network", 10)
    previews = scene.bound(
        org, "app", 10, pull_request_workspaces=True, pull_request_auto_apply_destroy=True
    )
    # Then the first has neither, the second both, as stored and as shown
    shown = {
        ws.id: scene.sources.binding(scene.tier.admin(org), ws.id).to_dict()
        for ws in (plain, previews)
    }
    options = ("pull_request_workspaces", "pull_request_auto_apply_destroy")
    assert [shown[plain.id][o] for o in options] == [False, False]
    assert [shown[previews.id][o] for o in options] == [True, True]
    # And an option that is not a boolean names its field and writes nothing
    before = scene.written()
    with pytest.raises(InvalidInput) as invalid:
        scene.sources.bind(
            scene.tier.admin(org),
            plain.id,
            repository=REPOSITORY,
            branch="main",
            working_directory="",
            installation_id=10,
            push_run_kind="plan_only",
            pull_request_workspaces="yes",  # type: ignore[arg-type]
        )
    assert invalid.value.pointer == "/pull_request_workspaces"
    assert scene.written() == before


def test_without_the_option_a_pull_request_still_plans_speculatively_on_the_bound_workspace(
    scene: Scene,
) -> None:
    # Given a workspace bound without pull request workspaces
    org = scene.organization("acme", 10)
    workspace = scene.bound(org, "network", 10)
    _serve_commit(scene)
    # When a pull request is opened and its workflow runs
    scene.flow("pull_request", scene.pull_request(10))
    # Then the bound workspace got a speculative run, and no workspace was made
    [(_, kind)] = _runs(scene, workspace.id)
    assert kind is RunKind.SPECULATIVE
    assert _workspaces_of(scene, org) == {"network": workspace.id}
    assert scene.store.previews == {}
    assert [(s["context"], s["description"]) for s in scene.app.statuses] == [
        (f"runplane/{workspace.id}", "plan queued")
    ]


def test_a_pull_request_gets_one_preview_workspace_with_a_run_of_its_head(scene: Scene) -> None:
    # Given a workspace bound with pull request workspaces
    org = scene.organization("acme", 10)
    parent = scene.bound(org, "network", 10, pull_request_workspaces=True)
    _serve_commit(scene)
    payload = scene.pull_request(10)

    # When pull request 7 is opened and its workflow runs
    _, body = scene.deliver("pull_request", payload, delivery="opened-7")
    scene.sources.ingest(body["source_id"])
    scene.sources.create_runs(body["source_id"])

    # Then a workspace network-pr-7 exists in the same organization, marked as the
    # pull request's, and the durable record names it
    preview_id = _workspaces_of(scene, org)["network-pr-7"]
    preview = scene.tier.directory.get_workspace(preview_id)
    assert preview.organization_id == org.id
    assert "pull request #7 of acme/infra" in (preview.description or "")
    assert parent.id in (preview.description or "")
    assert preview.tag_names == ("pull-request-preview", "pull-request:7")
    # And it is a preview of the bound workspace for good (whose policy sets govern it)
    assert preview.preview_of == parent.id
    record = scene.store.preview(parent.id, 7)
    assert record is not None
    assert (record.workspace_id, record.repository, record.workspace_created) == (
        preview_id,
        REPOSITORY,
        True,
    )
    assert record.created_by == f"source:{body['source_id']}"
    # And the preview got a plan_and_apply run of the head commit (approved like any
    # run), the bound workspace none
    [(run_id, kind)] = _runs(scene, preview_id)
    assert kind is RunKind.PLAN_AND_APPLY
    assert _runs(scene, parent.id) == []
    run = scene.tier.run_reader.get_run(run_id)
    assert run.created_by == f"source:{body['source_id']}"
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    [target] = source.targets
    assert (target.workspace_id, target.bound_workspace_id, target.run_id) == (
        preview_id,
        parent.id,
        run_id,
    )
    recorded = scene.tier.configurations.get(target.configuration_version_id)
    assert recorded is not None
    assert (recorded.workspace_id, recorded.speculative) == (preview_id, False)
    # And the commit status reports the preview's run
    [status] = scene.app.statuses
    assert status["context"] == f"runplane/{preview_id}"
    assert status["description"] == "preview run queued"
    assert status["target_url"].endswith(f"/ui/runs/{run_id}")

    # When GitHub redelivers the event, and the workflow's steps are retried
    written = scene.written()
    runs = list(scene.tier.run_reader.runs)
    scene.deliver("pull_request", payload, delivery="opened-7")
    scene.sources.ingest(body["source_id"])
    scene.sources.create_runs(body["source_id"])
    # Then nothing is created twice
    assert scene.written() == written
    assert list(scene.tier.run_reader.runs) == runs
    assert list(_workspaces_of(scene, org)) == ["network", "network-pr-7"]


def test_a_new_commit_on_the_pull_request_reuses_its_preview_workspace(scene: Scene) -> None:
    # Given a pull request with its preview workspace
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10, pull_request_workspaces=True)
    _serve_commit(scene)
    scene.flow("pull_request", scene.pull_request(10))
    preview_id = _workspaces_of(scene, org)["network-pr-7"]
    # When a second commit is pushed to it (synchronize)
    second = "c" * 40
    scene.app.archives[(REPOSITORY, second)] = scene.app.archives[(REPOSITORY, SHA)]
    body = scene.flow("pull_request", scene.pull_request(10, "synchronize", second))
    # Then the same workspace gets a second run, of the new commit
    assert list(_workspaces_of(scene, org)) == ["network", "network-pr-7"]
    assert [kind for _, kind in _runs(scene, preview_id)] == [RunKind.PLAN_AND_APPLY] * 2
    source = scene.store.ingestion(body["source_id"])
    assert source is not None
    assert [(t.workspace_id, t.run_id is not None) for t in source.targets] == [(preview_id, True)]


@pytest.mark.parametrize("auto_apply", [False, True])
def test_closing_the_pull_request_arms_its_previews_destroy_with_the_bindings_choice(
    scene: Scene, auto_apply: bool
) -> None:
    # Given a pull request with its preview, bound with or without auto-applied destroys
    org = scene.organization("acme", 10)
    parent = scene.bound(
        org, "network", 10, pull_request_workspaces=True, pull_request_auto_apply_destroy=auto_apply
    )
    _serve_commit(scene)
    scene.flow("pull_request", scene.pull_request(10))
    preview_id = _workspaces_of(scene, org)["network-pr-7"]
    started = list(scene.workflow.named)

    # When the pull request is closed (merged or not)
    status, body = scene.deliver("pull_request", scene.pull_request(10, "closed"))

    # Then the preview's auto-destroy is due a minute from now, with the binding's
    # auto-apply choice, set by the pull request; the close is recorded
    now = scene.tier.clock.now()
    armed = scene.tier.auto_destroy_store.get(preview_id)
    assert armed is not None
    assert armed.settings.destroy_at is not None
    assert timedelta(0) < armed.settings.destroy_at - now <= timedelta(minutes=1)
    assert armed.settings.auto_apply is auto_apply
    assert armed.set_by == "system:github-pr:acme/infra#7"
    assert (status, body["status"], body["pull_request"]) == (200, "closed", 7)
    assert body["auto_destroy"] == [
        {
            "workspace_id": preview_id,
            "destroy_at": armed.settings.destroy_at.isoformat(),
            "auto_apply": auto_apply,
        }
    ]
    assert scene.store.deliveries[body["delivery_id"]].outcome == body
    record = scene.store.preview(parent.id, 7)
    assert record is not None
    assert record.closed_at is not None
    assert now - record.closed_at < timedelta(seconds=1)
    # And no workflow or run was started for it: the sweep destroys it
    assert scene.workflow.named == started
    assert len(_runs(scene, preview_id)) == 1


def test_reopening_the_pull_request_keeps_its_preview(scene: Scene) -> None:
    # Given a closed pull request whose preview is armed for destruction
    org = scene.organization("acme", 10)
    parent = scene.bound(org, "network", 10, pull_request_workspaces=True)
    _serve_commit(scene)
    scene.flow("pull_request", scene.pull_request(10))
    scene.deliver("pull_request", scene.pull_request(10, "closed"))
    preview_id = _workspaces_of(scene, org)["network-pr-7"]
    assert scene.tier.auto_destroy_store.get(preview_id) is not None
    # When it is reopened
    scene.flow("pull_request", scene.pull_request(10, "reopened"))
    # Then the same preview gets a new run, and its destroy is disarmed
    assert scene.tier.auto_destroy_store.get(preview_id) is None
    assert len(_runs(scene, preview_id)) == 2
    record = scene.store.preview(parent.id, 7)
    assert record is not None
    assert (record.workspace_id, record.closed_at) == (preview_id, None)


def test_closing_a_pull_request_without_a_preview_is_ignored_with_its_reason(
    scene: Scene,
) -> None:
    # Given a workspace bound with pull request workspaces, and one without
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10, pull_request_workspaces=True)
    scene.bound(org, "storage", 10)
    # When a pull request that never got a preview closes
    status, body = scene.deliver("pull_request", scene.pull_request(10, "closed", number=8))
    # Then it is acknowledged and recorded, arming nothing
    assert (status, body["status"]) == (200, "ignored")
    assert body["reason"] == (
        "pull request #8 of acme/infra closed: it has no preview workspace to destroy"
    )
    assert scene.store.deliveries[body["delivery_id"]].outcome == body
    assert scene.tier.auto_destroy_store.armed() == []
    assert scene.workflow.named == []


def test_a_pull_request_from_a_fork_starts_nothing(scene: Scene) -> None:
    # Given a workspace bound with pull request workspaces, and one with speculative plans
    org = scene.organization("acme", 10)
    scene.bound(org, "network", 10, pull_request_workspaces=True)
    scene.bound(org, "storage", 10)
    before = _workspaces_of(scene, org)
    # When a pull request whose head is a fork's branch is opened
    forked = scene.pull_request(10)
    forked["pull_request"]["head"]["repo"] = {"full_name": "mallory/infra"}
    status, body = scene.deliver("pull_request", forked)
    # Then it is recorded as ignored, saying why: no ingestion, no workspace, no run
    assert (status, body["status"]) == (200, "ignored")
    assert "comes from mallory/infra" in body["reason"]
    assert _workspaces_of(scene, org) == before
    assert scene.workflow.named == []
    assert scene.tier.run_reader.runs == {}


def test_another_organizations_installation_neither_creates_nor_destroys_previews(
    scene: Scene,
) -> None:
    # Given org-a's pull request 7 with its preview, and org-b holding installation 20,
    # with its own workspace bound to the same repository name with previews
    org = scene.organization("acme", 10)
    parent = scene.bound(org, "network", 10, pull_request_workspaces=True)
    _serve_commit(scene)
    scene.flow("pull_request", scene.pull_request(10))
    other = scene.organization("beta", 20)
    scene.bound(other, "theirs", 20, pull_request_workspaces=True)
    ours = _workspaces_of(scene, org)
    our_preview = scene.store.preview(parent.id, 7)
    assert our_preview is not None

    # When installation 20 delivers pull request 7's close
    closed = scene.flow("pull_request", scene.pull_request(20, "closed"))

    # Then org-a's preview is not armed, nor its record touched: only org-b's bindings
    # were looked at, and they have no preview of it
    assert closed["status"] == "ignored"
    assert scene.tier.auto_destroy_store.armed() == []
    assert scene.store.preview(parent.id, 7) == our_preview

    # When installation 20 opens pull request 9
    opened = scene.flow("pull_request", scene.pull_request(20, number=9))

    # Then only org-b gets a preview, in org-b
    assert opened["status"] == "accepted"
    assert _workspaces_of(scene, org) == ours
    assert list(_workspaces_of(scene, other)) == ["theirs", "theirs-pr-9"]
    assert sorted(
        (p.organization_id, p.pull_request) for p in scene.store.previews.values()
    ) == sorted([(org.id, 7), (other.id, 9)])
