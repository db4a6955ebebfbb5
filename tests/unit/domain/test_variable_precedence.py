"""A new run's variables resolved from its sources: run > workspace > variable sets
(applied by name before global, then by set name), per category and name; and the
variables artifact's two shapes."""

from __future__ import annotations

import json

import pytest

from runplane.domain.errors import InvalidInput, VariablesTooLarge
from runplane.domain.variable_precedence import (
    MAX_ENV_BYTES,
    MAX_ENV_VARIABLES,
    PinnedSet,
    Resolved,
    check_resolved,
    read_document,
    resolve,
    set_order,
)
from runplane.domain.variables import PinnedVariables, VariableCategory

TF, ENV = VariableCategory.TERRAFORM, VariableCategory.ENV


def a_set(
    name: str,
    *,
    specific: bool = True,
    values: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    sensitive_env: frozenset[str] = frozenset(),
    sensitive: frozenset[str] = frozenset(),
) -> PinnedSet:
    return PinnedSet(
        f"varset-{name}",
        name,
        specific,
        PinnedVariables(values or {}, sensitive, env=env or {}, sensitive_env=sensitive_env),
    )


def sources(resolved: Resolved) -> dict[tuple[str, str], tuple[str, str, str | None]]:
    return {
        (v.category.value, v.name): (v.value, v.source.value, v.variable_set_name)
        for v in resolved.variables
    }


def test_run_beats_workspace_beats_set_for_each_category_and_name() -> None:
    # Given a set, the workspace and the run each defining region, and the set and the
    # workspace the environment variable AWS_REGION
    sets = [
        a_set(
            "prod",
            values={"region": "set", "owner": "set"},
            env={"AWS_REGION": "set", "ONLY_SET": "s"},
        )
    ]
    workspace = PinnedVariables(
        {"region": "workspace", "zone": "workspace"}, env={"AWS_REGION": "workspace"}
    )

    # When the run's variables are resolved
    resolved = resolve({"region": "run"}, workspace, sets)

    # Then each (category, name) takes the highest source defining it
    assert sources(resolved) == {
        ("terraform", "owner"): ("set", "variable_set", "prod"),
        ("terraform", "region"): ("run", "run", None),
        ("terraform", "zone"): ("workspace", "workspace", None),
        ("env", "AWS_REGION"): ("workspace", "workspace", None),
        ("env", "ONLY_SET"): ("s", "variable_set", "prod"),
    }
    # And Terraform variables come first, each category by name
    assert [(v.category, v.name) for v in resolved.variables] == [
        (TF, "owner"),
        (TF, "region"),
        (TF, "zone"),
        (ENV, "AWS_REGION"),
        (ENV, "ONLY_SET"),
    ]
    assert resolved.terraform == {"owner": "set", "region": "run", "zone": "workspace"}
    assert resolved.env == {"AWS_REGION": "workspace", "ONLY_SET": "s"}
    assert resolved.workspace_names == ["zone"]


def test_the_same_name_in_two_categories_is_two_variables() -> None:
    resolved = resolve({}, PinnedVariables({"region": "tf"}, env={"region": "env"}), [])
    assert resolved.terraform == {"region": "tf"}
    assert resolved.env == {"region": "env"}


def test_a_set_applied_by_name_beats_a_global_one_and_then_the_first_name_wins() -> None:
    # Given two global sets and two applied by name, all defining TOKEN
    sets = [
        a_set("aaa-global", specific=False, env={"TOKEN": "aaa-global", "G": "1"}),
        a_set("zzz-named", env={"TOKEN": "zzz-named"}),
        a_set("bbb-named", env={"TOKEN": "bbb-named"}),
        a_set("abc-global", specific=False, env={"G": "2"}),
    ]
    # Then the order is by name among sets applied by name, then among global ones
    assert [s.name for s in set_order(sets)] == [
        "bbb-named",
        "zzz-named",
        "aaa-global",
        "abc-global",
    ]
    # And the first applied by name wins over every global one, whatever their names
    resolved = resolve({}, PinnedVariables({}), sets)
    assert sources(resolved)[("env", "TOKEN")] == ("bbb-named", "variable_set", "bbb-named")
    assert sources(resolved)[("env", "G")] == ("1", "variable_set", "aaa-global")
    # And the order the sets are given in does not matter
    assert resolve({}, PinnedVariables({}), list(reversed(sets))) == resolved


def test_a_variable_is_sensitive_if_any_source_defining_it_marks_it_so() -> None:
    # Given a sensitive set variable overridden by a plain workspace one, and a sensitive
    # workspace variable the run overrides
    sets = [a_set("prod", env={"TOKEN": "s"}, sensitive_env=frozenset({"TOKEN"}))]
    workspace = PinnedVariables({"password": "w"}, frozenset({"password"}), env={"TOKEN": "w"})
    resolved = resolve({"password": "r", "plain": "p"}, workspace, sets)
    marked = {(v.category.value, v.name): v.sensitive for v in resolved.variables}
    assert marked == {
        ("terraform", "password"): True,
        ("terraform", "plain"): False,
        ("env", "TOKEN"): True,
    }
    assert resolved.sensitive_names == ["password"]
    assert resolved.sensitive_env == ["TOKEN"]
    # And the review's entries carry names, categories, sources and flags, never a value
    entries = resolved.entries()
    assert entries[-1] == {
        "name": "TOKEN",
        "category": "env",
        "source": "workspace",
        "sensitive": True,
    }
    assert all("value" not in e for e in entries)
    assert "r-secret" not in repr(resolved.variables[0])


def test_a_run_with_terraform_variables_only_writes_the_document_it_always_wrote() -> None:
    resolved = resolve({"region": "eu"}, PinnedVariables({"token": "t"}))
    document = resolved.document()
    assert document is not None
    assert json.loads(document) == {"region": "eu", "token": "t"}
    # And the runner reads it back as Terraform variables
    read = read_document(json.loads(document))
    assert (read.terraform, read.env, read.sensitive_env) == (
        {"region": "eu", "token": "t"},
        {},
        frozenset(),
    )
    # And a run with no variable has no document
    assert resolve({}, PinnedVariables({})).document() is None


def test_a_run_with_env_variables_writes_sections_the_runner_reads_back() -> None:
    sets = [
        a_set(
            "creds",
            env={"AWS_SECRET_ACCESS_KEY": "k"},
            sensitive_env=frozenset({"AWS_SECRET_ACCESS_KEY"}),
        )
    ]
    resolved = resolve({"region": "eu"}, PinnedVariables({}, env={"TF_VAR_x": "1"}), sets)
    document = resolved.document()
    assert document is not None
    assert json.loads(document) == {
        "terraform": {"region": "eu"},
        "env": {"AWS_SECRET_ACCESS_KEY": "k", "TF_VAR_x": "1"},
        "sensitive_env": ["AWS_SECRET_ACCESS_KEY"],
    }
    read = read_document(json.loads(document))
    assert read.terraform == {"region": "eu"}
    assert read.env == {"AWS_SECRET_ACCESS_KEY": "k", "TF_VAR_x": "1"}
    assert read.sensitive_env == {"AWS_SECRET_ACCESS_KEY"}


@pytest.mark.parametrize(
    "document",
    [
        [],
        "x",
        {"terraform": {"a": 1}, "env": {}},
        {"terraform": {}, "env": {"PATH": "/evil"}},
        {"terraform": {}, "env": {"LD_PRELOAD": "/x.so"}},
        {"terraform": {}, "env": {"A-B": "x"}},
        {"terraform": {}, "env": {"A": "x\x00"}},
        {"terraform": {}, "env": {"A": "x"}, "sensitive_env": ["B"]},
        {"terraform": {}, "env": {"A": "x"}, "sensitive_env": "A"},
        {"terraform": {}, "env": {}, "later": {}},
        {"region": "eu", "nested": {"a": "b"}},
    ],
)
def test_the_runner_refuses_any_other_document(document: object) -> None:
    with pytest.raises(ValueError, match=r"run|environment variable") as refused:
        read_document(document)
    # (never quoting a value)
    assert "/evil" not in str(refused.value)
    assert "x.so" not in str(refused.value)


def test_a_runs_environment_is_bounded_in_count_and_bytes() -> None:
    many = PinnedVariables({}, env={f"V{n}": "" for n in range(MAX_ENV_VARIABLES)})
    check_resolved(resolve({}, many))
    more = PinnedVariables({}, env={f"V{n}": "" for n in range(MAX_ENV_VARIABLES + 1)})
    with pytest.raises(InvalidInput):
        check_resolved(resolve({}, more))
    half = "x" * (MAX_ENV_BYTES // 2)
    check_resolved(resolve({}, PinnedVariables({}, env={"A": half, "B": half})))
    with pytest.raises(VariablesTooLarge):
        check_resolved(resolve({}, PinnedVariables({}, env={"A": half, "B": half + "x"})))


def test_the_terraform_variables_keep_the_run_variables_bounds() -> None:
    sets = [a_set(f"s{n}", values={f"v{n}_{m}": "" for m in range(60)}) for n in range(2)]
    with pytest.raises(InvalidInput) as refused:
        check_resolved(resolve({}, PinnedVariables({}), sets))
    assert refused.value.pointer == "/variables"
