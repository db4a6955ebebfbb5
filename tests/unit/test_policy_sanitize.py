"""The sanitized plan derivative: what policies see, and what they never see."""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.domain.policy_sanitize import (
    POLICY_INPUT_FORMAT,
    SENSITIVE_MARKER,
    UNKNOWN_MARKER,
    canonical_json,
    input_digest,
    sanitize_plan,
)


class Meta(TypedDict):
    workspace: str
    run_kind: str
    engine_version: str


META: Meta = {"workspace": "ws-test", "run_kind": "plan_and_apply", "engine_version": "1.0.3"}


def _change(
    after: Any,
    *,
    before: Any = None,
    actions: list[str] | None = None,
    after_sensitive: Any = False,
    before_sensitive: Any = False,
    after_unknown: Any = False,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "address": "aws_db_instance.main",
        "mode": "managed",
        "type": "aws_db_instance",
        "name": "main",
        "provider_name": "registry.terraform.io/hashicorp/aws",
        "change": {
            "actions": actions or ["create"],
            "before": before,
            "after": after,
            "after_unknown": after_unknown,
            "before_sensitive": before_sensitive,
            "after_sensitive": after_sensitive,
        },
        **extra,
    }


def _sanitized_after(**change: Any) -> Any:
    plan = {"resource_changes": [_change(**change)]}
    return sanitize_plan(plan, **META)["resource_changes"][0]["after"]


def test_a_sensitive_leaf_is_replaced_by_the_marker() -> None:
    # Given a planned database whose password is marked sensitive
    after = {"username": "app", "password": "hunter2"}
    # When the plan is sanitized
    result = _sanitized_after(after=after, after_sensitive={"password": True})
    # Then the password is the marker and the rest is kept
    assert result == {"username": "app", "password": SENSITIVE_MARKER}


def test_sensitive_values_nested_in_lists_and_objects_are_hidden() -> None:
    # Given a list of blocks where one block's attribute is sensitive
    after = {
        "users": [{"name": "a", "key": "k-1"}, {"name": "b", "key": "k-2"}],
        "settings": {"region": "eu-west-1", "token": "t-1"},
    }
    sensitive = {"users": [{"key": True}, False], "settings": {"token": True}}
    # When the plan is sanitized
    result = _sanitized_after(after=after, after_sensitive=sensitive)
    # Then exactly the marked leaves are hidden
    assert result == {
        "users": [{"name": "a", "key": SENSITIVE_MARKER}, {"name": "b", "key": "k-2"}],
        "settings": {"region": "eu-west-1", "token": SENSITIVE_MARKER},
    }


def test_a_true_sensitivity_hides_the_whole_subtree_or_value() -> None:
    # Given a sensitive map attribute, and a value sensitive as a whole
    after = {"tags": {"a": "1"}, "config": {"nested": ["x", {"y": "z"}]}}
    # When each is sanitized
    partly = _sanitized_after(after=after, after_sensitive={"config": True})
    whole = _sanitized_after(after=after, after_sensitive=True)
    # Then the marked subtree, or the whole value, is one marker
    assert partly == {"tags": {"a": "1"}, "config": SENSITIVE_MARKER}
    assert whole == SENSITIVE_MARKER


def test_unknown_values_are_marked_known_after_apply() -> None:
    # Given attributes the engine omits or nulls because they are unknown until apply
    after = {"bucket": "logs", "grants": ["a", None]}
    unknown = {"arn": True, "id": True, "grants": [False, True]}
    # When the plan is sanitized
    result = _sanitized_after(after=after, after_unknown=unknown)
    # Then each unknown value is the marker, in place
    assert result == {
        "bucket": "logs",
        "grants": ["a", UNKNOWN_MARKER],
        "arn": UNKNOWN_MARKER,
        "id": UNKNOWN_MARKER,
    }
    # And a value unknown as a whole is one marker
    assert _sanitized_after(after=None, after_unknown=True) == UNKNOWN_MARKER


def test_a_value_both_unknown_and_sensitive_is_sensitive() -> None:
    result = _sanitized_after(
        after={}, after_unknown={"secret": True}, after_sensitive={"secret": True}
    )
    assert result == {"secret": SENSITIVE_MARKER}


@pytest.mark.parametrize(
    ("after", "sensitivity"),
    [
        ({"password": "hunter2"}, "yes"),
        ({"password": "hunter2"}, None),
        ({"password": "hunter2"}, 1),
        ({"password": "hunter2"}, [True]),
        (["hunter2"], {"0": True}),
        (["hunter2", "other"], [False]),
        ("hunter2", {}),
        ("hunter2", []),
        ({"inner": {"password": "hunter2"}}, {"inner": "true"}),
        ({"inner": ["hunter2"]}, {"inner": {"password": True}}),
    ],
)
def test_a_malformed_or_mismatched_sensitivity_hides_the_whole_value(
    after: Any, sensitivity: Any
) -> None:
    # Given a sensitivity structure that is malformed or does not mirror the value
    # When the plan is sanitized
    result = _sanitized_after(after=after, after_sensitive=sensitivity)
    # Then the whole value is hidden (fail closed)
    assert result == SENSITIVE_MARKER


def test_a_value_without_its_sensitivity_structure_is_hidden() -> None:
    # Given a change whose before value has no before_sensitive at all
    entry = _change({"a": 1}, before={"password": "hunter2"}, actions=["update"])
    del entry["change"]["before_sensitive"]
    # When the plan is sanitized
    result = sanitize_plan({"resource_changes": [entry]}, **META)["resource_changes"][0]
    # Then before is hidden whole, after is kept
    assert result["before"] == SENSITIVE_MARKER
    assert result["after"] == {"a": 1}


def test_sensitive_outputs_have_their_values_redacted() -> None:
    # Given outputs marked sensitive in each way the engine may mark them, and a plain one
    plan = {
        "output_changes": {
            "db_password": {
                "actions": ["create"],
                "before": None,
                "after": "hunter2",
                "after_unknown": False,
                "before_sensitive": True,
                "after_sensitive": True,
            },
            "token": {
                "actions": ["update"],
                "before": "old-token",
                "after": "new-token",
                "sensitive": True,
            },
            "half": {
                "actions": ["update"],
                "before": "old-value",
                "after": "new-value",
                "before_sensitive": False,
                "after_sensitive": True,
            },
            "bucket": {
                "actions": ["create"],
                "before": None,
                "after": "logs",
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": False,
            },
        }
    }
    # When the plan is sanitized
    outputs = {o["name"]: o for o in sanitize_plan(plan, **META)["output_changes"]}
    # Then sensitive outputs show markers only, and the plain output its value
    assert outputs["db_password"] == {
        "name": "db_password",
        "actions": ["create"],
        "sensitive": True,
        "before": None,
        "after": SENSITIVE_MARKER,
    }
    assert (outputs["token"]["before"], outputs["token"]["after"]) == (SENSITIVE_MARKER,) * 2
    assert (outputs["half"]["before"], outputs["half"]["after"]) == (SENSITIVE_MARKER,) * 2
    assert outputs["bucket"]["after"] == "logs"
    assert outputs["bucket"]["sensitive"] is False
    # And outputs are listed in name order
    assert [o["name"] for o in sanitize_plan(plan, **META)["output_changes"]] == sorted(outputs)


def test_only_changes_and_run_metadata_are_copied() -> None:
    # Given a plan carrying state, configuration, variables, planned values and drift
    secret = "SECRET-from-elsewhere"
    plan = {
        "format_version": "0.2",
        "terraform_version": "1.0.3",
        "variables": {"db_password": {"value": secret}},
        "planned_values": {"root_module": {"resources": [{"values": {"p": secret}}]}},
        "prior_state": {"values": {"root_module": {"resources": [{"values": {"p": secret}}]}}},
        "configuration": {"provider_config": {"aws": {"expressions": {"k": secret}}}},
        "resource_drift": [_change({"password": secret})],
        "relevant_attributes": [{"resource": "x", "attribute": [secret]}],
        "resource_changes": [_change({"name": "db"})],
    }
    # When the plan is sanitized
    result = sanitize_plan(plan, **META)
    # Then the document holds only the derivative's own fields, and no trace of the rest
    assert set(result) == {"format", "run", "resource_changes", "output_changes", "summary"}
    assert result["format"] == POLICY_INPUT_FORMAT
    assert result["run"] == {
        "workspace": "ws-test",
        "kind": "plan_and_apply",
        "engine_version": "1.0.3",
    }
    assert secret not in json.dumps(result)


def test_resource_changes_keep_their_identity_and_actions() -> None:
    # Given a replaced resource in a module, with an index and a reason
    entry = _change(
        {"a": 1},
        before={"a": 0},
        actions=["delete", "create"],
        before_sensitive={},
        after_sensitive={},
        module_address="module.db",
        index="primary",
        action_reason="replace_because_tainted",
    )
    entry["address"] = 'module.db.aws_db_instance.main["primary"]'
    plan = {"resource_changes": [entry, _change({"b": 2}, actions=["no-op"])]}
    # When the plan is sanitized
    result = sanitize_plan(plan, **META)
    # Then its identity, actions and reason are kept, and the summary counts it
    assert result["resource_changes"][0] == {
        "address": 'module.db.aws_db_instance.main["primary"]',
        "module_address": "module.db",
        "mode": "managed",
        "type": "aws_db_instance",
        "name": "main",
        "index": "primary",
        "provider_name": "registry.terraform.io/hashicorp/aws",
        "action_reason": "replace_because_tainted",
        "actions": ["delete", "create"],
        "before": {"a": 0},
        "after": {"a": 1},
    }
    assert result["summary"] == {"add": 1, "change": 0, "destroy": 1, "replace": 1}


def test_sanitizing_is_deterministic_and_the_digest_is_canonical() -> None:
    # Given the same plan built twice with its keys in different orders
    first = {"resource_changes": [_change({"a": 1, "b": [1, 2]})]}
    second = json.loads(json.dumps(first))
    second["resource_changes"][0]["change"]["after"] = {"b": [1, 2], "a": 1}
    # When both are sanitized and digested
    one, two = sanitize_plan(first, **META), sanitize_plan(second, **META)
    # Then the documents and digests are equal
    assert canonical_json(one) == canonical_json(two)
    assert input_digest(one) == input_digest(two)
    # And the digest is the SHA-256 of sorted-key, whitespace-free UTF-8 JSON
    doc = {"b": [1, "é"], "a": None}
    expected = hashlib.sha256('{"a":null,"b":[1,"é"]}'.encode()).hexdigest()
    assert input_digest(doc) == f"sha256:{expected}"
    # And any change to the plan changes the digest
    first["resource_changes"][0]["change"]["actions"] = ["update"]
    assert input_digest(sanitize_plan(first, **META)) != input_digest(one)


def test_a_malformed_plan_sanitizes_to_no_changes() -> None:
    plan = {"resource_changes": "nope", "output_changes": [1, 2]}
    result = sanitize_plan(plan, **META)
    assert result["resource_changes"] == []
    assert result["output_changes"] == []
    assert result["summary"] == {"add": 0, "change": 0, "destroy": 0, "replace": 0}


# -- property: no value marked sensitive ever reaches the derivative ---------------------------

SECRETS = st.uuids().map(lambda u: f"SECRET-{u.hex}")
PUBLIC = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.text(alphabet="abcdefgh ._-", max_size=8),
)
KEYS = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
SECRET_TREES = st.recursive(
    st.one_of(SECRETS, PUBLIC),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.one_of(KEYS, SECRETS), children, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def masked_values(draw: st.DrawFn, depth: int = 0) -> tuple[Any, Any]:
    """A value and its sensitivity structure; secrets appear only where it says so
    (or under a structure that is malformed, which must hide the whole value)."""
    kinds = ["secret", "public", "hidden", "malformed"]
    if depth < 3:
        kinds += ["object", "object", "list", "list"]
    kind = draw(st.sampled_from(kinds))
    if kind == "secret":
        return draw(SECRETS), True
    if kind == "public":
        return draw(PUBLIC), False
    if kind == "hidden":
        return draw(SECRET_TREES), True
    if kind == "malformed":
        secret = draw(SECRETS)
        # Each value with masks of its shape that are not booleans of that shape.
        cases: list[tuple[Any, list[Any]]] = [
            (secret, ["true", 1, 0, None, {}, [], {"k": True}]),
            ({"k": secret}, ["yes", 0, None, [False], []]),
            ([secret], ["yes", None, {}, {"0": True}, [], [False, False]]),
        ]
        value, bad_masks = draw(st.sampled_from(cases))
        return value, draw(st.sampled_from(bad_masks))
    if kind == "object":
        keys = draw(st.lists(KEYS, unique=True, max_size=4))
        children = {key: draw(masked_values(depth + 1)) for key in keys}
        mask = {
            key: child_mask
            for key, (_, child_mask) in children.items()
            if child_mask is not False or draw(st.booleans())
        }
        if not mask and draw(st.booleans()):
            return {key: value for key, (value, _) in children.items()}, False
        return {key: value for key, (value, _) in children.items()}, mask
    items = draw(st.lists(masked_values(depth + 1), max_size=4))
    if all(m is False for _, m in items) and draw(st.booleans()):
        return [value for value, _ in items], False
    return [value for value, _ in items], [m for _, m in items]


UNKNOWN_MASKS = st.recursive(
    st.booleans(),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=3)
    ),
    max_leaves=5,
)


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    changes = []
    for i in range(draw(st.integers(0, 4))):
        before, before_mask = draw(masked_values())
        after, after_mask = draw(masked_values())
        changes.append(
            {
                "address": f"x_thing.r{i}",
                "mode": "managed",
                "type": "x_thing",
                "name": f"r{i}",
                "provider_name": "registry.terraform.io/acme/x",
                "change": {
                    "actions": draw(
                        st.sampled_from([["create"], ["update"], ["delete", "create"]])
                    ),
                    "before": before,
                    "after": after,
                    "before_sensitive": before_mask,
                    "after_sensitive": after_mask,
                    "after_unknown": draw(UNKNOWN_MASKS),
                },
            }
        )
    outputs = {}
    for i in range(draw(st.integers(0, 3))):
        flag = draw(st.sampled_from(["sensitive", "before_sensitive", "after_sensitive"]))
        outputs[f"secret_{i}"] = {
            "actions": ["update"],
            "before": draw(SECRET_TREES),
            "after": draw(SECRET_TREES),
            flag: True,
        }
        outputs[f"plain_{i}"] = {
            "actions": ["create"],
            "before": None,
            "after": draw(PUBLIC),
            "before_sensitive": False,
            "after_sensitive": False,
        }
    return {
        "resource_changes": changes,
        "output_changes": outputs,
        "variables": {"v": {"value": draw(SECRETS)}},
        "prior_state": {"values": draw(SECRET_TREES)},
        "configuration": {"x": draw(SECRETS)},
        "planned_values": {"x": draw(SECRETS)},
    }


@settings(max_examples=200, deadline=None)
@given(plan=plans())
def test_sanitizing_never_leaks_a_value_marked_sensitive(plan: dict[str, Any]) -> None:
    # Given any plan whose secrets sit only at positions marked sensitive (or under a
    # malformed sensitivity structure, or in parts that are never copied)
    # When it is sanitized
    sanitized = sanitize_plan(plan, **META)
    # Then no secret appears anywhere in the derivative
    assert "SECRET-" not in json.dumps(sanitized)
    # And the derivative is canonical-JSON encodable and deterministic
    assert canonical_json(sanitized) == canonical_json(sanitize_plan(plan, **META))
