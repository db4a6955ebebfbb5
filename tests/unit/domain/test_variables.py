"""Run variable names follow the engine's rule for variable blocks."""

from __future__ import annotations

import pytest

from runplane.domain.errors import InvalidInput
from runplane.domain.variable_precedence import resolve
from runplane.domain.variables import (
    MAX_DESCRIPTION,
    MAX_VARIABLES,
    PinnedVariables,
    VariableSource,
    check_variables,
    check_workspace_variable,
    name_problem,
    pointer,
)


@pytest.mark.parametrize("name", ["region", "_private", "my-var", "a1", "A_B-c9", "countdown"])
def test_identifiers_the_engine_accepts_are_accepted(name: str) -> None:
    assert name_problem(name) is None
    check_variables({name: "value"})


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("1abc", "is not an identifier"),
        ("-lead", "is not an identifier"),
        ("", "is not an identifier"),
        ("with space", "is not an identifier"),
        ("a.b", "is not an identifier"),
        ("a/b", "is not an identifier"),
        ("é", "is not an identifier"),
        ("x\n", "is not an identifier"),
        ("count", "is reserved by the engine"),
        ("for_each", "is reserved by the engine"),
        ("source", "is reserved by the engine"),
        ("version", "is reserved by the engine"),
        ("providers", "is reserved by the engine"),
        ("lifecycle", "is reserved by the engine"),
        ("depends_on", "is reserved by the engine"),
        ("locals", "is reserved by the engine"),
        ("TF_STATE_PERSIST_INTERVAL", "is reserved by the platform"),
        ("tf_state_persist_interval", "is reserved by the platform"),
    ],
)
def test_names_the_engine_would_reject_are_refused_with_a_pointer(name: str, why: str) -> None:
    # Given a variable the engine would not take
    # When the variables are checked
    with pytest.raises(InvalidInput) as refused:
        check_variables({"fine": "1", name: "secret-value"})

    # Then the refusal says why, points at the variable, and never shows the value
    assert why in refused.value.message
    assert refused.value.pointer == pointer(name)
    assert "secret-value" not in refused.value.message
    assert refused.value.http_status == 422


def test_pointer_escapes_json_pointer_characters() -> None:
    assert pointer("a/b~c") == "/variables/a~1b~0c"


def test_values_must_be_strings_and_the_count_is_capped() -> None:
    with pytest.raises(InvalidInput, match="string value"):
        check_variables({"n": 1})
    with pytest.raises(InvalidInput, match=f"at most {MAX_VARIABLES}") as refused:
        check_variables({f"v{i}": "x" for i in range(MAX_VARIABLES + 1)})
    assert refused.value.pointer == "/variables"


@pytest.mark.parametrize("control", ["\x00", "\r", "\x1b", "\x7f", "\x85", "\x08"])
def test_values_with_control_characters_other_than_tab_and_newline_are_refused(
    control: str,
) -> None:
    # Given a value with a control character a Terraform string variable has no use for
    value = f"secret{control}value"

    # When it is a run variable or a workspace variable, it is refused with a pointer to it
    with pytest.raises(InvalidInput) as run_refused:
        check_variables({"fine": "1", "token": value})
    with pytest.raises(InvalidInput) as workspace_refused:
        check_workspace_variable("token", value, None)

    # Then the refusal names the character, never the value
    assert run_refused.value.pointer == pointer("token")
    assert workspace_refused.value.pointer == "/value"
    for refused in (run_refused, workspace_refused):
        assert f"U+{ord(control):04X}" in refused.value.message
        assert "secret" not in refused.value.message
        assert refused.value.http_status == 422


def test_tab_newline_and_other_text_are_allowed_in_values() -> None:
    value = "line one\n\tindented line two\nélan ✓ \u200b"
    check_variables({"multi": value})
    assert check_workspace_variable("multi", value, None) == len(value.encode())


def test_the_runs_own_variables_win_over_the_workspaces_and_each_names_its_source() -> None:
    # Given workspace variables and a run's own, sharing one name
    workspace = PinnedVariables({"region": "eu-west-1", "token": "t"})
    own = {"region": "us-east-2", "extra": "x"}
    # When they are resolved
    resolved = resolve(own, workspace)
    # Then the run's value wins, and only the workspace's unshadowed names are its
    assert resolved.terraform == {"region": "us-east-2", "token": "t", "extra": "x"}
    assert {v.name: v.source for v in resolved.variables} == {
        "region": VariableSource.RUN,
        "token": VariableSource.WORKSPACE,
        "extra": VariableSource.RUN,
    }
    assert resolved.workspace_names == ["token"]
    # And the resolution shows no value in its repr
    assert "eu-west-1" not in repr(resolved)
    assert "us-east-2" not in repr(resolved)


def test_a_workspace_variables_sensitivity_survives_a_run_value_of_the_same_name() -> None:
    # Given workspace variables, two of them sensitive, and a run's own
    values = {"region": "eu-west-1", "token": "t", "password": "p"}
    own = {"password": "run-value", "extra": "x"}

    # When they are resolved
    resolved = resolve(own, PinnedVariables(values, frozenset({"token", "password"})))

    # Then both stay sensitive, the one the run overrides too, and no run variable else is
    assert resolved.sensitive_names == ["password", "token"]
    assert resolved.workspace_names == ["region", "token"]
    # And without sensitive names, nothing is sensitive
    assert resolve(own, PinnedVariables(values)).sensitive_names == []


def test_a_sensitive_name_without_a_value_is_not_sensitive() -> None:
    # (a name is only sensitive in a run where it has a value)
    pinned = PinnedVariables({"a": "1"}, frozenset({"a", "gone"}))
    assert resolve({}, pinned).sensitive_names == ["a"]


def test_pinned_variables_show_no_value_in_their_repr() -> None:
    pinned = PinnedVariables({"token": "s3cr3t"}, frozenset({"token"}))
    assert "s3cr3t" not in repr(pinned)
    assert repr(pinned) == "PinnedVariables(['token'], sensitive=['token'])"


def test_a_workspace_variable_is_checked_like_a_run_variable_with_field_pointers() -> None:
    assert check_workspace_variable("region", "eu-west-1", None) == len("eu-west-1")
    with pytest.raises(InvalidInput) as bad_name:
        check_workspace_variable("for_each", "x", None)
    assert bad_name.value.pointer == "/name"
    with pytest.raises(InvalidInput) as long_description:
        check_workspace_variable("region", "x", "d" * (MAX_DESCRIPTION + 1))
    assert long_description.value.pointer == "/description"
