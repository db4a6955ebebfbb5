"""tools/policy_compat.py on a small library written here, with every count known: three
units (one refused), helper inclusion, unit tests passing, failing and blocked, and mocks
matching, not matching, and not evaluated. Runs the real loader, service and engine."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from tools import policy_compat

DELETING = """{"resource_changes": [{
	"address": "aws_s3_bucket.logs", "mode": "managed", "type": "aws_s3_bucket", "name": "logs",
	"change": {"actions": ["delete"], "before": {"bucket": "logs"}, "after": null,
		"after_unknown": {}, "before_sensitive": {}, "after_sensitive": false},
}]}"""

CREATING = """{"resource_changes": [{
	"address": "aws_s3_bucket.logs", "mode": "managed", "type": "aws_s3_bucket", "name": "logs",
	"change": {"actions": ["create"], "before": null, "after": {"bucket": "logs"},
		"after_unknown": {}, "before_sensitive": false, "after_sensitive": {}},
}]}"""

FILES = {
    # A Runplane set reading the bare plan: accepted.
    "good/policy-set.json": json.dumps(
        {
            "name": "good",
            "input_shape": "bare",
            "policies": [
                {
                    "name": "no_deletes",
                    "enforcement": "hard_mandatory",
                    "query": "data.demo.good.deny",
                }
            ],
        }
    ),
    "good/good.rego": """package demo.good

import rego.v1

deny contains msg if {
	some rc in input.resource_changes
	"delete" in rc.change.actions
	msg := sprintf("%s is deleted", [rc.address])
}
""",
    "good/good_test.rego": f"""package demo.good

import rego.v1

deleting := {DELETING}

# PASS; a violating mock (a rule of the module) on which the policy fails: a match.
test_deletion_found if {{
	count(deny) == 1 with input as deleting
}}

# PASS; a passing mock (a literal) on which the policy passes: a match.
test_create_passes if {{
	count(deny) == 0 with input as {CREATING}
}}

# FAIL; a violating mock on which the policy passes: a violating mock passing.
test_create_is_a_violation if {{
	count(deny) > 0 with input as {CREATING}
}}
""",
    # Refused at publication: http.send.
    "bad/policy-set.json": json.dumps(
        {
            "name": "bad",
            "input_shape": "bare",
            "policies": [
                {"name": "fetch", "enforcement": "advisory", "query": "data.demo.bad.deny"}
            ],
        }
    ),
    "bad/bad.rego": """package demo.bad

import rego.v1

deny contains msg if {
	response := http.send({"method": "GET", "url": "https://example.com"})
	msg := sprintf("%v", [response.status_code])
}
""",
    "bad/bad_test.rego": f"""package demo.bad

import rego.v1

# BLOCKED (the set is refused); its mock is not evaluated.
test_blocked if {{
	count(deny) == 1 with input as {DELETING}
}}
""",
    # A conventions module with a helper it imports, which joins its unit; no input read.
    "extra/check.rego": """package extra.check

import data.extra.lib.names
import rego.v1

deny contains name if {
	some name in names.forbidden
	name == "never"
}
""",
    "extra/check_test.rego": """package extra.check

import rego.v1

test_quiet if {
	count(deny) == 0
}
""",
    "extra/lib/names.rego": """package extra.lib.names

import rego.v1

forbidden := {"a", "b"}
""",
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    libraries = tmp_path_factory.mktemp("libraries")
    for path, text in FILES.items():
        target = libraries / "synthetic" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (libraries / "sources.json").write_text(
        json.dumps({"synthetic": {"repository": "example/synthetic", "commit": "0" * 40}}),
        encoding="utf-8",
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = policy_compat.main([str(libraries), "--json"])
    assert code == 0
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def test_the_counts_are_exact(measured: dict[str, Any]) -> None:
    (library,) = measured["libraries"]
    assert library["source"]["commit"] == "0" * 40
    assert library["figures"] == {
        "units": 3,
        "units_accepted": 2,
        "modules": 4,  # good, bad, check and the helper it imports
        "modules_accepted": 3,
        "tests": 5,
        "tests_passing": 3,
        "mocks": 4,
        "mocks_violating": 3,
        "mocks_evaluated": 3,
        "mocks_matching": 2,
        "violating_evaluated": 2,
        "violating_passing": 1,
    }
    assert measured["totals"]["unseen"] == library["figures"]


def test_each_unit_and_test_is_reported(measured: dict[str, Any]) -> None:
    units = {u["name"]: u for u in measured["libraries"][0]["units"]}
    assert sorted(units) == ["bad", "check", "good"]
    assert units["check"]["modules"] == ["extra/check.rego", "extra/lib/names.rego"]
    outcomes = {t["query"]: t["outcome"] for u in units.values() for t in u["tests"]}
    assert outcomes == {
        "data.demo.good.test_deletion_found": "PASS",
        "data.demo.good.test_create_passes": "PASS",
        "data.demo.good.test_create_is_a_violation": "FAIL",
        "data.demo.bad.test_blocked": "BLOCKED",
        "data.extra.check.test_quiet": "PASS",
    }
    refusal = units["bad"]["refusal"]
    assert refusal["code"] == "policy_module_refused"
    assert refusal["message"].startswith("bad.rego line 6 calls http.send, which is not allowed")
    mocks = {m["test"]: (m["label"], m["outcome"], m["matches"]) for m in units["good"]["mocks"]}
    assert mocks == {
        "data.demo.good.test_deletion_found": ("violating", "failed", True),
        "data.demo.good.test_create_passes": ("passing", "passed", True),
        "data.demo.good.test_create_is_a_violation": ("violating", "passed", False),
    }
    assert [m["outcome"] for m in units["bad"]["mocks"]] == ["not_evaluated"]


def test_the_taxonomy_names_the_refusal_first(measured: dict[str, Any]) -> None:
    first = measured["taxonomy"][0]
    assert (first["kind"], first["modules"], first["tests"]) == (
        "refused (policy_module_refused)",
        1,
        1,
    )
    assert "calls http.send" in first["example"]
    kinds = {c["kind"]: c for c in measured["taxonomy"]}
    assert kinds["violating mock passed"]["mocks"] == 1
    assert kinds["test FAIL"]["tests"] == 1


def test_rego_literals_and_labels() -> None:
    value, end = policy_compat.parse_literal('{"a": [1, 2.5, true, null,], "b": {"x", "y"}} rest')
    assert value == {"a": [1, 2.5, True, None], "b": ["x", "y"]}
    assert end == len('{"a": [1, 2.5, true, null,], "b": {"x", "y"}}')
    with pytest.raises(policy_compat.NotLiteral):
        policy_compat.parse_literal("{input.x: 1}")
    source = "package p\n\ntest_x {\n\tr = deny with input as data.mock.bad\n\tcount(r) == 2\n}\n"
    (test,) = policy_compat.author_tests("p_test.rego", source)
    (mock,) = policy_compat.mocks_of(test, source, {"mock": {"bad": {"tfplan": {}}}})
    assert (mock.rule, mock.label, mock.expected, mock.source) == (
        "deny",
        "violating",
        2,
        "data.mock.bad",
    )


def test_mock_inputs_stand_for_a_plan_and_a_run() -> None:
    scalr = policy_compat.mock_plan(
        {
            "tfplan": {"resource_changes": []},
            "tfrun": {
                "workspace": {"name": "prod", "tags": {"aws": ""}},
                "vcs": {"branch": "dev", "commit": {"author": {"username": "ann"}}},
                "cost_estimate": {},
            },
        }
    )
    assert scalr is not None
    assert (scalr.plan, scalr.workspace, scalr.kind) == (
        {"resource_changes": []},
        "prod",
        "plan_and_apply",
    )
    assert scalr.dropped == ("tfrun.cost_estimate",)
    # and the run it describes is the run context the policy is tested with
    assert scalr.context == {
        "tags": ["aws"],
        "vcs": {
            "repository": "mock/repository",
            "branch": "dev",
            "commit_sha": "0" * 40,
            "sender": "ann",
        },
    }
    assert scalr.metadata().tags == ("aws",)
    run_only = policy_compat.mock_plan({"spacelift": {"run": {"type": "PROPOSED"}}})
    assert run_only is not None
    assert (run_only.plan, run_only.kind) == ({}, "plan_only")
    assert policy_compat.mock_plan({"session": {"login": "x"}}) is None
