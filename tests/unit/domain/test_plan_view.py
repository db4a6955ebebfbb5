"""The plan view: resource changes grouped by action with their attribute diffs, outputs,
drift and counts, built from a hostile plan document; it never shows a sensitive value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.domain.plan_view import (
    MAX_DRIFT,
    MAX_ROWS,
    MAX_TEXT,
    Action,
    AttributeRow,
    PlanUnreadable,
    PlanView,
    Shown,
    ValueKind,
    build_view,
    parse,
)
from tests.unit.real_plans import Engine

SECRET = "hunter2-Zq9-SECRET"


def resource(
    address: str,
    actions: list[str],
    before: Any = None,
    after: Any = None,
    *,
    before_sensitive: Any = False,
    after_sensitive: Any = False,
    after_unknown: Any = False,
    **extra: Any,
) -> dict[str, Any]:
    kind, _, name = address.partition(".")
    return {
        "address": address,
        "mode": "managed",
        "type": kind,
        "name": name,
        "provider_name": "registry.terraform.io/hashicorp/aws",
        "change": {
            "actions": actions,
            "before": before,
            "after": after,
            "after_unknown": after_unknown,
            "before_sensitive": before_sensitive,
            "after_sensitive": after_sensitive,
        },
        **extra,
    }


def plan(*changes: dict[str, Any], **parts: Any) -> dict[str, Any]:
    return {"format_version": "0.2", "resource_changes": list(changes), **parts}


def rows(view: PlanView, address: str) -> dict[str, tuple[str | None, str | None]]:
    """The attribute rows of ``address`` as path: (before text, after text)."""
    found = [c for g in view.groups for c in g.changes if c.address == address]
    found += [c for c in view.drift if c.address == address]
    assert len(found) == 1, address
    return {row.path: (_text(row.before), _text(row.after)) for row in found[0].diff.rows}


def _text(shown: Shown | None) -> str | None:
    return None if shown is None else shown.text


def everything(view: PlanView) -> str:
    """The whole view, every field, as text: what a secret must never be found in."""
    return json.dumps(view.to_body()) + repr(view)


# -- grouping and counts -------------------------------------------------------------------


def test_changes_are_grouped_by_action_in_review_order_and_no_ops_are_only_counted() -> None:
    # Given a plan with every action, replacements in both orders, and no-ops
    document = plan(
        resource("aws_s3_bucket.gone", ["delete"], before={"bucket": "a"}),
        resource("aws_instance.read", ["read"], after={"id": "i-1"}),
        resource("aws_instance.new", ["create"], after={"ami": "ami-1"}),
        resource("aws_instance.same", ["no-op"], before={"a": 1}, after={"a": 1}),
        resource("aws_instance.swap1", ["delete", "create"], before={"a": 1}, after={"a": 2}),
        resource("aws_instance.swap2", ["create", "delete"], before={"a": 1}, after={"a": 2}),
        resource("aws_instance.edit", ["update"], before={"a": 1}, after={"a": 2}),
        resource("aws_instance.odd", ["forget"], before={"a": 1}),
    )

    # When the view is built
    view = build_view(document)

    # Then the groups follow create, update, replace, destroy, read, then anything else
    assert [(g.action, [c.address for c in g.changes]) for g in view.groups] == [
        (Action.CREATE, ["aws_instance.new"]),
        (Action.UPDATE, ["aws_instance.edit"]),
        (Action.REPLACE, ["aws_instance.swap1", "aws_instance.swap2"]),
        (Action.DESTROY, ["aws_s3_bucket.gone"]),
        (Action.READ, ["aws_instance.read"]),
        (Action.OTHER, ["aws_instance.odd"]),
    ]
    # And each action is counted, the no-op too, though it is not listed
    assert view.counts[Action.REPLACE] == 2
    assert view.counts[Action.NO_OP] == 1
    assert view.listed == 7
    assert view.count_items()[-1] == (Action.NO_OP, 1)
    # And each action has a symbol besides its colour
    assert [a.symbol for a in (Action.CREATE, Action.UPDATE, Action.REPLACE)] == ["+", "~", "-/+"]
    assert [a.symbol for a in (Action.DESTROY, Action.READ)] == ["-", "<="]


def test_an_update_shows_only_what_changes_as_flattened_paths() -> None:
    # Given an update of a nested tag and of one rule's port, and an attribute unknown
    before = {
        "tags": {"Name": "web", "Team": "infra"},
        "ingress": [{"from_port": 80, "to_port": 80}],
        "arn": "arn:1",
        "note": None,
    }
    after = {
        "tags": {"Name": "web-2", "Team": "infra", "a b": "x"},
        "ingress": [{"from_port": 443, "to_port": 80}],
        "note": None,
    }
    document = plan(
        resource(
            "aws_instance.web",
            ["update"],
            before,
            after,
            before_sensitive={},
            after_sensitive={},
            after_unknown={"arn": True},
            action_reason="replace_because_cannot_update",
        )
    )

    # When the view is built
    view = build_view(document)

    # Then only the changed attributes are rows, each with before and after
    assert rows(view, "aws_instance.web") == {
        "arn": ('"arn:1"', "known after apply"),
        "ingress[0].from_port": ("80", "443"),
        'tags["a b"]': (None, '"x"'),
        "tags.Name": ('"web"', '"web-2"'),
    }
    change = view.groups[0].changes[0]
    assert (change.type, change.provider) == ("aws_instance", "registry.terraform.io/hashicorp/aws")
    assert change.reason == "cannot be updated in place"


def test_a_create_shows_its_after_values_and_a_destroy_its_before_values() -> None:
    # Given a create with an unknown id and a null, and a destroy
    document = plan(
        resource(
            "aws_instance.new",
            ["create"],
            after={"ami": "ami-1", "tags": {}, "user_data": None},
            after_sensitive={},
            after_unknown={"id": True},
        ),
        resource("aws_instance.old", ["delete"], before={"ami": "ami-0"}, before_sensitive={}),
    )

    # When the view is built
    view = build_view(document)

    # Then the create lists what will be (nulls left out), the destroy what was
    assert rows(view, "aws_instance.new") == {
        "ami": (None, '"ami-1"'),
        "id": (None, "known after apply"),
        "tags": (None, "{}"),
    }
    assert rows(view, "aws_instance.old") == {"ami": ('"ami-0"', None)}


def test_a_value_unknown_where_a_list_was_is_known_after_apply_item_by_item() -> None:
    document = plan(
        resource(
            "aws_instance.web",
            ["update"],
            before={"ips": ["10.0.0.1", "10.0.0.2"]},
            after={},
            before_sensitive={},
            after_sensitive={},
            after_unknown={"ips": True},
        )
    )

    assert rows(build_view(document), "aws_instance.web") == {
        "ips[0]": ('"10.0.0.1"', "known after apply"),
        "ips[1]": ('"10.0.0.2"', "known after apply"),
    }


def test_the_attributes_that_force_a_replacement_are_marked() -> None:
    # Given a replacement the engine says its ami forces
    replaced = resource(
        "aws_instance.web",
        ["delete", "create"],
        before={"ami": "a", "size": 1},
        after={"ami": "b", "size": 2},
        before_sensitive={},
        after_sensitive={},
    )
    replaced["change"]["replace_paths"] = [["ami"]]

    # When the view is built
    change = build_view(plan(replaced)).groups[0].changes[0]

    # Then that row says so
    assert {row.path: row.forces_replacement for row in change.diff.rows} == {
        "ami": True,
        "size": False,
    }


# -- sensitive values ------------------------------------------------------------------------


def test_a_sensitive_value_reads_sensitive_and_shows_a_change_only_when_it_changed() -> None:
    # Given two updates of a sensitive password: one changes it, the other keeps it
    def update(address: str, new: str) -> dict[str, Any]:
        return resource(
            address,
            ["update"],
            before={"password": SECRET, "size": 1},
            after={"password": new, "size": 2},
            before_sensitive={"password": True},
            after_sensitive={"password": True},
        )

    document = plan(update("aws_db.changed", SECRET + "2"), update("aws_db.kept", SECRET))

    # When the view is built
    view = build_view(document)

    # Then a changed secret is a row that reads "(sensitive)" on both sides
    assert rows(view, "aws_db.changed") == {
        "password": ("(sensitive)", "(sensitive)"),
        "size": ("1", "2"),
    }
    # And an unchanged one is no row
    assert rows(view, "aws_db.kept") == {"size": ("1", "2")}
    # And the secret is nowhere
    assert SECRET not in everything(view)


NESTED = {"settings": {"db": {"password": SECRET}, "hosts": ["a", SECRET]}}


@pytest.mark.parametrize(
    ("after", "after_sensitive"),
    [
        ({"settings": {"db": {"password": SECRET}}}, {"settings": {"db": {"password": True}}}),
        ({"settings": {"hosts": ["a", SECRET]}}, {"settings": {"hosts": [False, True]}}),
        (NESTED, {"settings": True}),  # a whole subtree
        (NESTED, "yes"),  # malformed: not a bool, map or list
        (NESTED, {"settings": {"hosts": [True]}}),  # malformed: does not mirror the list
        (NESTED, {"settings": [True]}),  # malformed: a list for a map
    ],
)
def test_a_secret_is_never_in_the_view_whatever_its_sensitivity_structure(
    after: Any, after_sensitive: Any
) -> None:
    # Given a create whose secret sits in a nested map or a list, with a structure that
    # marks it, or one that is malformed (so everything is hidden)
    document = plan(
        resource("aws_db.main", ["create"], after=after, after_sensitive=after_sensitive)
    )

    # When the view is built
    view = build_view(document)

    # Then the secret is nowhere in it, and its place reads "(sensitive)"
    assert SECRET not in everything(view)
    assert "(sensitive)" in everything(view)


def test_a_value_without_its_sensitivity_structure_is_hidden_whole() -> None:
    # Given a destroy and an update whose engine structures are missing
    gone = resource("aws_db.gone", ["delete"], before={"password": SECRET})
    del gone["change"]["before_sensitive"]
    edit = resource("aws_db.edit", ["update"], before={"p": SECRET}, after={"p": SECRET + "!"})
    del edit["change"]["before_sensitive"], edit["change"]["after_sensitive"]

    # When the view is built
    view = build_view(plan(gone, edit))

    # Then each side is hidden whole
    assert rows(view, "aws_db.gone") == {"": ("(sensitive)", None)}
    assert rows(view, "aws_db.edit") == {"": ("(sensitive)", "(sensitive)")}
    assert SECRET not in everything(view)


def test_a_sensitive_output_hides_both_sides_and_others_show_their_values() -> None:
    # Given a sensitive output (only its after marked), a map output and a no-op output
    outputs = {
        "password": {
            "actions": ["update"],
            "before": SECRET,
            "after": SECRET + "2",
            "after_unknown": False,
            "before_sensitive": False,
            "after_sensitive": True,
        },
        "flagged": {"actions": ["create"], "after": SECRET, "sensitive": True},
        "endpoints": {
            "actions": ["create"],
            "after": {"web": "https://a"},
            "after_unknown": False,
            "before_sensitive": False,
            "after_sensitive": False,
        },
        "bare": {"actions": ["create"], "after": SECRET},  # no structures: hidden
        "same": {"actions": ["no-op"], "before": 1, "after": 1},
    }

    # When the view is built
    view = build_view(plan(output_changes=outputs))

    # Then the changed outputs are listed by name, a sensitive one hidden on both sides
    shown = {o.name: (o.sensitive, o.diff.rows) for o in view.outputs}
    assert list(shown) == ["bare", "endpoints", "flagged", "password"]
    assert shown["password"] == (
        True,
        (
            AttributeRow(
                "password",
                Shown("(sensitive)", ValueKind.SENSITIVE),
                Shown("(sensitive)", ValueKind.SENSITIVE),
            ),
        ),
    )
    assert [(r.path, _text(r.after)) for r in shown["endpoints"][1]] == [
        ("endpoints.web", '"https://a"')
    ]
    assert view.unchanged_outputs == 1
    assert SECRET not in everything(view)


def test_drift_is_shown_like_changes_and_never_shows_a_secret() -> None:
    # Given a plan whose refresh found a changed tag and a changed secret
    drift = resource(
        "aws_db.main",
        ["update"],
        before={"password": SECRET, "tags": {"env": "prod"}},
        after={"password": SECRET + "x", "tags": {"env": "dev"}},
        before_sensitive={"password": True},
        after_sensitive={"password": True},
    )

    # When the view is built
    view = build_view(plan(resource_drift=[drift, resource("a.b", ["no-op"])]))

    # Then the drift is listed with its diff, no-ops left out
    assert view.drift_total == 1
    assert rows(view, "aws_db.main") == {
        "password": ("(sensitive)", "(sensitive)"),
        "tags.env": ('"prod"', '"dev"'),
    }
    assert SECRET not in everything(view)


@settings(max_examples=150, deadline=None)
@given(
    shape=st.recursive(
        st.just("SECRET"),
        lambda inner: (
            st.lists(inner, min_size=1, max_size=3)
            | st.dictionaries(st.text("abc", min_size=1, max_size=3), inner, min_size=1, max_size=3)
        ),
        max_leaves=8,
    ),
    side=st.sampled_from(["before", "after", "both"]),
    action=st.sampled_from([["create"], ["update"], ["delete"], ["delete", "create"], ["read"]]),
)
def test_a_secret_marked_anywhere_never_reaches_the_view(
    shape: Any, side: str, action: list[str]
) -> None:
    # Given a value of any shape whose every leaf is the secret, marked sensitive there
    def value(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: value(v) for k, v in node.items()}
        if isinstance(node, list):
            return [value(v) for v in node]
        return SECRET

    def marks(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: marks(v) for k, v in node.items()}
        if isinstance(node, list):
            return [marks(v) for v in node]
        return True

    sides = {"before": ("before",), "after": ("after",), "both": ("before", "after")}[side]
    change = resource(
        "x.y",
        action,
        before={"v": value(shape)} if "before" in sides else {"v": "plain"},
        after={"v": value(shape)} if "after" in sides else {"v": "other"},
        before_sensitive={"v": marks(shape)} if "before" in sides else {},
        after_sensitive={"v": marks(shape)} if "after" in sides else {},
    )

    # When the view is built, as a change, as drift and as an output
    output = {"actions": action, **{k: change["change"][k] for k in ("before", "after")}}
    output |= {"before_sensitive": "before" in sides, "after_sensitive": "after" in sides}
    view = build_view(plan(change, resource_drift=[change], output_changes={"o": output}))

    # Then the secret is nowhere in it
    assert SECRET not in everything(view)


def test_a_secret_in_a_real_engine_plan_never_reaches_the_view(tmp_path: Path) -> None:
    # Given a real plan whose resource and output take a sensitive variable
    real = Engine(tmp_path).plan(
        {
            "main.tf": f"""
variable "password" {{
  type      = string
  sensitive = true
  default   = "{SECRET}"
}}
resource "test_thing" "db" {{
  name    = "db"
  content = var.password
}}
output "password" {{
  value     = var.password
  sensitive = true
}}
output "id" {{ value = test_thing.db.id }}
"""
        }
    )
    assert SECRET in json.dumps(real.document)  # the engine's document holds it

    # When the view is built from the engine's document
    view = build_view(parse(json.dumps(real.document).encode()))

    # Then the resource and its diff are shown, and the secret is not
    assert rows(view, "test_thing.db") == {
        "content": (None, "(sensitive)"),
        "id": (None, "known after apply"),
        "name": (None, '"db"'),
        "revision": (None, "known after apply"),
    }
    assert [(o.name, o.sensitive) for o in view.outputs] == [("id", False), ("password", True)]
    assert SECRET not in everything(view)


# -- bounds and hostile documents -------------------------------------------------------------


def test_a_large_plan_is_paged_and_a_page_past_the_last_is_the_last() -> None:
    # Given 250 creates and 10 destroys
    document = plan(
        *[resource(f"a.c{n}", ["create"], after={"n": n}, after_sensitive={}) for n in range(250)],
        *[resource(f"a.d{n}", ["delete"], before={"n": n}, before_sensitive={}) for n in range(10)],
    )

    # When its pages are built
    first, last, beyond = (build_view(document, page) for page in (1, 3, 9))

    # Then each page holds 100 changes, in group order, and every count is the plan's
    assert (first.pages, first.listed) == (3, 260)
    assert [c.address for g in first.groups for c in g.changes][:2] == ["a.c0", "a.c1"]
    assert sum(len(g.changes) for g in first.groups) == 100
    assert [(g.action, g.total, len(g.changes)) for g in last.groups] == [
        (Action.CREATE, 250, 50),
        (Action.DESTROY, 10, 10),
    ]
    assert beyond.page == 3
    assert first.counts[Action.DESTROY] == 10


def test_a_resource_with_many_attributes_shows_the_first_rows_and_counts_the_rest() -> None:
    after = {f"k{n:03}": n for n in range(MAX_ROWS + 25)}
    document = plan(resource("a.b", ["create"], after=after, after_sensitive={}))

    diff = build_view(document).groups[0].changes[0].diff

    assert (len(diff.rows), diff.more, diff.more_is_lower_bound) == (MAX_ROWS, 25, False)


def test_a_long_value_is_cut_and_drift_is_capped() -> None:
    long_value = "x" * (MAX_TEXT * 10)
    drift = [
        resource(f"a.d{n}", ["update"], {"v": 1}, {"v": 2}, before_sensitive={}, after_sensitive={})
        for n in range(MAX_DRIFT + 5)
    ]
    document = plan(
        resource("a.b", ["create"], after={"v": long_value}, after_sensitive={}),
        resource_drift=drift,
    )

    view = build_view(document)

    text = rows(view, "a.b")["v"][1]
    assert text == '"' + "x" * (MAX_TEXT - 1) + "… (cut)"
    assert (len(view.drift), view.drift_total, view.drift_more) == (MAX_DRIFT, MAX_DRIFT + 5, 5)


@pytest.mark.parametrize(
    "document",
    [
        b"not json",
        b"[1, 2]",
        b'{"resource_changes": [NaN]}',
        b'{"a": Infinity}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"n": ' + b"9" * 10_000 + b"}",
        b"\xff\xfe",
    ],
)
def test_a_document_that_is_not_a_plan_is_refused(document: bytes) -> None:
    with pytest.raises(PlanUnreadable):
        parse(document)


def test_any_shape_of_document_gives_a_view_without_failing() -> None:
    # Given documents of the wrong shapes in every place
    documents: list[dict[str, Any]] = [
        {},
        {"resource_changes": "all", "output_changes": [], "resource_drift": {}},
        {"resource_changes": [1, None, "x", {"change": "create"}, {"change": {"actions": 7}}]},
        {"resource_changes": [{"address": 5, "change": {"actions": ["create"], "after": [1]}}]},
        {"output_changes": {"o": "x", "p": {"actions": ["create"], "after": {"k": [1]}}}},
    ]

    # When views are built, then none fails, and unknown shapes are listed, not hidden
    views = [build_view(document) for document in documents]
    assert views[2].counts[Action.OTHER] == 2
    assert views[3].groups[0].changes[0].address == "(no address)"


def test_a_value_nested_deeper_than_the_walk_allows_is_hidden_whole() -> None:
    # Given a value nested 300 deep, with a mirroring structure
    value: Any = SECRET
    marks: Any = False
    for _ in range(300):
        value, marks = {"k": value}, {"k": marks}
    document = plan(resource("a.b", ["create"], after=value, after_sensitive=marks))

    # When the view is built from its JSON
    view = build_view(parse(json.dumps(document).encode()))

    # Then it is one hidden row
    assert rows(view, "a.b") == {"": (None, "(sensitive)")}
