"""`runplane policy test DIR --unit` runs like `opa test DIR`: test files of both
namings, test rules wherever they are, the directory's JSON and YAML files as ``data``
placed by their directory, ``with`` overrides, failures named by file and rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runplane.adapters.rego_unit import load_unit_data
from runplane.cli import main
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicySetContent,
    check_policy_set,
    is_test_module,
    load_policy_set_dir,
)
from runplane.domain.policy_unit_tests import discover, merge_data, read_test_modules


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


# -- data, as opa test places it --------------------------------------------------------------


def test_data_files_are_placed_by_their_directory_and_merged(tmp_path: Path) -> None:
    # Given mocks at the top (merged at data), in a subdirectory (at data.<dir>) and YAML
    root = _write(
        tmp_path,
        {
            "a_mock.json": json.dumps({"mock": {"valid": {"n": 1}}}),
            "b_mock.json": json.dumps({"mock": {"invalid": {"n": 2}}}),
            "lib/allowed.yaml": "regions:\n  - eu-west-1\n",
            "lib/deep/more.yml": "flag: yes\n",
            "policy-set.json": json.dumps({"name": "s", "policies": []}),
            ".hidden/x.json": json.dumps({"secret": 1}),
        },
    )
    # When the directory's data is read
    data = load_unit_data(root)
    # Then each file is where opa test puts it, and nothing else is read
    assert data == {
        "mock": {"valid": {"n": 1}, "invalid": {"n": 2}},
        "lib": {"regions": ["eu-west-1"], "deep": {"flag": True}},
    }


@pytest.mark.parametrize(
    ("documents", "phrase"),
    [
        (
            [("a.json", (), {"x": 1}), ("b.json", (), {"x": 2})],
            "data file b.json sets data.x, which a.json sets too",
        ),
        (
            [("d/a.json", ("d",), [1]), ("d/b.json", ("d",), {"k": 1})],
            "data file d/b.json sets data.d, which d/a.json sets too",
        ),
        ([("top.json", (), [1, 2])], "data file top.json holds no object"),
    ],
)
def test_conflicting_data_is_refused_naming_both_files(
    documents: list[tuple[str, tuple[str, ...], object]], phrase: str
) -> None:
    with pytest.raises(InvalidPolicySet, match=phrase.replace(".", r"\.")):
        merge_data(documents)


def test_objects_merge_and_a_value_set_twice_conflicts_even_if_equal() -> None:
    # As OPA's loader: objects merge key by key; any other value twice is a conflict
    assert merge_data(
        [("a.json", ("x",), {"k": {"a": 1}}), ("b.json", ("x",), {"k": {"b": 2}})]
    ) == {"x": {"k": {"a": 1, "b": 2}}}
    with pytest.raises(InvalidPolicySet, match=r"b\.json sets data\.x\.k, which a\.json sets too"):
        merge_data([("a.json", ("x",), {"k": 1}), ("b.json", ("x",), {"k": 1})])


def test_a_data_file_that_does_not_parse_is_named(tmp_path: Path) -> None:
    _write(tmp_path, {"sub/bad.yaml": "a: [1\n"})
    with pytest.raises(InvalidPolicySet, match=r"data file sub/bad\.yaml is not valid YAML"):
        load_unit_data(tmp_path)


# -- which tests run ------------------------------------------------------------------------


def test_both_test_file_namings_are_tests_and_never_published(tmp_path: Path) -> None:
    assert is_test_module("a_test.rego")
    assert is_test_module("a.test.rego")
    assert not is_test_module("atest.rego")
    root = _write(
        tmp_path,
        {
            "policy-set.json": json.dumps(
                {
                    "name": "s",
                    "policies": [{"name": "d", "enforcement": "advisory", "query": "data.a.deny"}],
                }
            ),
            "a.rego": "package a\n\nimport rego.v1\n\ndeny contains 1 if false\n",
            "a_test.rego": "package a\n\ntest_one {\n\ttrue\n}\n",
            "b.test.rego": "package a\n\ntest_two {\n\ttrue\n}\n",
        },
    )
    assert [m.name for m in load_policy_set_dir(root).modules] == ["a.rego"]
    assert [m.name for m in read_test_modules(root)] == ["a_test.rego", "b.test.rego"]


def test_test_rules_are_found_in_every_module() -> None:
    modules = [
        PolicyModule("a.rego", "package a\n\ntest_in_the_policy {\n\ttrue\n}\n"),
        PolicyModule("t.test.rego", "package a.t\n\ntest_in_a_test_file {\n\ttrue\n}\n"),
    ]
    assert [t.query for t in discover(modules)] == [
        "data.a.test_in_the_policy",
        "data.a.t.test_in_a_test_file",
    ]


# -- the command ------------------------------------------------------------------------------

_POLICY = """package terraform

deny[msg] {
	r := input.tfplan.resource_changes[_]
	r.change.actions[_] == "delete"
	msg := sprintf("%-12s would be deleted", [r.address])
}

limit := data.lib.limit
"""

_MOCKS = {
    "mock": {
        "valid": {
            "tfplan": {"resource_changes": [{"address": "a.b", "change": {"actions": ["create"]}}]}
        },
        "invalid": {
            "tfplan": {"resource_changes": [{"address": "a.c", "change": {"actions": ["delete"]}}]}
        },
    }
}

_TESTS = """package terraform

test_valid {
	result = deny with input as data.mock.valid
	count(result) == 0
}

test_invalid {
	result = deny with input as data.mock.invalid
	result == {"a.c          would be deleted"}
}

test_data_of_a_subdirectory {
	limit == 5
	limit == 9 with data.lib.limit as 9
}
"""


def _library(root: Path, tests: str = _TESTS) -> Path:
    # Laid out as a Scalr-style directory: a policy, its mocks, a .test.rego file
    return _write(
        root,
        {
            "delete.rego": _POLICY,
            "delete_mock.json": json.dumps(_MOCKS),
            "delete.test.rego": tests,
            "lib/limits.yaml": "limit: 5\n",
        },
    )


def test_cli_runs_the_tests_with_the_mocks_as_opa_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # regression: data.mock was never loaded and *.test.rego never found
    root = _library(tmp_path / "set")
    status = main(["policy", "test", str(root), "--unit"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "PASS  data.terraform.test_valid (delete.test.rego line 3)" in out
    assert "PASS  data.terraform.test_data_of_a_subdirectory (delete.test.rego line 13)" in out
    assert out.strip().endswith("PASS: 3/3")


def test_cli_a_failing_test_names_its_file_and_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _library(
        tmp_path / "set",
        _TESTS + "\ntest_wrong {\n\tcount(deny) == 1 with input as data.mock.valid\n}\n",
    )
    status = main(["policy", "test", str(root), "--unit", "--json"])
    results = json.loads(capsys.readouterr().out)["unit_tests"]
    assert status == 1
    assert results[-1] == {
        "test": "data.terraform.test_wrong",
        "module": "delete.test.rego",
        "line": 18,
        "outcome": "FAIL",
        "message": "the test is undefined, not true",
    }


def test_cli_conflicting_data_files_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _library(tmp_path / "set")
    _write(root, {"other_mock.json": json.dumps({"mock": {"valid": 1}})})
    status = main(["policy", "test", str(root), "--unit"])
    assert status == 2
    assert "data file other_mock.json sets data.mock.valid" in capsys.readouterr().err


# -- names ------------------------------------------------------------------------------------


def test_long_file_and_generated_policy_names_are_accepted() -> None:
    # regression: file names over 64 characters, and PACKAGE.RULE names over 64
    long_file = "aws-" + "x" * 200 + ".rego"
    package = "terraform.policies.azure.naming.cognitive_services_account_naming_convention"
    content = PolicySetContent(
        "s",
        (PolicyModule(f"policies/azure/{long_file}", f"package {package}\n\ndeny := []\n"),),
        (PolicyDefinition(f"{package}.deny_names", Enforcement.ADVISORY, f"data.{package}.deny"),),
    )
    check_policy_set(content)
    too_long = PolicySetContent(
        "s",
        (PolicyModule("x" * 251 + ".rego", "package a\n\ndeny := []\n"),),
        (PolicyDefinition("d", Enforcement.ADVISORY, "data.a.deny"),),
    )
    with pytest.raises(InvalidPolicySet, match="at most 255 letters"):
        check_policy_set(too_long)


@pytest.mark.parametrize(
    ("body", "phrase"),
    [
        (
            'http.send({"method": "GET", "url": "https://example.com"}).status_code == 200',
            "main.rego line 4 calls http.send, which is not allowed",
        ),
        (
            'sanitized("x") == "y"',
            "main.rego line 4 calls sanitized, a function the evaluator does not have",
        ),
    ],
)
def test_cli_what_stays_refused_is_refused_with_module_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, phrase: str
) -> None:
    # Given a Spacelift-style directory whose policy calls a live builtin or a function
    # only Spacelift has
    root = _write(
        tmp_path / "set",
        {
            "main.rego": f"package spacelift\n\ndeny[m] {{\n\t{body}\n\tm := 1\n}}\n",
            "main_test.rego": "package spacelift\n\ntest_x {\n\ttrue\n}\n",
        },
    )
    # Then the unit run is refused, naming the module and line
    assert main(["policy", "test", str(root), "--unit"]) == 2
    assert phrase in capsys.readouterr().err
