"""Summaries of the engine's ``show -json`` plan documents."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.domain.plan_summary import PlanSummary, summarize
from runplane.domain.policy_sanitize import input_digest, sanitize_plan

CREATE = ["create"]
UPDATE = ["update"]
DELETE = ["delete"]
DELETE_CREATE = ["delete", "create"]
CREATE_DELETE = ["create", "delete"]
NO_OP = ["no-op"]
READ = ["read"]


def resource(actions: list[str], address: str = "null_resource.a") -> dict[str, Any]:
    return {
        "address": address,
        "mode": "managed",
        "type": address.split(".")[0],
        "name": address.split(".")[1],
        "change": {"actions": actions, "before": None, "after": {}},
    }


def plan(resources: list[list[str]], outputs: dict[str, list[str]] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format_version": "1.2",
        "resource_changes": [
            resource(actions, f"null_resource.r{i}") for i, actions in enumerate(resources)
        ],
    }
    if outputs is not None:
        document["output_changes"] = {
            name: {"actions": actions, "before": None, "after": "x"}
            for name, actions in outputs.items()
        }
    return document


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (CREATE, PlanSummary(adds=1, has_changes=True)),
        (UPDATE, PlanSummary(changes=1, has_changes=True)),
        (DELETE, PlanSummary(destroys=1, has_changes=True)),
        (DELETE_CREATE, PlanSummary(adds=1, destroys=1, replaces=1, has_changes=True)),
        (CREATE_DELETE, PlanSummary(adds=1, destroys=1, replaces=1, has_changes=True)),
        (NO_OP, PlanSummary()),
        (READ, PlanSummary()),
    ],
    ids=["create", "update", "delete", "delete-create", "create-delete", "no-op", "read"],
)
def test_each_action_shape_counts_as_documented(actions: list[str], expected: PlanSummary) -> None:
    # Given a plan with one resource change of that shape
    document = plan([actions])

    # When it is summarised
    # Then the counts and has_changes match the shape
    assert summarize(document) == expected


def test_a_mixed_plan_counts_every_resource() -> None:
    # Given one resource of every shape
    document = plan([CREATE, CREATE, UPDATE, DELETE, DELETE_CREATE, CREATE_DELETE, NO_OP, READ])

    # When it is summarised
    summary = summarize(document)

    # Then each add, change, destroy and replace is counted once
    assert (summary.adds, summary.changes, summary.destroys, summary.replaces) == (4, 1, 3, 2)
    assert summary.has_changes is True


@pytest.mark.parametrize("action", ["create", "update", "delete"])
def test_an_output_only_change_is_a_change(action: str) -> None:
    # Given a plan whose resources are untouched but whose output changes
    document = plan([NO_OP], outputs={"greeting": [action]})

    # When it is summarised
    summary = summarize(document)

    # Then no resource is counted, the output action is reported and the plan has changes
    assert (summary.adds, summary.changes, summary.destroys, summary.replaces) == (0, 0, 0, 0)
    assert summary.output_changes == {"greeting": action}
    assert summary.has_changes is True


def test_all_no_op_is_no_change() -> None:
    # Given a plan where every resource and output is a no-op (or a read)
    document = plan([NO_OP, READ, NO_OP], outputs={"a": NO_OP, "b": NO_OP})

    # When it is summarised
    summary = summarize(document)

    # Then nothing is counted and there are no changes
    assert summary == PlanSummary(output_changes={"a": "no-op", "b": "no-op"})
    assert summary.has_changes is False


def test_terraform_1_0_3_output_only_document() -> None:
    # Given the shape Terraform 1.0.3 prints for a config with only a new output
    document = {
        "format_version": "0.2",
        "terraform_version": "1.0.3",
        "planned_values": {"outputs": {"greeting": {"sensitive": False, "value": "hello"}}},
        "output_changes": {
            "greeting": {
                "actions": ["create"],
                "before": None,
                "after": "hello",
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": False,
            }
        },
        "configuration": {"root_module": {}},
    }

    # When it is summarised
    summary = summarize(document)

    # Then the output creation is the only change
    assert summary == PlanSummary(output_changes={"greeting": "create"}, has_changes=True)


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"format_version": "1.2"},
        {"resource_changes": None, "output_changes": None},
        {"resource_changes": [], "output_changes": {}},
        {"resource_changes": "create", "output_changes": []},
        {"resource_changes": [None, 3, "x", {}, {"change": None}, {"change": {}}]},
        {"resource_changes": [{"change": {"actions": None}}, {"change": {"actions": "create"}}]},
    ],
    ids=["empty", "no-keys", "nulls", "empty-collections", "wrong-types", "junk", "bad-actions"],
)
def test_missing_or_malformed_parts_count_as_empty(document: dict[str, Any]) -> None:
    # Given a document without usable changes
    # When it is summarised
    # Then it is an empty summary
    assert summarize(document) == PlanSummary()


def test_output_change_of_an_unusual_shape_is_an_update() -> None:
    # Given outputs with a read, an empty action list, a replacement and a missing list
    document = {
        "output_changes": {
            "r": {"actions": ["read"]},
            "e": {"actions": []},
            "x": {"actions": ["delete", "create"]},
            "m": {},
        }
    }

    # When it is summarised
    summary = summarize(document)

    # Then read, empty and missing are no-ops and the replacement is an update
    assert summary.output_changes == {"r": "no-op", "e": "no-op", "x": "update", "m": "no-op"}
    assert summary.has_changes is True


def test_an_uncounted_action_still_is_a_change() -> None:
    # Given an OpenTofu "forget" action, which none of the counters covers
    document = plan([["forget"]])

    # When it is summarised
    summary = summarize(document)

    # Then nothing is counted but the plan has changes
    assert (summary.adds, summary.changes, summary.destroys, summary.replaces) == (0, 0, 0, 0)
    assert summary.has_changes is True


def test_as_dict_is_json_ready() -> None:
    summary = summarize(plan([CREATE], outputs={"o": UPDATE}))

    assert summary.as_dict() == {
        "adds": 1,
        "changes": 0,
        "destroys": 0,
        "replaces": 0,
        "output_changes": {"o": "update"},
        "has_changes": True,
    }


SHAPES = {
    "create": CREATE,
    "update": UPDATE,
    "delete": DELETE,
    "delete-create": DELETE_CREATE,
    "create-delete": CREATE_DELETE,
    "no-op": NO_OP,
    "read": READ,
}


@given(
    shapes=st.lists(st.sampled_from(sorted(SHAPES)), max_size=40),
    outputs=st.dictionaries(
        st.text("abcxyz_", min_size=1, max_size=6),
        st.sampled_from(["create", "update", "delete", "no-op"]),
        max_size=5,
    ),
)
def test_counts_equal_the_items_of_each_action(shapes: list[str], outputs: dict[str, str]) -> None:
    # Given generated resource changes and output changes
    document = plan([SHAPES[s] for s in shapes], {k: [v] for k, v in outputs.items()})

    # When they are summarised
    summary = summarize(document)

    # Then each counter is the number of items with that action
    replaced = shapes.count("delete-create") + shapes.count("create-delete")
    assert summary.adds == shapes.count("create") + replaced
    assert summary.changes == shapes.count("update")
    assert summary.destroys == shapes.count("delete") + replaced
    assert summary.replaces == replaced
    assert summary.output_changes == outputs
    # ... and there are changes iff some item is neither no-op nor read
    expected = any(s not in {"no-op", "read"} for s in shapes) or any(
        v != "no-op" for v in outputs.values()
    )
    assert summary.has_changes is expected


@given(
    shapes=st.lists(
        st.sampled_from([*sorted(SHAPES), "forget", "odd"]),
        max_size=30,
    )
)
def test_the_policy_input_counts_what_the_plan_summary_counts(shapes: list[str]) -> None:
    # Given generated resource changes, some with actions neither summary counts
    actions = {**SHAPES, "forget": ["forget"], "odd": ["update", "create"]}
    document = plan([actions[s] for s in shapes])

    # When the runner summarises the plan and the policy input is derived from it
    summary = summarize(document)
    policy = sanitize_plan(document, workspace="w", run_kind="plan_only", engine_version="1")

    # Then both give the same counts, each under its own persisted names
    assert policy["summary"] == {
        "add": summary.adds,
        "change": summary.changes,
        "destroy": summary.destroys,
        "replace": summary.replaces,
    }


def test_the_policy_input_digest_of_a_known_plan_is_unchanged() -> None:
    # Given a plan with every counted shape (its digest was taken before the counting
    # moved into one implementation; approvals bind this digest)
    document: dict[str, Any] = {
        "format_version": "1.0",
        "resource_changes": [
            golden_resource("a", ["create"], None, {"triggers": None}),
            golden_resource("b", ["delete", "create"], {"id": "1"}, {}),
            golden_resource("c", ["update"], {"id": "2"}, {"id": "2"}),
            golden_resource("d", ["delete"], {"id": "3"}, None),
            golden_resource("e", ["no-op"], {"id": "4"}, {"id": "4"}),
        ],
        "output_changes": {
            "greeting": {
                "actions": ["create"],
                "before": None,
                "after": "hi",
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": False,
            }
        },
    }

    # When its policy input is derived
    doc = sanitize_plan(
        document, workspace="prod", run_kind="plan_and_apply", engine_version="1.0.3"
    )

    # Then the summary keeps the policy input's names and the digest is the one recorded
    assert doc["summary"] == {"add": 2, "change": 1, "destroy": 2, "replace": 1}
    assert input_digest(doc) == (
        "sha256:cc18e0b7b9d8067791597968576a8d56546d002642b95cd79dd785d9e0154a79"
    )


def golden_resource(name: str, actions: list[str], before: Any, after: Any) -> dict[str, Any]:
    change: dict[str, Any] = {"actions": actions, "before": before, "after": after}
    if before is not None:
        change["before_sensitive"] = {}
    if after is not None:
        change["after_sensitive"] = {}
    if actions[0] in {"create", "delete"} and after is not None:
        change["after_unknown"] = {"id": True}
    return {
        "address": f"null_resource.{name}",
        "mode": "managed",
        "type": "null_resource",
        "name": name,
        "provider_name": "registry.terraform.io/hashicorp/null",
        "change": change,
    }
