"""The policy set store contract: the same cases against the DynamoDB store (on moto) and
the in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.services.repositories import PolicySetStore
from runplane.store.policy_set_store import DynamoPolicySetStore
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
