"""Managing policy sets over the in-memory store: who may publish and attach, content-
addressed versions, the attachment limit, and tenancy (another organization's set or
workspace is absent). Evaluating a run's policy check writes the run's own parts and is
tested on the table (tests/integration/test_policy_checks.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from runplane.domain.entities import Organization
from runplane.domain.errors import (
    ConcurrentChange,
    InvalidInput,
    NotFound,
    PolicyModuleRefused,
)
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.services.policy import MAX_ATTACHMENTS, Policies
from tests.fakes import (
    InMemoryArtifactRecords,
    InMemoryArtifacts,
    InMemoryPolicySets,
    LexicalEvaluator,
)
from tests.fakes_operations import InMemorySourceRecords
from tests.service.conftest import Tier


@dataclass
class PolicyTier:
    tier: Tier
    sets: InMemoryPolicySets
    artifacts: InMemoryArtifacts
    policies: Policies
    org: Organization
    admin: Principal


@pytest.fixture
def pt(tier: Tier) -> PolicyTier:
    sets, artifacts, evaluator = (
        InMemoryPolicySets(),
        InMemoryArtifacts(tier.ids, tier.clock),
        LexicalEvaluator(),
    )
    policies = Policies(
        tier.clock,
        artifacts,
        lambda: evaluator,
        sets,
        tier.directory,
        units=tier.new_unit,
        sources=InMemorySourceRecords(),
        records=InMemoryArtifactRecords(),
    )
    org = tier.tenancy.create_organization("acme")
    return PolicyTier(tier, sets, artifacts, policies, org, tier.admin(org))


def one_policy(
    name: str, body: str = "deny := []", enforcement: str = "advisory"
) -> dict[str, Any]:
    package = name.replace("-", "_")
    return {
        "name": name,
        "modules": [
            {"name": f"{package}.rego", "source": f"package runplane.{package}\n\n{body}\n"}
        ],
        "policies": [
            {"name": package, "enforcement": enforcement, "query": f"data.runplane.{package}.deny"}
        ],
    }


def _member(org: Organization, *permissions: Permission) -> Principal:
    return Principal(PrincipalKind.USER, "dev", org.id, frozenset(permissions), "dev")


def test_publication_is_content_addressed_and_listed_in_name_order(pt: PolicyTier) -> None:
    # Given a set published, then changed, then published with its first content again
    first = pt.policies.publish(pt.admin, one_policy("zeta"))
    again = pt.policies.publish(pt.admin, one_policy("zeta"))
    changed = pt.policies.publish(pt.admin, one_policy("zeta", enforcement="hard_mandatory"))
    back = pt.policies.publish(pt.admin, one_policy("zeta"))
    pt.policies.publish(pt.admin, one_policy("alpha"))
    # Then the same content is no new version, and earlier content comes back as itself
    assert (first.created, first.version) == (True, 1)
    assert (again.created, again.digest, again.version) == (False, first.digest, 1)
    assert (changed.created, changed.version) == (True, 2)
    assert (back.digest, back.version) == (first.digest, 2)
    # Its content was stored once per digest (two for zeta, one for alpha)
    assert len(pt.artifacts.bodies) == 3
    # And the organization's sets read back in name order, each at its current version
    assert [(s.name, s.digest) for s in pt.policies.list(pt.admin)] == [
        ("alpha", pt.sets.get(pt.org.id, "alpha").current_digest),
        ("zeta", first.digest),
    ]
    assert pt.policies.get(pt.admin, "zeta").policies[0]["enforcement"] == "advisory"


def test_publishing_and_attaching_need_policy_manage_and_write_nothing(pt: PolicyTier) -> None:
    # Given a member who may read the organization but not manage its policies
    pt.policies.publish(pt.admin, one_policy("p"))
    ws = pt.tier.workspaces.create(pt.admin, "acme", "network")
    reader = _member(pt.org, Permission.ORGANIZATION_READ)
    before = dict(pt.sets.heads), dict(pt.artifacts.bodies)
    # When they publish or attach, they are refused
    with pytest.raises(Forbidden):
        pt.policies.publish(reader, one_policy("q"))
    with pytest.raises(Forbidden):
        pt.policies.attach(reader, "p", [ws.id], False)
    # Then nothing was written, and they can still read the sets
    assert (dict(pt.sets.heads), dict(pt.artifacts.bodies)) == before
    assert [s.name for s in pt.policies.list(reader)] == ["p"]
    # And a principal without organization read sees none at all
    with pytest.raises(Forbidden):
        pt.policies.list(_member(pt.org, Permission.WORKSPACE_READ))


def test_a_module_calling_a_forbidden_builtin_is_refused_and_stores_nothing(
    pt: PolicyTier,
) -> None:
    with pytest.raises(PolicyModuleRefused):
        pt.policies.publish(pt.admin, one_policy("p", 'deny := [x | x := http.send({"url": "u"})]'))
    assert pt.sets.heads == {}
    assert pt.artifacts.bodies == {}


def test_attaching_sets_where_a_set_applies(pt: PolicyTier) -> None:
    # Given a set and two workspaces
    pt.policies.publish(pt.admin, one_policy("p"))
    a = pt.tier.workspaces.create(pt.admin, "acme", "a")
    b = pt.tier.workspaces.create(pt.admin, "acme", "b")
    # When it is attached to both, named twice
    attached = pt.policies.attach(pt.admin, "p", [b.id, a.id, b.id], False)
    # Then it applies to each once, in ID order
    assert attached.attached_workspaces == tuple(sorted([a.id, b.id]))
    assert pt.sets.get(pt.org.id, "p").applies_to(a.id)
    # When it is attached to every workspace instead
    everywhere = pt.policies.attach(pt.admin, "p", [], True)
    assert (everywhere.attached_workspaces, everywhere.all_workspaces) == ((), True)
    assert pt.sets.get(pt.org.id, "p").applies_to("ws-created-later")


def test_more_workspaces_than_the_limit_is_invalid_input_and_writes_nothing(
    pt: PolicyTier,
) -> None:
    pt.policies.publish(pt.admin, one_policy("p"))
    before = pt.sets.get(pt.org.id, "p")
    too_many = [f"ws-{i:026d}" for i in range(MAX_ATTACHMENTS + 1)]
    with pytest.raises(InvalidInput) as refused:
        pt.policies.attach(pt.admin, "p", too_many, False)
    assert refused.value.pointer == "/workspaces"
    assert pt.sets.get(pt.org.id, "p") == before


def test_another_organizations_workspace_is_not_found_and_nothing_is_attached(
    pt: PolicyTier,
) -> None:
    # Given a set, a workspace of ours, and one of another organization
    pt.policies.publish(pt.admin, one_policy("p"))
    ours = pt.tier.workspaces.create(pt.admin, "acme", "ours")
    other = pt.tier.tenancy.create_organization("someone-else")
    theirs = pt.tier.workspaces.create(pt.tier.admin(other), "someone-else", "theirs")
    before = pt.sets.get(pt.org.id, "p")
    # When the set is attached to both
    with pytest.raises(NotFound) as refused:
        pt.policies.attach(pt.admin, "p", [ours.id, theirs.id], False)
    # Then it is 404 as for a missing workspace, naming its place; nothing changed
    assert refused.value.to_body() == {
        "code": "NOT_FOUND",
        "message": f"workspace {theirs.id} was not found",
    }
    assert refused.value.pointer == f"/workspaces/{sorted([ours.id, theirs.id]).index(theirs.id)}"
    assert pt.sets.get(pt.org.id, "p") == before


def test_another_organizations_set_is_not_found(pt: PolicyTier) -> None:
    # Given a set of another organization
    other = pt.tier.tenancy.create_organization("someone-else")
    pt.policies.publish(pt.tier.admin(other), one_policy("theirs"))
    theirs = pt.sets.get(other.id, "theirs")
    # Then our admin neither sees it, nor reads it, nor attaches it
    assert pt.policies.list(pt.admin) == []
    with pytest.raises(NotFound):
        pt.policies.get(pt.admin, "theirs")
    with pytest.raises(NotFound):
        pt.policies.attach(pt.admin, "theirs", [], True)
    assert pt.sets.get(other.id, "theirs") == theirs


def test_a_publish_that_loses_a_race_is_refused_and_discards_its_content(
    pt: PolicyTier,
) -> None:
    # Given a set, and another publisher landing between our read and our write
    pt.policies.publish(pt.admin, one_policy("p"))
    pt.tier.clock.on_next_reading(
        lambda: pt.policies.publish(pt.admin, one_policy("p", enforcement="soft_mandatory"))
    )
    # When we publish our change
    with pytest.raises(ConcurrentChange):
        pt.policies.publish(pt.admin, one_policy("p", enforcement="hard_mandatory"))
    # Then theirs is current, and our stored content was discarded
    head = pt.sets.get(pt.org.id, "p")
    assert (head.versions, head.policies[0]["enforcement"]) == (2, "soft_mandatory")
    assert len(pt.artifacts.bodies) == 2
