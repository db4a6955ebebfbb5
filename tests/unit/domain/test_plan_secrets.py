"""A run's sensitive values are taken out of its plan before it is shown, whatever the
configuration did to unmark them: passed through ``nonsensitive()``, changed in case,
encoded, used as a ``for_each`` key, or long enough to be cut for display."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from runplane.domain.plan_secrets import Secrets, without_secrets
from runplane.domain.plan_view import Shown, ValueKind, build_view
from tests.unit.domain.test_plan_view import everything, plan, resource, rows

SECRET = "tok-7f3a9c0e5b"


def shown(document: dict[str, Any], *secrets: str) -> str:
    return everything(build_view(without_secrets(document, Secrets(secrets))))


@pytest.mark.parametrize(
    "spelled",
    [
        SECRET,
        SECRET.upper(),
        f"prefix/{SECRET}/suffix",
        base64.b64encode(SECRET.encode()).decode(),
        json.dumps({"token": SECRET}),
    ],
    ids=["as-is", "upper", "inside", "base64", "json-in-a-string"],
)
def test_an_unmarked_secret_in_any_spelling_is_shown_as_sensitive(spelled: str) -> None:
    # Given a plan whose configuration unmarked a sensitive variable (nonsensitive())
    document = plan(
        resource("test_thing.x", ["create"], after={"content": spelled, "name": "x"}),
        output_changes={"leak": {"actions": ["create"], "before": None, "after": spelled}},
    )

    # When it is shown with the run's sensitive values taken out
    text = shown(document, SECRET)
    view = build_view(without_secrets(document, Secrets([SECRET])))

    # Then the value reads sensitive, the rest of the change as it is, and the secret is
    # nowhere, in no spelling
    assert rows(view, "test_thing.x") == {
        "content": (None, "(sensitive)"),
        "name": (None, '"x"'),
    }
    [leak] = view.outputs
    assert leak.diff.rows[0].after == Shown("(sensitive)", ValueKind.SENSITIVE)
    for spelling in (SECRET, SECRET.upper(), base64.b64encode(SECRET.encode()).decode()):
        assert spelling not in text


def test_a_secret_in_a_name_or_key_is_cut_out_and_the_rest_kept() -> None:
    # Given a resource keyed by the secret (for_each) with a map keyed by it too
    address = f'test_thing.x["{SECRET}"]'
    document = plan(
        resource(address, ["create"], after={"tags": {SECRET: "v"}}, index=SECRET),
        resource_drift=[resource(address, ["update"], before={"a": 1}, after={"a": 2})],
    )

    # When it is shown
    view = build_view(without_secrets(document, Secrets([SECRET])))

    # Then the address and the key keep everything but the secret
    [change] = view.groups[0].changes
    assert change.address == 'test_thing.x["(sensitive)"]'
    assert [row.path for row in change.diff.rows] == ['tags["(sensitive)"]']
    assert view.drift[0].address == 'test_thing.x["(sensitive)"]'
    assert SECRET not in everything(view)


def test_a_long_value_is_hidden_before_it_is_cut_so_no_part_of_a_secret_shows() -> None:
    # Given a secret that straddles where a long value is cut for display
    long_secret = "S" * 30 + "-long-secret-value"
    value = "x" * 390 + long_secret
    document = plan(resource("test_thing.x", ["create"], after={"content": value}))

    # When it is shown
    text = shown(document, long_secret)

    # Then not even its first characters are
    assert "SSSSSSSSSS" not in text
    assert "(sensitive)" in text


def test_without_secrets_the_document_is_shown_as_it_is() -> None:
    # Given a plan and a run with no sensitive value
    document = plan(resource("test_thing.x", ["create"], after={"content": SECRET}))

    # Then nothing is taken out (the same document)
    assert without_secrets(document, Secrets([])) is document
    assert SECRET in shown(document)


def test_a_short_secret_hides_only_as_written() -> None:
    # Given a sensitive value as short as "abc" (its other spellings would hide too much)
    document = plan(resource("test_thing.x", ["create"], after={"a": "abc", "b": "ABC"}))

    # When it is shown
    view = build_view(without_secrets(document, Secrets(["abc"])))

    # Then the value as written is hidden, another case of it is not
    assert rows(view, "test_thing.x") == {"a": (None, "(sensitive)"), "b": (None, '"ABC"')}
