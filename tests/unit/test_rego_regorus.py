"""The regorus engine: what the adapter guarantees on top of the gordon-to-regorus build."""

from __future__ import annotations

import pytest

from runplane.adapters import rego_rs
from runplane.adapters.rego import RegoEvaluator, validate_policy_set
from runplane.domain.errors import PolicyModuleRefused
from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicyOutcome,
    PolicySetContent,
)

LIVE = {
    "time.now_ns": "time.now_ns()",
    "rand.intn": 'rand.intn("seed", 10)',
    "uuid.rfc4122": 'uuid.rfc4122("x")',
    "opa.runtime": "opa.runtime()",
    "http.send": 'http.send({"method": "get", "url": "http://127.0.0.1:1"})',
}


def _set(body: str) -> PolicySetContent:
    return PolicySetContent(
        "t",
        (PolicyModule("t.rego", f"package t\n\nimport rego.v1\n\n{body}\n"),),
        (PolicyDefinition("p", Enforcement.HARD_MANDATORY, "data.t.deny"),),
    )


@pytest.mark.parametrize("name", sorted(LIVE))
def test_every_live_builtin_the_build_has_is_refused_at_publication(name: str) -> None:
    # Given a builtin of this build that reads the clock, randomness, the runtime or
    # the network
    assert name in rego_rs.builtins()
    content = _set(f"deny := [x | x := {LIVE[name]}]")
    # When a module calling it is published, Then it is refused, naming the builtin
    with pytest.raises(PolicyModuleRefused, match=rf"t\.rego line 5 calls {name}"):
        validate_policy_set(content, engine_name="regorus")


def test_an_error_message_does_not_echo_input_values() -> None:
    # Given a policy whose builtin error would quote an input value
    content = _set("deny := [x | x := input.a + input.s]")
    # When it is evaluated against a secret-looking value
    [result] = RegoEvaluator(engine="regorus").evaluate(
        [content], {"a": 1, "s": "hunter2-do-not-leak"}
    )
    # Then it is errored, located, and the value is not in the message
    assert result.outcome == PolicyOutcome.ERRORED
    assert result.messages[0].startswith("evaluation failed: t.rego line 5: `add` expects")
    assert "hunter2" not in result.messages[0]
    assert "Stack backtrace" not in result.messages[0]


def test_print_output_never_reaches_this_process_output(capfd: pytest.CaptureFixture[str]) -> None:
    # Given a policy that prints an input value
    content = _set('deny := ["x"] if { print("leaked:", input.secret) }')
    # When it is evaluated in a child process and in a thread
    for isolation in ("process", "thread"):
        [result] = RegoEvaluator(engine="regorus", isolation=isolation).evaluate(
            [content], {"secret": "hunter2"}
        )
        assert result.messages == ("x",)
    # Then nothing was written to stdout or stderr
    out, err = capfd.readouterr()
    assert "hunter2" not in out + err


def test_a_rule_whose_value_is_the_undefined_marker_is_not_read_as_undefined() -> None:
    # Given a rule whose value is the string regorus prints for "undefined"
    content = _set('deny := "<undefined>"')
    # When it is evaluated, Then it is errored as a string (not passed as undefined)
    [result] = RegoEvaluator(engine="regorus").evaluate([content], {})
    assert result.outcome == PolicyOutcome.ERRORED
    assert "is a string" in result.messages[0]
    # And an undefined rule passes
    [result] = RegoEvaluator(engine="regorus").evaluate([_set('deny := ["x"] if input.no')], {})
    assert result.outcome == PolicyOutcome.PASSED


def test_a_v0_and_a_v1_module_evaluate_together() -> None:
    # Given one v0 module and one v1 module in the same set
    content = PolicySetContent(
        "mixed",
        (
            PolicyModule("old.rego", 'package old\n\ndeny[msg] {\n\tinput.x\n\tmsg := "old"\n}\n'),
            PolicyModule("new.rego", 'package new\n\ndeny contains "new" if input.x\n'),
        ),
        (
            PolicyDefinition("old", Enforcement.ADVISORY, "data.old.deny"),
            PolicyDefinition("new", Enforcement.ADVISORY, "data.new.deny"),
        ),
    )
    validate_policy_set(content)
    # When both are evaluated, Then each reports its message
    results = RegoEvaluator().evaluate([content], {"x": True})
    assert {r.policy: r.messages for r in results} == {"old": ("old",), "new": ("new",)}
