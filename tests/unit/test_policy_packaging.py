"""Policy sets packaged for other tools, the Rego v0 upgrade, and policy unit tests."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from runplane.adapters.rego import RegoEvaluator, validate_policy_set
from runplane.adapters.rego_unit import run_unit_tests
from runplane.cli import main
from runplane.domain import hcl
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicySetContent,
    load_policy_set_dir,
)
from runplane.domain.policy_files import read_modules
from runplane.domain.policy_input import PolicyInputs, RunMetadata, check_input_paths
from runplane.domain.policy_packaging import DECISIONS_MODULE
from runplane.domain.policy_unit_tests import UnitTestOutcome, discover
from runplane.domain.rego_v0 import compiled_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"

DELETE_PLAN = {
    "format_version": "0.2",
    "terraform_version": "1.0.3",
    "resource_changes": [
        {
            "address": "aws_s3_bucket.logs",
            "mode": "managed",
            "type": "aws_s3_bucket",
            "name": "logs",
            "provider_name": "registry.terraform.io/hashicorp/aws",
            "change": {
                "actions": ["delete"],
                "before": {"bucket": "logs"},
                "after": None,
                "after_unknown": {},
                "before_sensitive": {},
                "after_sensitive": False,
            },
        }
    ],
}

V0_DENY = """package rules

deny[msg] {
	rc := input.resource_changes[_]
	rc.change.actions[_] == "delete"
	msg := sprintf("%s would be deleted", [rc.address])
}
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _outcomes(root: Path, plan: Mapping[str, object]) -> dict[str, tuple[str, str, list[str]]]:
    """The set's results on ``plan``, in the input shape its packaging gives it, once
    publication's checks (including the input paths its modules read) accept it."""
    content = load_policy_set_dir(root)
    assert check_input_paths(content) == []
    evaluator = RegoEvaluator(isolation="thread")
    evaluator.validate(content)
    meta = RunMetadata(workspace="w", kind="plan_and_apply", engine_version="1.0.3")
    results = evaluator.evaluate([content], PolicyInputs(dict(plan), meta))
    return {r.policy: (str(r.enforcement), str(r.outcome), list(r.messages)) for r in results}


# -- the HCL subset ----------------------------------------------------------------------------


def test_hcl_reads_blocks_attributes_and_comments() -> None:
    # Given a configuration with each kind of comment, value and a labelled block
    text = (
        '# a comment\nversion = "v1"\n// another\npolicy "tags" {\n'
        "  enabled = true  # trailing\n  /* a\n  block comment */\n  weight = 2.5\n}\n"
    )
    # When it is parsed
    root = hcl.parse(text, "scalr-policy.hcl")
    # Then the attributes and the block are read with their values and lines
    assert root.attribute("version") == hcl.Attribute("version", "v1", 2)
    (block,) = root.blocks
    assert (block.type, block.labels, block.line) == ("policy", ("tags",), 4)
    assert [(a.name, a.value, a.line) for a in block.attributes] == [
        ("enabled", True, 5),
        ("weight", 2.5, 8),
    ]


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ('policy "a" {\n  query = ["x"]\n}\n', "f.hcl line 2: unexpected '['"),
        ('policy "a" {\n  query = "x"\n', "f.hcl line 1: this block is never closed"),
        ("x = 1\nx = 2\n", "f.hcl line 2: x is set twice (first on line 1)"),
        ('policy "a" {\n  q = "${var.x}"\n}\n', "f.hcl line 2: string interpolation"),
        ("policy\n", "f.hcl line 1: expected '=' or a block"),
        ("/* never closed\n", "f.hcl line 1: a /* comment is never closed"),
        ("a = b\n", "f.hcl line 1: unsupported value b"),
    ],
)
def test_hcl_outside_the_subset_is_refused_with_file_and_line(text: str, phrase: str) -> None:
    with pytest.raises(InvalidPolicySet, match=re.escape(phrase)):
        hcl.parse(text, "f.hcl")


# -- packaging conventions ---------------------------------------------------------------------


def test_policies_hcl_maps_hcp_levels_and_boolean_decisions(tmp_path: Path) -> None:
    # Given the HCP Terraform-style example (mandatory, soft-mandatory and advisory
    # policies, one of them a boolean allow decision)
    # When it is evaluated against a plan deleting a bucket
    outcomes = _outcomes(EXAMPLES / "hcp-style", DELETE_PLAN)
    # Then the levels map onto Runplane's, and the allow decision fails as not true
    assert outcomes == {
        "change-window": ("soft_mandatory", "failed", ["window.allow is not true"]),
        "no-public-buckets": ("hard_mandatory", "passed", []),
        "tag-hints": ("advisory", "passed", []),
    }
    content = load_policy_set_dir(EXAMPLES / "hcp-style")
    assert content.name == "hcp-style"
    assert DECISIONS_MODULE in [m.name for m in content.modules]


def test_a_boolean_decision_that_is_true_passes(tmp_path: Path) -> None:
    plan = {**DELETE_PLAN, "resource_changes": []}
    outcomes = _outcomes(EXAMPLES / "hcp-style", plan)
    assert outcomes["change-window"] == ("soft_mandatory", "passed", [])


def test_scalr_policy_hcl_reads_enabled_policies_from_their_modules() -> None:
    # Given the Scalr-style example (two enabled policies, one disabled)
    content = load_policy_set_dir(EXAMPLES / "scalr-style")
    # Then only the enabled ones are policies, each reading its module's deny rule
    assert [(p.name, p.enforcement, p.query) for p in content.policies] == [
        (
            "enforce_owner_tag",
            Enforcement.HARD_MANDATORY,
            "data.terraform.enforce_owner_tag.deny",
        ),
        ("no_local_exec", Enforcement.HARD_MANDATORY, "data.terraform.no_local_exec.deny"),
    ]


@pytest.mark.parametrize(
    ("config", "modules", "phrase"),
    [
        (
            'version = "v2"\npolicy "a" {\n}\n',
            {"a.rego": "package a\n"},
            "scalr-policy.hcl line 1: version 'v2' is not supported",
        ),
        (
            'policy "a" {\n  enforcement_level = "strict"\n}\n',
            {"a.rego": "package a\n"},
            "scalr-policy.hcl line 2: policy a: the enforcement_level 'strict'",
        ),
        (
            'policy "missing" {\n}\n',
            {"a.rego": "package a\n"},
            "scalr-policy.hcl line 1: policy missing: no module is named missing.rego",
        ),
        (
            'policy "a" {\n}\npolicy "b" {\n}\n',
            {"a.rego": "package terraform\n", "b.rego": "package terraform\n"},
            "give each module its own package",
        ),
        (
            'policy "a" {\n  colour = "red"\n}\n',
            {"a.rego": "package a\n"},
            "scalr-policy.hcl line 2: policy a: unknown setting colour",
        ),
    ],
)
def test_a_bad_scalr_configuration_is_refused_with_file_and_line(
    tmp_path: Path, config: str, modules: dict[str, str], phrase: str
) -> None:
    root = _write(tmp_path / "set", {"scalr-policy.hcl": config, **modules})
    with pytest.raises(InvalidPolicySet, match=phrase):
        load_policy_set_dir(root)


def test_a_policies_hcl_policy_without_a_query_is_refused(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "set",
        {
            "policies.hcl": 'policy "s" {\n  source = "./s.sentinel"\n}\n',
            "a.rego": "package a\n",
        },
    )
    with pytest.raises(
        InvalidPolicySet, match=re.escape("policies.hcl line 1: policy s has no query")
    ):
        load_policy_set_dir(root)


def test_conftest_conventions_discover_rules_in_every_package_and_subdirectory(
    tmp_path: Path,
) -> None:
    # Given modules without any configuration file, one in a subdirectory, and a test file
    root = _write(
        tmp_path / "my set",
        {
            "main.rego": V0_DENY.replace("package rules", "package main"),
            "extra/checks.rego": (
                "package checks\n\nimport rego.v1\n\n"
                'violation_size contains "too big" if count(input.resource_changes) > 100\n\n'
                'warn_naming contains "odd" if false\n\n'
                "authz if {\n\tevery rc in input.resource_changes {\n"
                '\t\tnot "delete" in rc.change.actions\n\t}\n}\n\n'
                "helper := 1\n"
            ),
            "main_test.rego": "package main\n\ntest_x {\n\ttrue\n}\n",
        },
    )
    # When it is loaded
    content = load_policy_set_dir(root)
    # Then every deny/violation/warn rule and the authz decision is a policy, warn*
    # advisory and the others hard mandatory; the test file is not published
    assert content.name == "my-set"
    assert [(p.name, p.enforcement.value) for p in content.policies] == [
        ("checks.authz", "hard_mandatory"),
        ("checks.violation_size", "hard_mandatory"),
        ("checks.warn_naming", "advisory"),
        ("main.deny", "hard_mandatory"),
    ]
    assert [m.name for m in content.modules] == [
        "extra/checks.rego",
        "main.rego",
        DECISIONS_MODULE,
    ]
    # And it evaluates: the v0 deny rule reports the deletion
    outcomes = _outcomes(root, DELETE_PLAN)
    assert outcomes["main.deny"][1:] == ("failed", ["aws_s3_bucket.logs would be deleted"])
    assert outcomes["checks.authz"][1:] == ("failed", ["checks.authz is not true"])


def test_a_directory_with_nothing_to_enforce_is_refused(tmp_path: Path) -> None:
    root = _write(tmp_path / "set", {"lib.rego": "package lib\n\nimport rego.v1\n\nx := 1\n"})
    with pytest.raises(
        InvalidPolicySet, match=re.escape("no policy-set.json, policies.hcl or scalr")
    ):
        load_policy_set_dir(root)


def test_spacelift_deny_and_warn_rules_are_mandatory_and_advisory(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "stack",
        {
            "plan.rego": (
                "package spacelift\n\n"
                'deny["no deletions"] {\n\tinput.terraform.resource_changes[_].change.actions'
                '[_] == "delete"\n}\n\n'
                'warn["many changes"] {\n\tcount(input.terraform.resource_changes) > 10\n}\n'
            )
        },
    )
    outcomes = _outcomes(root, DELETE_PLAN)
    assert outcomes == {
        "spacelift.deny": ("hard_mandatory", "failed", ["no deletions"]),
        "spacelift.warn": ("advisory", "passed", []),
    }


# -- the Rego v0 upgrade -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("v0", "v1", "note"),
    [
        ("p[x] {\n\tx := 1\n}\n", "p contains x if {\n\tx := 1\n}\n", "partial set rule p"),
        ("allow {\n\ttrue\n}\n", "allow if {\n\ttrue\n}\n", "rule allow body"),
        ('m = "a" {\n\ttrue\n}\n', 'm = "a" if {\n\ttrue\n}\n', "rule m body"),
        (
            "f(x) = 1 {\n\tx\n} else = 2 {\n\ttrue\n}\n",
            "f(x) = 1 if {\n\tx\n} else = 2 if {\n\ttrue\n}\n",
            "else body",
        ),
        (
            'o[k] = {"a": 1} {\n\tk := "b"\n}\n',
            'o[k] = {"a": 1} if {\n\tk := "b"\n}\n',
            "rule o body",
        ),
        ('d["c"]\nq {\n\ttrue\n}\n', 'd contains "c"\nq if {\n\ttrue\n}\n', "partial set rule d"),
    ],
)
def test_each_v0_form_is_upgraded_keeping_its_lines(v0: str, v1: str, note: str) -> None:
    upgrade = compiled_source("m.rego", "package a\n\n" + v0)
    assert upgrade.source == "package a\n\n" + v1
    assert upgrade.v0
    assert any(note in rewrite for rewrite in upgrade.rewrites)


def test_a_v1_module_is_compiled_as_written() -> None:
    source = 'package a\n\nimport rego.v1\n\ndeny contains "x" if {\n\ttrue\n}\n'
    assert compiled_source("m.rego", source).source == source
    assert not compiled_source("m.rego", source).v0


def test_a_v0_set_publishes_its_original_text_and_evaluates_as_v0(tmp_path: Path) -> None:
    # Given a v0 module, published as the author wrote it
    root = _write(
        tmp_path / "set",
        {
            "policy-set.json": json.dumps(
                {
                    "name": "v0",
                    "input_shape": "bare",
                    "policies": [
                        {"name": "d", "enforcement": "hard_mandatory", "query": "data.rules.deny"}
                    ],
                }
            ),
            "rules.rego": V0_DENY,
        },
    )
    content = load_policy_set_dir(root)
    assert content.modules[0].source == V0_DENY
    # When it is validated and evaluated
    outcomes = _outcomes(root, DELETE_PLAN)
    # Then the partial set rule is a set of messages, not an object
    assert outcomes["d"] == ("hard_mandatory", "failed", ["aws_s3_bucket.logs would be deleted"])


@pytest.mark.parametrize(
    ("source", "phrase"),
    [
        ("p {\n\ttrue\n} {\n\tfalse\n}\n", "m.rego line 5: Rego v0 rule p (line 3) with several"),
        (
            "import rego.v1\n\np if {\n\tcontains := 1\n\tcontains == 1\n}\n",
            "m.rego line 6: 'contains' is used as a name",
        ),
    ],
)
def test_what_cannot_be_upgraded_is_refused_with_file_line_and_fix(
    source: str, phrase: str
) -> None:
    with pytest.raises(InvalidPolicySet, match=re.escape(phrase)):
        compiled_source("m.rego", "package a\n\n" + source, rego_cpp=True)


def test_regorus_reads_keywords_as_names_and_sprintf_q_as_opa_does() -> None:
    # Given a v1 module using `contains` as a variable and sprintf's %q
    source = (
        "package a\n\nimport rego.v1\n\n"
        'deny := [m | contains := "x"; m := sprintf("%q is %s", [contains, contains])]\n'
    )
    # Then regorus compiles it unchanged, and the policy gives OPA's message
    assert compiled_source("m.rego", source).source == source
    content = PolicySetContent(
        "q",
        (PolicyModule("m.rego", source),),
        (PolicyDefinition("q", Enforcement.ADVISORY, "data.a.deny"),),
    )
    validate_policy_set(content, isolation="thread")
    [result] = RegoEvaluator(isolation="thread").evaluate([content], {})
    assert result.messages == ('"x" is x',)


def test_a_refused_upgrade_refuses_publication() -> None:
    from runplane.domain.policy import PolicyDefinition, PolicySetContent

    content = PolicySetContent(
        "s",
        (PolicyModule("m.rego", "package a\n\ndeny[m] {\n\tm := 1\n} {\n\tm := 2\n}\n"),),
        (PolicyDefinition("d", Enforcement.HARD_MANDATORY, "data.a.deny"),),
    )
    # (regorus reads the rule repeated on the line; rego-cpp reads one rule per line)
    with pytest.raises(InvalidPolicySet, match="write one rule per body"):
        validate_policy_set(content, isolation="thread", engine_name="regopy")


def test_sprintf_q_quotes_strings_like_opa(tmp_path: Path) -> None:
    # Given a policy formatting with %q (rego-cpp 1.5.2 prints %q verbatim)
    root = _write(
        tmp_path / "set",
        {
            "q.rego": (
                "package q\n\nimport rego.v1\n\n"
                'deny contains sprintf("%q is 100%% gone", [rc.name]) if {\n'
                "\tsome rc in input.resource_changes\n}\n"
            )
        },
    )
    outcomes = _outcomes(root, DELETE_PLAN)
    # Then the name is quoted
    assert outcomes["q.deny"][2] == ['"logs" is 100% gone']


def test_a_v1_object_rule_is_refused_with_a_hint() -> None:
    from runplane.domain.policy import PolicyDefinition, PolicySetContent

    source = 'package a\n\nimport rego.v1\n\ndeny[msg] if {\n\tmsg := "x"\n}\n'
    content = PolicySetContent(
        "s",
        (PolicyModule("m.rego", source),),
        (PolicyDefinition("d", Enforcement.HARD_MANDATORY, "data.a.deny"),),
    )
    with pytest.raises(InvalidPolicySet) as refused:
        validate_policy_set(content, isolation="thread")
    assert "(rule deny: m.rego line 5) is an object" in refused.value.message
    assert "name contains x if" in refused.value.message


# -- unit tests --------------------------------------------------------------------------------


def test_unit_tests_pass_fail_and_error_like_opa_test(tmp_path: Path) -> None:
    # Given a v0 policy and a test file with a passing, a failing and an erroring test
    policy = (
        "package rules\n\ndeleted[rc.address] {\n\trc := input.resource_changes[_]\n"
        '\trc.actions[_] == "delete"\n}\n'
    )
    tests = (
        "package rules\n\n"
        "test_deletion_found {\n"
        '\tdeleted == {"a.b"} with input as {"resource_changes": '
        '[{"address": "a.b", "actions": ["delete"]}]}\n}\n\n'
        "test_wrong {\n\tcount(deleted) == 5\n}\n\n"
        "test_divides {\n\t1 / 0 == 1\n}\n"
    )
    modules = [PolicyModule("rules.rego", policy), PolicyModule("rules_test.rego", tests)]
    found = discover([modules[1]])
    # When they run
    results = run_unit_tests(modules, found)
    # Then each is reported with its outcome
    assert [(r.test.query, r.test.line, r.outcome) for r in results] == [
        ("data.rules.test_deletion_found", 3, UnitTestOutcome.PASS),
        ("data.rules.test_wrong", 7, UnitTestOutcome.FAIL),
        ("data.rules.test_divides", 11, UnitTestOutcome.ERROR),
    ]
    assert "divide by zero" in results[2].message


def test_a_set_that_crashes_the_evaluator_errors_its_tests_and_passes_none() -> None:
    # Given a test rego-cpp 1.5.2 crashes on (a builtin over a value given by
    # `with input as`), followed by a passing test
    modules = [
        PolicyModule("a.rego", V0_DENY),
        PolicyModule(
            "a_test.rego",
            "package rules\n\ntest_crashes {\n\tcount(deny) == 1 with input as "
            '{"resource_changes": [{"address": "a.b", "change": {"actions": ["delete"]}}]}\n}\n\n'
            "test_after {\n\ttrue\n}\n",
        ),
    ]
    # When they run on rego-cpp
    results = run_unit_tests(modules, discover([modules[1]]), engine="regopy")
    # Then every test errors, each naming the crash (rego-cpp compiles the whole set
    # for each test, so the crash is hit whichever test runs), and the run returns
    assert [(r.test.rule, r.outcome) for r in results] == [
        ("test_crashes", UnitTestOutcome.ERROR),
        ("test_after", UnitTestOutcome.ERROR),
    ]
    assert all("the evaluator crashed" in r.message for r in results)
    # And on regorus, the default engine, both tests simply pass
    results = run_unit_tests(modules, discover([modules[1]]))
    assert [(r.test.rule, r.outcome) for r in results] == [
        ("test_crashes", UnitTestOutcome.PASS),
        ("test_after", UnitTestOutcome.PASS),
    ]


def test_with_data_mocks_a_rule() -> None:
    modules = [
        PolicyModule("a.rego", "package a\n\nimport rego.v1\n\nlimit := 3\n"),
        PolicyModule(
            "a_test.rego",
            "package a\n\nimport rego.v1\n\n"
            "test_mocked if {\n\tlimit == 7 with data.a.limit as 7\n}\n",
        ),
    ]
    (result,) = run_unit_tests(modules, discover([modules[1]]))
    assert result.outcome is UnitTestOutcome.PASS


def test_test_files_are_read_apart_from_policies(tmp_path: Path) -> None:
    root = _write(tmp_path, {"a.rego": "package a\n", "sub/a_test.rego": "package a\n"})
    assert [m.name for m in read_modules(root)] == ["a.rego"]
    assert [m.name for m in read_modules(root, tests=True)] == ["sub/a_test.rego"]


# -- the CLI -----------------------------------------------------------------------------------


def test_cli_unit_tests_of_the_example_pass(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["policy", "test", str(EXAMPLES / "conftest-style"), "--unit"])
    out = capsys.readouterr().out
    assert status == 0
    assert "PASS  data.main.test_a_deletion_is_found (main_test.rego line 5)" in out
    assert out.strip().endswith("PASS: 3/3")


def test_cli_a_failing_unit_test_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _write(
        tmp_path / "set",
        {"main.rego": V0_DENY, "main_test.rego": "package rules\n\ntest_no {\n\tfalse\n}\n"},
    )
    status = main(["policy", "test", str(root), "--unit"])
    out = capsys.readouterr().out
    assert status == 1
    assert "FAIL  data.rules.test_no (main_test.rego line 3)" in out
    assert "FAIL: 1/1" in out


def test_cli_a_refused_set_exits_2_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a set whose module calls a function the evaluator does not have
    root = _write(
        tmp_path / "set",
        {"main.rego": "package main\n\nimport rego.v1\n\ndeny := [m | m := nope.f(1)]\n"},
    )
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(DELETE_PLAN))
    # When it is tested
    status = main(["policy", "test", str(root), "--plan", str(plan)])
    # Then it is refused (exit 2) naming the module, line and function, without a traceback
    err = capsys.readouterr().err
    assert status == 2
    assert "main.rego line 5 calls nope.f" in err
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_cli_a_broken_configuration_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _write(tmp_path / "set", {"policies.hcl": "policy {\n", "a.rego": "package a\n"})
    status = main(["policy", "test", str(root), "--unit"])
    assert status == 2
    assert "policies.hcl line 1" in capsys.readouterr().err


def test_cli_a_failing_decision_exits_1_and_a_passing_one_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(DELETE_PLAN))
    assert main(["policy", "test", str(EXAMPLES / "conftest-style"), "--plan", str(plan)]) == 1
    assert "failed   main.deny (hard_mandatory)" in capsys.readouterr().out
    plan.write_text(json.dumps({**DELETE_PLAN, "resource_changes": []}))
    assert main(["policy", "test", str(EXAMPLES / "conftest-style"), "--plan", str(plan)]) == 0


def test_cli_test_needs_a_plan_or_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "test", str(EXAMPLES / "conftest-style")]) == 3
    assert "pass --plan PLAN_JSON, --unit, or both" in capsys.readouterr().err


def test_dot_test_modules_are_unit_tests_never_published(tmp_path: Path) -> None:
    # Given a conftest-style folder with a policy and its tests in both namings
    (tmp_path / "main.rego").write_text("package main\n\ndeny contains 'x' if { false }\n")
    (tmp_path / "main_test.rego").write_text("package main\n\ntest_a if { true }\n")
    (tmp_path / "main.test.rego").write_text("package main\n\ntest_b if { true }\n")

    # When its modules are read, for publication and for unit tests
    published = [m.name for m in read_modules(tmp_path)]
    tests = [m.name for m in read_modules(tmp_path, tests=True)]

    # Then only the policy is published, and both test files are tests
    assert published == ["main.rego"]
    assert sorted(tests) == ["main.test.rego", "main_test.rego"]
