"""Evaluating policy sets with regopy: outcomes, fail-closed errors, verdicts."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runplane.adapters.rego import ENGINE_VARIABLE, RegoEvaluator, engine_release
from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicyOutcome,
    PolicySetContent,
    PolicyVerdict,
    load_policy_set_dir,
)
from runplane.domain.policy_results import PolicyResult, advisory_warnings, overall
from runplane.domain.policy_sanitize import sanitize_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
AWS = "registry.terraform.io/hashicorp/aws"


def _rc(
    address: str,
    actions: list[str],
    after: dict[str, Any] | None,
    *,
    before: dict[str, Any] | None = None,
    provider: str = AWS,
    sensitive: dict[str, Any] | None = None,
) -> dict[str, Any]:
    resource_type, name = address.split(".")[-2], address.split(".")[-1].split("[")[0]
    return {
        "address": address,
        "mode": "managed",
        "type": resource_type,
        "name": name,
        "provider_name": provider,
        "change": {
            "actions": actions,
            "before": before,
            "after": after,
            "after_unknown": {},
            "before_sensitive": False if before is None else {},
            "after_sensitive": sensitive or ({} if after is not None else False),
        },
    }


def _input(*changes: dict[str, Any], outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    plan = {"resource_changes": list(changes), "output_changes": outputs or {}}
    return sanitize_plan(plan, workspace="ws-1", run_kind="plan_and_apply", engine_version="1.0.3")


def _set(source: str, *policies: tuple[str, Enforcement, str], name: str = "t") -> PolicySetContent:
    definitions = tuple(PolicyDefinition(n, level, query) for n, level, query in policies)
    return PolicySetContent(name, (PolicyModule("t.rego", source),), definitions)


TAGS = {"owner": "team-a", "environment": "prod"}
TAGGED_BUCKET = {"bucket": "logs", "acl": "private", "tags": TAGS}


def test_deny_delete_fails_a_plan_that_deletes_and_passes_one_that_only_creates() -> None:
    # Given the deny-delete example set
    deny_delete = load_policy_set_dir(EXAMPLES / "deny-delete")
    evaluator = RegoEvaluator()
    deleting = _input(
        _rc("aws_s3_bucket.old", ["delete"], None, before=TAGGED_BUCKET),
        _rc("aws_s3_bucket.logs", ["create"], TAGGED_BUCKET),
    )
    creating = _input(_rc("aws_s3_bucket.logs", ["create"], TAGGED_BUCKET))
    # When each plan is evaluated
    [failed] = evaluator.evaluate([deny_delete], deleting)
    [passed] = evaluator.evaluate([deny_delete], creating)
    # Then the deleting plan fails with the resource named, and the other passes
    assert failed.outcome == PolicyOutcome.FAILED
    assert failed.messages == ("aws_s3_bucket.old would be deleted",)
    assert (failed.policy_set, failed.policy, failed.enforcement) == (
        "deny-delete",
        "deny_delete",
        Enforcement.HARD_MANDATORY,
    )
    assert failed.policy_set_digest == deny_delete.digest()
    assert passed.outcome == PolicyOutcome.PASSED
    assert passed.messages == ()
    assert overall([failed]) == PolicyVerdict.HARD_FAILED
    assert overall([passed]) == PolicyVerdict.PASSED


def test_the_baseline_set_gives_the_expected_outcome_per_policy() -> None:
    # Given a plan that trips some baseline policies and not others
    admin = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    policy_input = _input(
        _rc('aws_s3_bucket.public["www"]', ["create"], {**TAGGED_BUCKET, "acl": "public-read"}),
        _rc("aws_s3_bucket.untagged", ["create"], {"bucket": "u", "tags": {"owner": "x"}}),
        _rc("aws_instance.web", ["create"], {"instance_type": "t3.small", "tags": TAGS}),
        _rc("aws_iam_policy.admin", ["create"], {"policy": json.dumps(admin), "tags": TAGS}),
        _rc(
            "aws_db_instance.main",
            ["update"],
            {"storage_encrypted": True, "password": "hunter2", "tags": TAGS},
            before={"storage_encrypted": True, "password": "hunter1", "tags": TAGS},
            sensitive={"password": True},
        ),
        _rc("aws_ebs_volume.Data", ["create"], {"encrypted": True, "tags": TAGS}),
        outputs={
            "api_token": {
                "actions": ["create"],
                "before": None,
                "after": "t",
                "before_sensitive": False,
                "after_sensitive": True,
            }
        },
    )
    baseline = load_policy_set_dir(EXAMPLES / "baseline")
    # When the baseline set is evaluated
    results = {r.policy: r for r in RegoEvaluator().evaluate([baseline], policy_input)}
    # Then each policy has the expected outcome and names the resources it is about
    outcomes = {name: str(result.outcome) for name, result in results.items()}
    assert outcomes == {
        "allowed_providers": "passed",
        "deny_delete": "passed",
        "instance_types": "passed",
        "max_changes": "passed",
        "naming_convention": "failed",
        "no_public_buckets": "failed",
        "no_wildcard_iam": "failed",
        "require_encryption": "passed",
        "require_tags": "failed",
        "secret_outputs": "passed",
    }
    assert results["no_public_buckets"].messages == (
        'aws_s3_bucket.public["www"] grants public access with the public-read ACL',
    )
    assert results["no_wildcard_iam"].messages == (
        'aws_iam_policy.admin allows every action ("Action": "*")',
    )
    assert results["require_tags"].messages == (
        "aws_s3_bucket.untagged is missing required tags: environment",
    )
    assert results["naming_convention"].messages == (
        "aws_ebs_volume.Data: resource names should be lower_snake_case",
    )
    # And the verdict is a hard failure with one advisory warning
    assert overall(results.values()) == PolicyVerdict.HARD_FAILED
    assert advisory_warnings(results.values()) == 1


def test_messages_are_sorted_deduplicated_capped_and_stringified() -> None:
    # Given a policy returning duplicates, non-strings and strings with quotes
    source = "\n".join(
        [
            "package t",
            "import rego.v1",
            'deny := ["b", "a", "b", 1, {"z": 1, "a": [true]}, input.weird]',
        ]
    )
    content = _set(source, ("p", Enforcement.ADVISORY, "data.t.deny"))
    weird = 'quote " backslash \\ newline \n tab \t é'
    # When it is evaluated with a cap of three messages
    [result] = RegoEvaluator(max_messages=3).evaluate([content], {"weird": weird})
    # Then the messages are distinct, sorted, stringified as compact JSON, and capped
    everything = sorted({"a", "b", "1", '{"a":[true],"z":1}', weird})
    assert result.outcome == PolicyOutcome.FAILED
    assert result.messages == tuple(everything[:3])
    assert result.omitted == 2


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("deny := [x | x := 1 / input.zero]", "divide by zero"),
        ("deny := input.a\ndeny := input.b", "t.rego line 4: rule conflicts with rule"),
        ('deny := [x | x := object.get("s", "k", 1)]', "`object.get` expects object argument"),
        ("deny := 5", "is a number, not a set or array"),
        ('deny := {"a": 1}', "is an object, not a set or array"),
        ("deny := [x | x := no_such_function(1)]", "could not find function no_such_function"),
    ],
)
def test_a_policy_that_errors_is_errored_not_passed(rule: str, reason: str) -> None:
    # Given a policy that errors at run time, or returns something other than messages
    content = _set(
        f"package t\nimport rego.v1\n{rule}\n", ("p", Enforcement.ADVISORY, "data.t.deny")
    )
    # When it is evaluated
    [result] = RegoEvaluator().evaluate([content], {"zero": 0, "a": 1, "b": 2})
    # Then it is errored with a short reason that does not echo the input
    assert result.outcome == PolicyOutcome.ERRORED
    assert reason in result.messages[0]
    assert len(result.messages[0]) <= 400


def test_one_policy_erroring_does_not_affect_the_others() -> None:
    # Given a set where one policy conflicts and two are fine, and a second set
    source = 'package t\nimport rego.v1\nbad := input.a\nbad := input.b\nok := []\nno := ["x"]\n'
    first = _set(
        source,
        ("bad", Enforcement.SOFT_MANDATORY, "data.t.bad"),
        ("no", Enforcement.HARD_MANDATORY, "data.t.no"),
        ("ok", Enforcement.HARD_MANDATORY, "data.t.ok"),
        name="first",
    )
    second = load_policy_set_dir(EXAMPLES / "deny-delete")
    # When both sets are evaluated
    results = RegoEvaluator().evaluate([first, second], {"a": 1, "b": 2, "resource_changes": []})
    # Then each policy has its own outcome, in the order given
    assert [(r.policy_set, r.policy, str(r.outcome)) for r in results] == [
        ("first", "bad", "errored"),
        ("first", "no", "failed"),
        ("first", "ok", "passed"),
        ("deny-delete", "deny_delete", "passed"),
    ]
    # And an errored soft-mandatory policy fails the run hard (fail closed)
    assert overall(results) == PolicyVerdict.HARD_FAILED


def test_an_undefined_result_passes() -> None:
    content = _set(
        'package t\nimport rego.v1\ndeny := ["x"] if input.never\n',
        ("p", Enforcement.HARD_MANDATORY, "data.t.deny"),
    )
    [result] = RegoEvaluator().evaluate([content], {})
    assert result.outcome == PolicyOutcome.PASSED


def test_a_runaway_policy_is_killed_at_the_deadline_and_fails_closed() -> None:
    # Given a policy that would run for many seconds
    slow = "package t\nimport rego.v1\ndeny := [x | some x in numbers.range(1, 300000000); x < 0]\n"
    content = _set(
        slow,
        ("slow", Enforcement.HARD_MANDATORY, "data.t.deny"),
        ("after", Enforcement.ADVISORY, "data.t.deny"),
    )
    # When it is evaluated with a short deadline in a child process
    started = time.monotonic()
    results = RegoEvaluator(isolation="process").evaluate([content], {}, timeout_seconds=0.3)
    # Then the call returns at the deadline and every unfinished policy is errored
    assert time.monotonic() - started < 3
    assert [str(r.outcome) for r in results] == ["errored", "errored"]
    assert results[0].messages == ("not evaluated: timed out after 0.3s",)
    assert overall(results) == PolicyVerdict.HARD_FAILED


def test_a_thread_evaluation_also_gives_up_at_the_deadline() -> None:
    # Given a policy that takes a few tenths of a second
    slow = "package t\nimport rego.v1\ndeny := [x | some x in numbers.range(1, 2000000); x < 0]\n"
    content = _set(slow, ("slow", Enforcement.SOFT_MANDATORY, "data.t.deny"))
    # When it is evaluated in a thread with a deadline shorter than that
    [result] = RegoEvaluator(isolation="thread").evaluate([content], {}, timeout_seconds=0.01)
    # Then it is errored as timed out (the query itself finishes in the background)
    assert result.outcome == PolicyOutcome.ERRORED
    assert "timed out after 0.01s" in result.messages[0]
    # (Let it finish: a process forked while an engine runs in a thread inherits its
    # half-held state, and the next test forks evaluations.)
    for thread in threading.enumerate():
        if thread.name == "rego-evaluation":
            thread.join(timeout=60)


def test_a_crash_in_the_evaluator_is_contained_to_its_policy_set() -> None:
    # Given a set with a rule that crashes rego-cpp 1.5.2 (a segmentation fault), between
    # two sets that are fine
    crashing = "\n".join(
        [
            "package t",
            "import rego.v1",
            "fine := []",
            "deny := [m | some rc in input.resource_changes",
            '  rc.actions[_] in {"create"}',
            '  m := "x"]',
        ]
    )
    crash = _set(
        crashing,
        ("a_fine", Enforcement.ADVISORY, "data.t.fine"),
        ("b_crash", Enforcement.ADVISORY, "data.t.deny"),
        name="crash",
    )
    deny_delete = load_policy_set_dir(EXAMPLES / "deny-delete")
    policy_input = _input(_rc("aws_s3_bucket.old", ["delete"], None, before=TAGGED_BUCKET))
    # When they are evaluated in child processes
    results = RegoEvaluator(engine="regopy").evaluate(
        [deny_delete, crash, deny_delete], policy_input
    )
    # Then this process survives, the crashing set's policies are errored, and the
    # sets before and after it are evaluated
    assert [(r.policy_set, str(r.outcome)) for r in results] == [
        ("deny-delete", "failed"),
        ("crash", "errored"),
        ("crash", "errored"),
        ("deny-delete", "failed"),
    ]
    assert results[1].messages == ("not evaluated: the evaluator crashed (signal 11)",)


def test_the_runtime_identity_names_the_evaluator_and_its_versions() -> None:
    # Given the pinned engines installed, regorus is the default
    assert RegoEvaluator().runtime_identity == "gordon-to-regorus@0.13.0 regorus@0.13.0"
    assert RegoEvaluator(engine="regopy").runtime_identity == "regopy@1.5.2 rego-cpp@1.5.2"
    assert engine_release() == "gordon-to-regorus@0.13.0"


def test_the_engine_is_chosen_by_name_or_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the setting naming regopy
    monkeypatch.setenv(ENGINE_VARIABLE, "regopy")
    # Then the evaluator, its release and its results are regopy's
    evaluator = RegoEvaluator()
    assert evaluator.runtime_identity.startswith("regopy@1.5.2 ")
    assert engine_release() == "regopy@1.5.2"
    content = load_policy_set_dir(EXAMPLES / "deny-delete")
    policy_input = _input(_rc("aws_s3_bucket.old", ["delete"], None, before=TAGGED_BUCKET))
    [result] = evaluator.evaluate([content], policy_input)
    assert result.outcome == PolicyOutcome.FAILED
    # And a name that is no engine is refused, naming the setting
    monkeypatch.setenv(ENGINE_VARIABLE, "opa")
    with pytest.raises(ValueError, match="RUNPLANE_POLICY_ENGINE is one of regopy, regorus"):
        RegoEvaluator()


def _result(level: Enforcement, outcome: PolicyOutcome) -> PolicyResult:
    return PolicyResult("s", "sha256:" + "0" * 64, f"{level}-{outcome}", level, outcome)


A, S, H = Enforcement.ADVISORY, Enforcement.SOFT_MANDATORY, Enforcement.HARD_MANDATORY
PASS, FAIL, ERR = PolicyOutcome.PASSED, PolicyOutcome.FAILED, PolicyOutcome.ERRORED


@pytest.mark.parametrize(
    ("results", "verdict"),
    [
        ([], PolicyVerdict.PASSED),
        ([(H, PASS), (S, PASS), (A, PASS)], PolicyVerdict.PASSED),
        ([(A, FAIL), (A, ERR)], PolicyVerdict.PASSED),
        ([(S, FAIL), (A, FAIL)], PolicyVerdict.SOFT_FAILED),
        ([(S, ERR)], PolicyVerdict.HARD_FAILED),
        ([(H, FAIL), (S, FAIL)], PolicyVerdict.HARD_FAILED),
        ([(H, ERR)], PolicyVerdict.HARD_FAILED),
    ],
)
def test_the_overall_verdict_follows_the_enforcement_levels(
    results: list[tuple[Enforcement, PolicyOutcome]], verdict: PolicyVerdict
) -> None:
    assert overall(_result(level, outcome) for level, outcome in results) == verdict


def test_advisory_failures_and_errors_are_counted_as_warnings() -> None:
    results = [_result(A, FAIL), _result(A, ERR), _result(A, PASS), _result(S, FAIL)]
    assert advisory_warnings(results) == 2
    assert [r.blocking for r in results] == [False, False, False, True]


def test_a_result_round_trips_through_its_dictionary() -> None:
    result = PolicyResult(
        "baseline", "sha256:" + "a" * 64, "deny_delete", H, FAIL, ("x would be deleted",), 3
    )
    data = result.to_dict()
    assert data == {
        "policy_set": "baseline",
        "policy_set_digest": "sha256:" + "a" * 64,
        "policy": "deny_delete",
        "enforcement": "hard_mandatory",
        "outcome": "failed",
        "messages": ["x would be deleted"],
        "omitted": 3,
    }
    assert PolicyResult.from_dict(json.loads(json.dumps(data))) == result


def test_the_evaluation_process_has_no_environment_to_reveal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a secret in this process's environment, and a policy that (bypassing
    # publication, which refuses it) reads it through the runtime builtin
    monkeypatch.setenv("RUNPLANE_TEST_SECRET", "do-not-leak")
    source = "package t\nimport rego.v1\ndeny := [opa.runtime().env.RUNPLANE_TEST_SECRET]\n"
    content = _set(source, ("env", Enforcement.ADVISORY, "data.t.deny"))
    # When it is evaluated in a thread of this process, rego-cpp's probe does reach it
    # (regorus's opa.runtime() has no env at all)
    [cpp_thread] = RegoEvaluator(isolation="thread", engine="regopy").evaluate([content], {})
    assert cpp_thread.messages == ("do-not-leak",)
    [rs_thread] = RegoEvaluator(isolation="thread", engine="regorus").evaluate([content], {})
    assert rs_thread.messages == ()
    # Then in the child process the production evaluator uses, there is nothing to read
    for engine in ("regopy", "regorus"):
        [in_child] = RegoEvaluator(isolation="process", engine=engine).evaluate([content], {})
        assert str(in_child.outcome) == "passed"
        assert in_child.messages == ()
