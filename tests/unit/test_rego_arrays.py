"""Set-valued rules evaluated through array companions: the same results as the sets,
without rego-cpp's quadratic set building."""

from __future__ import annotations

import pytest

from runplane.adapters.rego import RegoEvaluator
from runplane.adapters.rego_arrays import array_plan
from runplane.adapters.rego_cpp import _Compiled
from runplane.domain.policy import PolicyDefinition, PolicyModule, PolicySetContent

CHANGES = {
    "resource_changes": [
        {"address": f"a.r{i}", "type": "a", "tags": {"owner": "x"} if i % 2 else {}}
        for i in range(6)
    ]
}


def content(*sources: str, query: str = "data.p.deny") -> PolicySetContent:
    return PolicySetContent(
        name="s",
        modules=tuple(PolicyModule(f"m{i}.rego", s) for i, s in enumerate(sources)),
        policies=(PolicyDefinition("deny", "hard_mandatory", query),),  # type: ignore[arg-type]
    )


PARTIAL = """package p

import rego.v1

# a comment with deny contains x if { inside }
deny contains msg if {
\tsome rc in input.resource_changes
\tnot rc.tags.owner
\tmsg := sprintf("%s has no owner", [rc.address])
}

deny contains "duplicate" if {
\tsome rc in input.resource_changes
\trc.type == "a"
}

total := count(deny)
"""

SET_COMPREHENSION = """package p

import rego.v1

deny := {msg |
\tsome rc in input.resource_changes
\tnot rc.tags.owner
\tmsg := concat(" ", [rc.address, "has no owner"])
}
"""

EXPECTED = ("a.r0 has no owner", "a.r2 has no owner", "a.r4 has no owner", "duplicate")


def test_a_partial_set_rule_gets_array_companions_with_the_same_result() -> None:
    # Given a partial set rule with two definitions, one yielding the same value many
    # times, and another rule counting the set
    set_content = content(PARTIAL)
    # When its plan is made / Then each definition has a companion
    plan = array_plan(set_content)
    assert plan.entrypoints == {
        "data.p.deny": ("p/deny_runplane_array_0", "p/deny_runplane_array_1")
    }
    # And evaluation gives the set's members, once each
    [result] = RegoEvaluator(isolation="thread", engine="regopy").evaluate([set_content], CHANGES)
    assert result.outcome == "failed"
    assert result.messages == EXPECTED
    # And the rule that counts the set still sees the set
    compiled = _Compiled(content(PARTIAL, query="data.p.total"))
    compiled.set_input(_handle(CHANGES))
    assert compiled.query("data.p.total") == 4


def _handle(value: object) -> object:
    from runplane.adapters.rego_cpp import _input_handle

    return _input_handle(value)


def test_definitions_across_modules_and_set_comprehensions_are_rewritten() -> None:
    second = PARTIAL.split("# a comment")[0] + 'deny contains "from another module" if true\n'
    # A braceless definition in another module leaves the rule alone
    assert array_plan(content(PARTIAL, second)).entrypoints == {}
    # A set comprehension is rewritten, and gives the set's members
    comprehension = content(SET_COMPREHENSION)
    assert array_plan(comprehension).entrypoints == {"data.p.deny": ("p/deny_runplane_array_0",)}
    [result] = RegoEvaluator(isolation="thread", engine="regopy").evaluate([comprehension], CHANGES)
    assert result.messages == EXPECTED[:3]


@pytest.mark.parametrize(
    "rule",
    [
        # an object comprehension, a set literal, a conditional set, an array
        'deny := {k: v | some k, v in {"a": 1}}',
        'deny := {"a", "b"}',
        'deny := {m | some m in ["x"]} if {\n\tinput.go\n}',
        'deny := [m | some m in ["x"]]',
        'default deny := set()\ndeny contains "x" if {\n\tinput.go\n}',
    ],
)
def test_anything_else_is_left_alone(rule: str) -> None:
    source = f"package p\n\nimport rego.v1\n\n{rule}\n"
    assert array_plan(content(source)).entrypoints == {}


def test_a_set_whose_modules_already_use_the_companion_names_is_left_alone() -> None:
    source = PARTIAL + "deny_runplane_array_0 := 1\n"
    assert array_plan(content(source)).entrypoints == {}
