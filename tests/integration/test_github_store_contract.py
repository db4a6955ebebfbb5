"""The GitHub sources store's contract: the same cases against the DynamoDB store (on
moto) and the in-memory fake the service tier uses (tests/service), so the fake cannot
drift. Each binding's installation is held through the installations seam of the same
kind, whose count the binding moves in its own write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import AuditEvent
from runplane.domain.errors import ConcurrentChange, Conflict, GitHubInstallationTaken
from runplane.domain.github import (
    Binding,
    Delivery,
    DeliveryAlreadyRecorded,
    FetchedConfiguration,
    Ingestion,
    IngestionTarget,
    PreviewWorkspace,
    SourceEvent,
)
from runplane.domain.github_connect import AuditNote, GitHubAccount, Installation
from runplane.domain.path_filters import PathDecision
from runplane.domain.run import RunKind
from runplane.services.repositories.access import GitHubInstallationStore
from runplane.services.repositories.github import GitHubSourceStore
from runplane.store import audit, configuration_versions
from runplane.store.github import DynamoGitHubSources
from runplane.store.github_installations import DynamoGitHubInstallations
from tests.fakes_access import InMemoryGitHubInstallations
from tests.fakes_github import InMemoryGitHubSources

AT = datetime(2026, 1, 1, tzinfo=UTC)
SHA = "c" * 40


@dataclass
class Stores:
    sources: GitHubSourceStore
    installations: GitHubInstallationStore
    notes: list[str]

    def note(self) -> Callable[[], AuditNote]:
        def draw() -> AuditNote:
            self.notes.append(f"evt-release-{len(self.notes)}")
            return AuditNote(self.notes[-1], "github.installation.released", "user:ada", {})

        return draw

    def trail(self, org_id: str) -> list[AuditEvent]:
        if isinstance(self.installations, InMemoryGitHubInstallations):
            events = [e for e in self.installations.audit_events if e.organization_id == org_id]
        else:
            events = audit.organization_trail(org_id)
        return sorted(events, key=lambda e: (e.at, e.id))

    def configuration(self, cv_id: str) -> tuple[str, str | None, str | None] | None:
        """A recorded configuration version's workspace, artifact and ingestion."""
        if isinstance(self.sources, InMemoryGitHubSources):
            found = self.sources.configurations.get(cv_id)
            if found is None:
                return None
            target = found.fetched.target
            return target.workspace_id, target.configuration_artifact_id, found.source_id
        origin = configuration_versions.find_origin(cv_id)
        return (
            None if origin is None else (origin.workspace_id, origin.artifact_id, origin.source_id)
        )


@pytest.fixture(params=["dynamodb", "memory"])
def stores(request: pytest.FixtureRequest) -> Stores:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return Stores(DynamoGitHubSources(), DynamoGitHubInstallations(), [])
    installations = InMemoryGitHubInstallations()
    return Stores(InMemoryGitHubSources(installations), installations, [])


def _hold(stores: Stores, org_id: str, number: int) -> None:
    stores.installations.claim(
        Installation(
            installation_id=number,
            organization_id=org_id,
            account=GitHubAccount("acme", "Organization", 7),
            verified_github_user="alice",
            claimed_by="user:ada",
            claimed_at=AT,
            bindings=0,
        ),
        cap=5,
        note=AuditNote(f"evt-hold-{org_id}-{number}", "github.installation.connected", "x", {}),
        now=AT,
    )


def _binding(
    workspace_id: str, org_id: str = "org-a", installation: int = 10, **changes: object
) -> Binding:
    bound = Binding(workspace_id, org_id, "acme/infra", "main", "", installation, RunKind.PLAN_ONLY)
    return replace(bound, **changes)  # type: ignore[arg-type]


def _bindings(stores: Stores, org_id: str, number: int) -> int | None:
    held = stores.installations.held(org_id, number)
    return None if held is None else held.bindings


# -- bindings ----------------------------------------------------------------------------------


def test_a_binding_is_written_once_from_what_was_read_and_counts_its_installation(
    stores: Stores,
) -> None:
    # Given an installation org-a holds
    _hold(stores, "org-a", 10)
    # When a workspace is bound with it
    stores.sources.bind(
        _binding("ws-1"), None, actor="user:ada", now=AT, release_note=stores.note()
    )
    # Then the binding reads back, is found by its repository, and counts once
    assert stores.sources.binding("ws-1") == _binding("ws-1")
    assert stores.sources.binding("ws-none") is None
    assert stores.sources.bound_to("acme/infra") == [_binding("ws-1")]
    assert _bindings(stores, "org-a", 10) == 1
    # And a second bind from "nothing bound" is refused, writing nothing
    with pytest.raises(Conflict):
        stores.sources.bind(
            _binding("ws-1", branch="dev"), None, actor="u", now=AT, release_note=stores.note()
        )
    assert stores.sources.binding("ws-1") == _binding("ws-1")
    assert _bindings(stores, "org-a", 10) == 1
    # And one from a stale read of it too
    stale = _binding("ws-1", branch="old")
    with pytest.raises(Conflict):
        stores.sources.bind(
            _binding("ws-1", branch="dev"), stale, actor="u", now=AT, release_note=stores.note()
        )
    assert stores.sources.binding("ws-1") == _binding("ws-1")
    # When it is replaced from what was read (same installation), the count stays
    moved = _binding("ws-1", repository="acme/other", working_directory="envs/prod")
    stores.sources.bind(moved, _binding("ws-1"), actor="u", now=AT, release_note=stores.note())
    assert stores.sources.binding("ws-1") == moved
    assert stores.sources.bound_to("acme/infra") == []
    assert stores.sources.bound_to("acme/other") == [moved]
    assert _bindings(stores, "org-a", 10) == 1
    assert stores.notes == []


def test_an_installation_not_held_by_the_bindings_organization_binds_nothing(
    stores: Stores,
) -> None:
    # Given org-b holds installation 20, org-a holds nothing
    _hold(stores, "org-b", 20)
    # When org-a binds with it, or with one nobody holds
    for number in (20, 21):
        with pytest.raises(GitHubInstallationTaken):
            stores.sources.bind(
                _binding("ws-a", installation=number),
                None,
                actor="u",
                now=AT,
                release_note=stores.note(),
            )
    # Then nothing was written, and org-b's count did not move
    assert stores.sources.binding("ws-a") is None
    assert stores.sources.bound_to("acme/infra") == []
    assert _bindings(stores, "org-b", 20) == 0


def test_bindings_of_two_organizations_to_one_repository_stay_apart(stores: Stores) -> None:
    # Given each organization binds a workspace to the same repository with its own
    _hold(stores, "org-a", 10)
    _hold(stores, "org-b", 20)
    theirs = _binding("ws-b", "org-b", 20)
    stores.sources.bind(_binding("ws-a"), None, actor="u", now=AT, release_note=stores.note())
    stores.sources.bind(theirs, None, actor="u", now=AT, release_note=stores.note())
    # Then the repository's bindings name both, in workspace ID order, each its own
    assert stores.sources.bound_to("acme/infra") == [_binding("ws-a"), theirs]
    # When org-a's binding goes
    stores.sources.unbind(_binding("ws-a"), now=AT, release_note=stores.note())
    # Then org-b's binding and installation are untouched
    assert stores.sources.bound_to("acme/infra") == [theirs]
    assert _bindings(stores, "org-b", 20) == 1
    assert stores.installations.holder_of(20) == "org-b"


def test_the_last_binding_leaving_an_installation_releases_it_with_its_note(
    stores: Stores,
) -> None:
    # Given two workspaces bound with installation 10, and 11 held too
    _hold(stores, "org-a", 10)
    _hold(stores, "org-a", 11)
    for ws in ("ws-1", "ws-2"):
        stores.sources.bind(_binding(ws), None, actor="u", now=AT, release_note=stores.note())
    assert _bindings(stores, "org-a", 10) == 2
    # When one moves to installation 11: 10 counts one fewer, 11 one more
    later = AT + timedelta(minutes=1)
    moved = _binding("ws-1", installation=11)
    stores.sources.bind(moved, _binding("ws-1"), actor="u", now=later, release_note=stores.note())
    assert (_bindings(stores, "org-a", 10), _bindings(stores, "org-a", 11)) == (1, 1)
    assert stores.installations.holder_of(10) == "org-a"
    # When the other is unbound: its installation's last binding releases it
    stores.sources.unbind(_binding("ws-2"), now=later, release_note=stores.note())
    assert stores.installations.holder_of(10) is None
    assert stores.installations.held("org-a", 10) is None
    released = [e for e in stores.trail("org-a") if e.type == "github.installation.released"]
    assert [(e.id, e.subject_id, e.at) for e in released] == [
        (stores.notes[-1], "github-installation-10", later)
    ]
    # And an unbind of what is no longer there is refused, writing nothing
    with pytest.raises(Conflict):
        stores.sources.unbind(_binding("ws-2"), now=later, release_note=stores.note())
    with pytest.raises(Conflict):
        stores.sources.unbind(_binding("ws-1"), now=later, release_note=stores.note())
    assert stores.sources.binding("ws-1") == moved
    assert _bindings(stores, "org-a", 11) == 1


# -- deliveries and ingestions -----------------------------------------------------------------


def _delivery(delivery_id: str, source_id: str | None = None, digest: str = "d1") -> Delivery:
    outcome = {"delivery_id": delivery_id, "event": "push", "status": "accepted"}
    return Delivery(delivery_id, "push", digest, 202, outcome, source_id)


def _ingestion(source_id: str, org_id: str = "org-a") -> Ingestion:
    event = SourceEvent(
        event="pull_request",
        action="opened",
        repository="acme/infra",
        branch="main",
        commit_sha=SHA,
        installation_id=10,
        occurred_at=AT,
        pull_request=7,
        sender="alice",
        pull_request_title="Add a bucket",
        pull_request_author="bob",
    )
    return Ingestion.pending(source_id, org_id, f"delivery-{source_id}", event, AT)


def _target(ws: str, cv: str) -> IngestionTarget:
    return IngestionTarget(ws, "envs/prod", RunKind.SPECULATIVE, cv, f"art-{cv}")


def test_a_delivery_is_recorded_once_with_the_ingestion_it_starts(stores: Stores) -> None:
    # When a delivery is recorded with the ingestion it starts
    stores.sources.record_delivery(
        _delivery("d-1", "src-1"), received_at=AT, starts=_ingestion("src-1")
    )
    # Then both read back as written
    assert stores.sources.delivery("d-1") == _delivery("d-1", "src-1")
    assert stores.sources.ingestion("src-1") == _ingestion("src-1")
    assert stores.sources.delivery("d-none") is None
    assert stores.sources.ingestion("src-none") is None
    # And the same ID again is refused with the first record, writing nothing
    with pytest.raises(DeliveryAlreadyRecorded) as seen:
        stores.sources.record_delivery(
            _delivery("d-1", "src-2", digest="d2"), received_at=AT, starts=_ingestion("src-2")
        )
    assert seen.value.recorded == _delivery("d-1", "src-1")
    assert stores.sources.ingestion("src-2") is None
    # And a new delivery naming an ingestion ID taken is refused, writing nothing
    with pytest.raises(ConcurrentChange):
        stores.sources.record_delivery(_delivery("d-3"), received_at=AT, starts=_ingestion("src-1"))
    assert stores.sources.delivery("d-3") is None
    # And a delivery that starts nothing is recorded alone
    ignored = Delivery("d-4", "ping", "d4", 200, {"status": "ignored", "reason": "ping"}, None)
    stores.sources.record_delivery(ignored, received_at=AT, starts=None)
    assert stores.sources.delivery("d-4") == ignored


def test_a_fetched_ingestion_records_its_configurations_and_targets_once(
    stores: Stores,
) -> None:
    # Given a pending ingestion of org-a, and one of org-b
    stores.sources.record_delivery(
        _delivery("d-1", "src-1"), received_at=AT, starts=_ingestion("src-1")
    )
    stores.sources.record_delivery(
        _delivery("d-2", "src-2"), received_at=AT, starts=_ingestion("src-2", "org-b")
    )
    targets = [_target("ws-2", "cv-2"), _target("ws-1", "cv-1")]
    fetched = [FetchedConfiguration(t, "org-a", f"sha-{t.workspace_id}", 3, True) for t in targets]
    # When its commit is fetched
    later = AT + timedelta(minutes=1)
    stores.sources.record_fetched(
        "src-1",
        archive_sha256="arch",
        archive_size=9,
        configurations=fetched,
        targets=targets,
        now=later,
    )
    # Then it is ready with its targets in the order given, each configuration recorded
    ready = stores.sources.ingestion("src-1")
    assert ready == replace(
        _ingestion("src-1"),
        status="ready",
        archive_sha256="arch",
        archive_size=9,
        targets=tuple(targets),
        updated_at=later,
    )
    assert stores.configuration("cv-1") == ("ws-1", "art-cv-1", "src-1")
    # And org-b's ingestion did not move
    assert stores.sources.ingestion("src-2") == _ingestion("src-2", "org-b")
    # And a second fetch is refused (no longer pending), writing nothing
    with pytest.raises(Conflict):
        stores.sources.record_fetched(
            "src-1",
            archive_sha256="other",
            archive_size=1,
            configurations=[FetchedConfiguration(_target("ws-3", "cv-3"), "org-a", "s", 1, True)],
            targets=[_target("ws-3", "cv-3")],
            now=later,
        )
    assert stores.configuration("cv-3") is None
    assert stores.sources.ingestion("src-1") == ready
    # And a fetch recording a configuration version already there writes nothing either
    with pytest.raises(ConcurrentChange):
        stores.sources.record_fetched(
            "src-2",
            archive_sha256="arch",
            archive_size=9,
            configurations=[FetchedConfiguration(_target("ws-9", "cv-1"), "org-b", "s", 1, True)],
            targets=[_target("ws-9", "cv-1")],
            now=later,
        )
    assert stores.sources.ingestion("src-2") == _ingestion("src-2", "org-b")
    assert stores.configuration("cv-1") == ("ws-1", "art-cv-1", "src-1")


def test_a_ready_ingestions_targets_are_replaced_and_a_pending_one_fails_once(
    stores: Stores,
) -> None:
    # Given a ready ingestion and a pending one
    for source_id in ("src-1", "src-2"):
        stores.sources.record_delivery(
            _delivery(f"d-{source_id}", source_id), received_at=AT, starts=_ingestion(source_id)
        )
    targets = [_target("ws-1", "cv-1"), _target("ws-2", "cv-2")]
    stores.sources.record_fetched(
        "src-1", archive_sha256="a", archive_size=1, configurations=[], targets=targets, now=AT
    )
    # When its targets record a run and a refusal
    recorded = [replace(targets[0], run_id="run-1"), replace(targets[1], error="FORBIDDEN")]
    stores.sources.set_targets("src-1", recorded, AT)
    # Then they read back in order, as written
    ready = stores.sources.ingestion("src-1")
    assert ready is not None
    assert ready.targets == tuple(recorded)
    # And a pending ingestion's targets are not set
    with pytest.raises(ConcurrentChange):
        stores.sources.set_targets("src-2", recorded, AT)
    pending = stores.sources.ingestion("src-2")
    assert pending is not None
    assert pending.targets == ()
    # When the pending one fails, its reason is kept, cut at 500 characters
    stores.sources.mark_failed("src-2", "x" * 600, AT)
    failed = stores.sources.ingestion("src-2")
    assert failed is not None
    assert (failed.status, failed.reason) == ("failed", "x" * 500)
    # And neither a failed nor a ready one fails again
    for source_id in ("src-2", "src-1"):
        with pytest.raises(Conflict):
            stores.sources.mark_failed(source_id, "again", AT)
    assert stores.sources.ingestion("src-1") == ready


# -- preview workspaces ------------------------------------------------------------------------


def test_a_bindings_pull_request_options_are_kept(stores: Stores) -> None:
    # Given an installation org-a holds
    _hold(stores, "org-a", 10)
    # When a workspace is bound with both options, and another without
    both = _binding("ws-1", pull_request_workspaces=True, pull_request_auto_apply_destroy=True)
    for binding in (both, _binding("ws-2")):
        stores.sources.bind(binding, None, actor="user:ada", now=AT, release_note=stores.note())
    # Then each reads back as written
    assert stores.sources.binding("ws-1") == both
    assert stores.sources.binding("ws-2") == _binding("ws-2")
    assert sorted(stores.sources.bound_to("acme/infra"), key=lambda b: b.workspace_id) == [
        both,
        _binding("ws-2"),
    ]


def test_a_preview_target_keeps_its_bound_workspace(stores: Stores) -> None:
    # Given a pending ingestion
    stores.sources.record_delivery(
        _delivery("d-1", "src-1"), received_at=AT, starts=_ingestion("src-1")
    )
    # When its commit is fetched for a preview workspace made from ws-1
    target = replace(_target("ws-preview", "cv-1"), bound_workspace_id="ws-1")
    stores.sources.record_fetched(
        "src-1",
        archive_sha256="arch",
        archive_size=9,
        configurations=[FetchedConfiguration(target, "org-a", "s", 1, False)],
        targets=[target],
        now=AT,
    )
    # Then the target reads back naming both
    source = stores.sources.ingestion("src-1")
    assert source is not None
    assert source.targets == (target,)
    assert source.targets[0].binding_workspace_id == "ws-1"


def test_a_preview_is_recorded_once_and_moved_only_from_what_was_read(stores: Stores) -> None:
    preview = PreviewWorkspace(
        workspace_id="ws-p1",
        organization_id="org-a",
        parent_workspace_id="ws-1",
        repository="acme/infra",
        pull_request=7,
        created_by="source:src-1",
        created_at=AT,
    )
    # Given nothing recorded for pull request 7 of ws-1
    assert stores.sources.preview("ws-1", 7) is None
    # When its preview is recorded
    stores.sources.record_preview(preview, None)
    # Then it reads back, apart from another pull request's or workspace's
    assert stores.sources.preview("ws-1", 7) == preview
    assert stores.sources.preview("ws-1", 8) is None
    assert stores.sources.preview("ws-2", 7) is None
    # And recording another as if none were there is refused, writing nothing
    with pytest.raises(ConcurrentChange):
        stores.sources.record_preview(replace(preview, workspace_id="ws-p2"), None)
    assert stores.sources.preview("ws-1", 7) == preview
    # And it moves from what was read: created, then closed
    created = replace(preview, workspace_created=True)
    stores.sources.record_preview(created, preview)
    closed = replace(created, closed_at=AT + timedelta(hours=1))
    stores.sources.record_preview(closed, created)
    assert stores.sources.preview("ws-1", 7) == closed
    # And a move from a stale read (not yet closed, or not yet created) is refused
    for stale in (created, preview):
        with pytest.raises(ConcurrentChange):
            stores.sources.record_preview(replace(stale, workspace_id="ws-p3"), stale)
    assert stores.sources.preview("ws-1", 7) == closed


def test_a_bindings_path_filters_are_kept(stores: Stores) -> None:
    # Given an installation org-a holds
    _hold(stores, "org-a", 10)
    # When a workspace is bound with path filters
    filtered = replace(
        _binding("ws-1"), trigger_patterns=("modules/**", "*.tf"), ignore_patterns=("**/*.md",)
    )
    stores.sources.bind(filtered, None, actor="user:ada", now=AT, release_note=stores.note())
    # Then it reads back as written, patterns in order
    assert stores.sources.binding("ws-1") == filtered
    assert stores.sources.bound_to("acme/infra") == [filtered]


def test_an_ingestion_every_filter_skipped_is_ready_with_its_decisions(stores: Stores) -> None:
    # Given a pending push ingestion naming its previous head, forced
    pending = replace(_ingestion("src-1"), before_sha="a" * 40, forced=True)
    stores.sources.record_delivery(_delivery("d-1", "src-1"), received_at=AT, starts=pending)
    decisions = (
        PathDecision(
            "ws-1", False, "none of the 2 changed files matches the trigger patterns", 2, 0
        ),
        PathDecision("ws-2", True, "GitHub listed only part", 300, 300, "truncated"),
    )
    # When it is recorded ready with no archive and no target, only decisions
    stores.sources.record_fetched(
        "src-1",
        archive_sha256=None,
        archive_size=None,
        configurations=[],
        targets=[],
        now=AT,
        path_decisions=decisions,
    )
    # Then it reads back ready, without archive, with its push details and decisions
    source = stores.sources.ingestion("src-1")
    assert source is not None
    assert (source.status, source.archive_sha256, source.targets) == ("ready", None, ())
    assert (source.before_sha, source.forced) == ("a" * 40, True)
    assert source.path_decisions == decisions
