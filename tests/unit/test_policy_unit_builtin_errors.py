"""Builtin errors in policy unit tests: undefined as ``opa test`` makes them, unless strict;
the evaluation of a run stays strict (fail closed) whatever the unit tests did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runplane.adapters.rego import RegoEvaluator
from runplane.adapters.rego_source import builtin_at
from runplane.adapters.rego_unit import run_unit_tests
from runplane.cli import main
from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicyOutcome,
    PolicySetContent,
)
from runplane.domain.policy_unit_tests import UnitTestOutcome, discover

POLICY = (
    "package lib\n\nimport rego.v1\n\n"
    "size(x) := count(x)\n\n"
    "shout(s) := upper(s)\n\n"
    "number_or_text(s) := n if {\n\tn := to_number(s)\n} else := s\n\n"
    "deny contains rc.address if {\n\tsome rc in input.resource_changes\n"
    "\tsize(rc.change.actions) > 5\n}\n"
)
TESTS = (
    "package lib\n\nimport rego.v1\n\n"
    "test_no_size_for_nothing if {\n\tnot size(data.fixtures.nothing)\n}\n\n"
    'test_shouting_nothing if {\n\tshout(data.fixtures.nothing) == "A"\n}\n\n'
    'test_text_stays_text if {\n\tnumber_or_text(data.fixtures.word) == "x"\n}\n'
)
FIXTURES = {"fixtures": {"nothing": None, "word": "x"}}
MODULES = [PolicyModule("lib.rego", POLICY), PolicyModule("lib_test.rego", TESTS)]


def _outcomes(engine: str, *, strict: bool) -> list[tuple[str, UnitTestOutcome, str]]:
    results = run_unit_tests(
        MODULES,
        discover(MODULES),
        data=FIXTURES,
        engine=engine,
        strict_builtin_errors=strict,
    )
    return [(r.test.rule, r.outcome, r.message) for r in results]


def test_on_regopy_a_builtin_error_is_undefined_as_in_opa_test() -> None:
    # Given tests whose assertions call count(null), upper(null) and to_number("x")
    # When they run on regopy as opa test runs them (not strict, the default)
    outcomes = _outcomes("regopy", strict=False)
    # Then each call is undefined and the tests pass or fail on their assertions:
    # `not` of an undefined call holds, an undefined comparison fails, and the `else`
    # of a function whose body met the error gives its value
    assert [(rule, outcome) for rule, outcome, _ in outcomes] == [
        ("test_no_size_for_nothing", UnitTestOutcome.PASS),
        ("test_shouting_nothing", UnitTestOutcome.FAIL),
        ("test_text_stays_text", UnitTestOutcome.PASS),
    ]


def test_on_regopy_strict_builtin_errors_error_the_tests() -> None:
    # Given the same tests
    # When they run strict
    outcomes = _outcomes("regopy", strict=True)
    # Then every test meeting a builtin error errors
    assert [outcome for _, outcome, _ in outcomes] == [UnitTestOutcome.ERROR] * 3


def test_on_regorus_a_builtin_error_errors_the_test_naming_the_builtin_and_why() -> None:
    # Given the same tests, on regorus (whose binding has no non-strict setting)
    # When they run as opa test runs them
    outcomes = _outcomes("regorus", strict=False)
    # Then each errors, naming the builtin and that regorus cannot make it undefined
    assert [outcome for _, outcome, _ in outcomes] == [UnitTestOutcome.ERROR] * 3
    for (_, _, message), builtin in zip(outcomes, ("count", "upper", "to_number"), strict=True):
        assert f"a builtin error of `{builtin}`" in message
        assert "opa test makes the call undefined" in message
        assert "regorus 0.13.0 cannot" in message
    # And strict, the error is reported alone
    strict = _outcomes("regorus", strict=True)
    assert [outcome for _, outcome, _ in strict] == [UnitTestOutcome.ERROR] * 3
    assert all("opa test" not in message for _, _, message in strict)


def test_on_regorus_an_error_that_is_no_builtin_s_is_reported_alone() -> None:
    # Given a test calling a function of the set whose two definitions disagree
    modules = [
        PolicyModule(
            "a_test.rego",
            "package a\n\nimport rego.v1\n\nf(x) := 1\n\nf(x) := 2\n\n"
            "test_conflict if {\n\tf(1) == 1\n}\n",
        )
    ]
    # When it runs as opa test runs it
    (result,) = run_unit_tests(modules, discover(modules), engine="regorus")
    # Then it errors (OPA errors too) without a word about builtin errors
    assert result.outcome is UnitTestOutcome.ERROR
    assert "builtin" not in result.message


@pytest.mark.parametrize("engine", ["regorus", "regopy"])
def test_a_run_stays_strict_after_unit_tests_ran_non_strict(engine: str) -> None:
    # Given unit tests that ran with builtin errors undefined
    _outcomes(engine, strict=False)
    # And a policy that calls count(null) on the run's input
    content = PolicySetContent(
        name="s",
        modules=(
            PolicyModule(
                "p.rego",
                "package p\n\nimport rego.v1\n\ndeny contains m if {\n"
                '\tcount(input.nothing) > 0\n\tm := "never"\n}\n',
            ),
        ),
        policies=(PolicyDefinition("p", Enforcement.HARD_MANDATORY, "data.p.deny"),),
    )
    # When a run evaluates it
    [result] = RegoEvaluator(engine=engine).evaluate([content], {"nothing": None})
    # Then the builtin error errors the policy: it never passes
    assert result.outcome == PolicyOutcome.ERRORED
    assert result.messages[0].startswith("evaluation failed")


@pytest.mark.parametrize(
    ("line", "column", "found"),
    [
        (1, 12, "count"),  # an argument of the call
        (2, 26, "json.unmarshal"),  # the call's own parenthesis, nested in another
        (3, 8, "/"),  # an operator
        (4, 13, None),  # a function of the set
        (5, 32, "count"),  # past strings holding brackets, in an object
    ],
)
def test_builtin_at_names_the_call_an_error_points_into(
    line: int, column: int, found: str | None
) -> None:
    source = (
        "n := count(input.x)\n"
        'm := count(json.unmarshal("{"))\n'
        "z := x / y\n"
        "q := own(1, count)\n"
        'w := count({"(": 1, "]": input.s})\n'
    )
    builtins = {"count", "json.unmarshal"}
    assert builtin_at(source, line, column, builtins.__contains__) == found


def test_cli_unit_tests_run_as_opa_test_and_strict_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a policy set directory with the tests and their data, run on regopy
    monkeypatch.setenv("RUNPLANE_POLICY_ENGINE", "regopy")
    (tmp_path / "lib.rego").write_text(POLICY)
    (tmp_path / "lib_test.rego").write_text(TESTS)
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "values.json").write_text(json.dumps(FIXTURES["fixtures"]))
    # When its unit tests run
    status = main(["policy", "test", str(tmp_path), "--unit", "--json"])
    # Then builtin errors are undefined, and only the failing assertion fails
    outcomes = [t["outcome"] for t in json.loads(capsys.readouterr().out)["unit_tests"]]
    assert (status, outcomes) == (1, ["PASS", "FAIL", "PASS"])
    # And with --strict-builtin-errors, each errors
    status = main(["policy", "test", str(tmp_path), "--unit", "--strict-builtin-errors"])
    out = capsys.readouterr().out
    assert status == 1
    assert "ERROR: 3/3" in out
