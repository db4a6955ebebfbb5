"""The policy set store contract: the same cases against the DynamoDB store (on moto) and
the in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.entities import Organization
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.services.repositories import PolicySetStore
from runplane.store import policy_sets, run_batch
from runplane.store.models import PolicySetItem, policy_set_key
from runplane.store.policy_set_store import DynamoPolicySetStore
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from tests.fakes import InMemoryPolicySets

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG, OTHER = "org-acme", "org-other"
POLICIES: list[dict[str, Any]] = [{"name": "p", "enforcement": "advisory", "description": ""}]


@pytest.fixture(params=["dynamodb", "memory"])
def sets(request: pytest.FixtureRequest) -> PolicySetStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoPolicySetStore()
    return InMemoryPolicySets()


def _publish(
    sets: PolicySetStore,
    name: str,
    digest: str,
    previous: PolicySetHead | None,
    *,
    org: str = ORG,
    exists: bool = False,
    at: datetime = AT,
) -> None:
    sets.publish(
        org,
        name,
        digest,
        f"art-{digest}",
        POLICIES,
        previous=previous,
        by="user:ada",
        now=at,
        version_exists=exists,
    )


def test_a_published_set_reads_back_in_name_order_within_its_organization(
    sets: PolicySetStore,
) -> None:
    # Given two sets of ours, published in reverse name order, and one of another org
    _publish(sets, "zeta", "sha256:z1", None)
    _publish(sets, "alpha", "sha256:a1", None)
    _publish(sets, "alpha", "sha256:o1", None, org=OTHER)
    # Then each reads back whole, as version 1 of its set
    assert sets.get(ORG, "alpha") == PolicySetHead(
        org_id=ORG,
        name="alpha",
        current_digest="sha256:a1",
        current_artifact_id="art-sha256:a1",
        policies=POLICIES,
        versions=1,
        attached_workspaces=(),
        all_workspaces=False,
        updated_at=AT,
        updated_by="user:ada",
        version=1,
    )
    assert [h.name for h in sets.all_of(ORG)] == ["alpha", "zeta"]
    assert sets.version_artifact_id(ORG, "alpha", "sha256:a1") == "art-sha256:a1"
    # And another organization's set of the same name is not ours, nor its content
    assert sets.get(OTHER, "alpha").current_digest == "sha256:o1"
    assert sets.version_artifact_id(ORG, "alpha", "sha256:o1") is None
    assert sets.find(ORG, "missing") is None
    with pytest.raises(NotFound):
        sets.get(ORG, "missing")
    assert sets.all_of("org-none") == []


def test_a_publish_over_a_moved_head_is_refused_and_writes_nothing(sets: PolicySetStore) -> None:
    # Given a set, read, then published again by someone else
    _publish(sets, "p", "sha256:1", None)
    read = sets.get(ORG, "p")
    _publish(sets, "p", "sha256:2", read)
    current = sets.get(ORG, "p")
    # When a publish names the head it read first
    with pytest.raises(ConcurrentChange):
        _publish(sets, "p", "sha256:3", read)
    # Or creates the set as if it were new
    with pytest.raises(ConcurrentChange):
        _publish(sets, "p", "sha256:4", None)
    # Then neither wrote: the head and its versions are as they were
    assert sets.get(ORG, "p") == current
    assert (current.versions, current.version) == (2, 2)
    assert sets.version_artifact_id(ORG, "p", "sha256:3") is None
    assert sets.version_artifact_id(ORG, "p", "sha256:4") is None


def test_earlier_content_becomes_current_again_without_a_new_version(
    sets: PolicySetStore,
) -> None:
    # Given two versions of a set
    _publish(sets, "p", "sha256:1", None)
    _publish(sets, "p", "sha256:2", sets.get(ORG, "p"))
    # When a version of the first digest is written again as new, it is refused
    with pytest.raises(ConcurrentChange):
        _publish(sets, "p", "sha256:1", sets.get(ORG, "p"))
    assert sets.get(ORG, "p").current_digest == "sha256:2"
    # When the head moves back to it as existing content
    _publish(sets, "p", "sha256:1", sets.get(ORG, "p"), exists=True)
    # Then it is current again, and the set still counts two versions
    back = sets.get(ORG, "p")
    assert (back.current_digest, back.current_artifact_id) == ("sha256:1", "art-sha256:1")
    assert (back.versions, back.version) == (2, 3)


def test_attachments_move_only_over_the_head_read_and_survive_a_publish(
    sets: PolicySetStore,
) -> None:
    # Given a set attached to two workspaces
    _publish(sets, "p", "sha256:1", None)
    read = sets.get(ORG, "p")
    later = AT + timedelta(minutes=1)
    sets.attach(read, ["ws-a", "ws-b"], False, by="user:bob", now=later)
    attached = sets.get(ORG, "p")
    assert (attached.attached_workspaces, attached.all_workspaces) == (("ws-a", "ws-b"), False)
    assert (attached.updated_by, attached.updated_at, attached.version) == ("user:bob", later, 2)
    # When an attach names the head read before that
    with pytest.raises(ConcurrentChange):
        sets.attach(read, [], True, by="user:ada", now=later)
    # Then it wrote nothing
    assert sets.get(ORG, "p") == attached
    # And a new version keeps where the set is attached
    _publish(sets, "p", "sha256:2", attached)
    assert sets.get(ORG, "p").attached_workspaces == ("ws-a", "ws-b")
    assert sets.get(ORG, "p").applies_to("ws-b")


def test_attaching_a_set_that_does_not_exist_writes_nothing(sets: PolicySetStore) -> None:
    ghost = PolicySetHead(ORG, "ghost", "sha256:g", "art-g", [], 1, (), False, AT, "user:ada", 1)
    with pytest.raises(ConcurrentChange):
        sets.attach(ghost, ["ws-a"], False, by="user:ada", now=AT)
    assert sets.find(ORG, "ghost") is None


# -- the organization's tally ------------------------------------------------------------


def _new_organization(sets: PolicySetStore, org: str) -> None:
    """An organization created now (its creation writes its tally)."""
    if isinstance(sets, InMemoryPolicySets):
        sets.tallies[org] = 0
    else:
        DynamoWorkspaceDirectory().create_organization(Organization(org, f"name-{org}", AT))


def _legacy_sets(sets: PolicySetStore, org: str, *names: str) -> None:
    """Sets of an organization created before tallies: heads, and no tally."""
    for name in names:
        head = PolicySetHead(
            org, name, f"sha256:{name}", f"art-{name}", [], 1, (), True, AT, "u", 1
        )
        if isinstance(sets, InMemoryPolicySets):
            sets.heads[(org, name)] = head
        else:
            PolicySetItem(
                *policy_set_key(org, name),
                org_id=org,
                name=name,
                current_digest=head.current_digest,
                current_artifact_id=head.current_artifact_id,
                all_workspaces=True,
                updated_at=AT,
                updated_by="u",
            ).save()


def _tally(sets: PolicySetStore, org: str) -> int | None:
    if isinstance(sets, InMemoryPolicySets):
        return sets.tallies.get(org)
    return policy_sets.tally(org)


@contextmanager
def _run_read_ahead(sets: PolicySetStore, org: str) -> Iterator[None]:
    """A policy step's first read: the tally read ahead with its run (the fake serves it
    as if every request had)."""
    if isinstance(sets, InMemoryPolicySets):
        with nullcontext():
            yield
        return
    with run_batch.reading_ahead("run-any", ["policy"], policy_tally_of=org):
        yield


def test_a_new_organization_counts_no_set_until_its_first_is_created(
    sets: PolicySetStore,
) -> None:
    # Given an organization created now
    _new_organization(sets, ORG)
    # Then a read ahead counts none, and lists none
    with _run_read_ahead(sets, ORG):
        assert sets.counted_none(ORG)
    with _run_read_ahead(sets, ORG):
        assert sets.all_of(ORG) == []
    # When it publishes a set, then a new version of it, then a second set
    _publish(sets, "p", "sha256:1", None)
    _publish(sets, "p", "sha256:2", sets.get(ORG, "p"))
    _publish(sets, "q", "sha256:3", None)
    # Then the tally counts the two sets (a version is no set), and never none
    assert _tally(sets, ORG) == 2
    with _run_read_ahead(sets, ORG):
        assert not sets.counted_none(ORG)
    with _run_read_ahead(sets, ORG):
        assert [h.name for h in sets.all_of(ORG)] == ["p", "q"]


def test_a_refused_creation_counts_nothing(sets: PolicySetStore) -> None:
    # Given an organization with one set
    _new_organization(sets, ORG)
    _publish(sets, "p", "sha256:1", None)
    # When a second writer creates it again as if it were new
    with pytest.raises(ConcurrentChange):
        _publish(sets, "p", "sha256:2", None)
    # Then the tally still counts one
    assert _tally(sets, ORG) == 1


def test_an_organization_older_than_tallies_is_never_counted_none(sets: PolicySetStore) -> None:
    # Given an organization with two sets and no tally (created before tallies)
    _legacy_sets(sets, ORG, "a", "b")
    # Then a read ahead does not count it none, and its sets are listed
    with _run_read_ahead(sets, ORG):
        assert not sets.counted_none(ORG)
    with _run_read_ahead(sets, ORG):
        assert [h.name for h in sets.all_of(ORG)] == ["a", "b"]
    # When it creates a third set
    _publish(sets, "c", "sha256:c", None)
    # Then its new tally counts every set: those found and the new one
    assert _tally(sets, ORG) == 3
    # And an organization with no tally nor set is not counted none either
    with _run_read_ahead(sets, OTHER):
        assert not sets.counted_none(OTHER)


def test_two_writers_creating_sets_in_an_organization_older_than_tallies_count_both(
    stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an organization with one set and no tally, and two writers (two functions)
    first, second = DynamoPolicySetStore(), DynamoPolicySetStore()
    _legacy_sets(first, ORG, "a")
    counting = policy_sets.count_heads
    interleaved: list[int] = []

    def count_then_let_the_other_create(org_id: str) -> int:
        # The first writer found no tally and counted the heads; the second creates its
        # set (and the tally) before the first writer's write.
        counted = counting(org_id)
        if not interleaved:
            interleaved.append(counted)
            _publish(second, "b", "sha256:b", None)
        return counted

    monkeypatch.setattr(policy_sets, "count_heads", count_then_let_the_other_create)
    # When the first writer creates its set
    _publish(first, "c", "sha256:c", None)
    # Then it counted one set, lost the tally's creation to the second and incremented it:
    # the tally counts all three
    assert interleaved == [1]
    assert policy_sets.tally(ORG) == 3 == policy_sets.count_heads(ORG)
    assert [h.name for h in first.all_of(ORG)] == ["a", "b", "c"]


def test_a_creation_that_loses_the_tally_writes_nothing(stack: Any) -> None:
    # Given an organization with no tally, whose tally another writer created since
    # this one counted its (zero) heads
    losing = policy_sets.publish(
        ORG, "p", "sha256:p", "art-p", POLICIES, previous=None, by="u", now=AT, counted=0
    )
    _publish(DynamoPolicySetStore(), "q", "sha256:q", None)
    # When this writer commits, it is refused, and writes neither its head nor its version
    with pytest.raises(policy_sets.TallyPresent):
        losing.commit()
    assert policy_sets.find(ORG, "p") is None
    assert policy_sets.version(ORG, "p", "sha256:p") is None
    assert policy_sets.tally(ORG) == 1


def test_the_tally_is_counted_none_only_when_read_ahead_and_once(stack: Any) -> None:
    # Given an organization created now
    sets = DynamoPolicySetStore()
    _new_organization(sets, ORG)
    # Then a call that did not read it ahead does not take it as none
    assert not sets.counted_none(ORG)
    # And one that did takes it once: a second read is not served
    with run_batch.reading_ahead("run-any", [], policy_tally_of=ORG):
        assert sets.counted_none(ORG)
        assert not sets.counted_none(ORG)
