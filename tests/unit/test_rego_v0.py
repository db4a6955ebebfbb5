"""The Rego v0 upgrade and the engines' workarounds (``runplane.domain.rego_v0``).

The first tests read the rewrite alone (pure, no engine); the last ones evaluate v0
policies written the ways OPA's v0 grammar allows, on the default engine, and check the
values OPA gives them.
"""

from __future__ import annotations

import re

import pytest

from runplane.adapters.rego_unit import run_unit_tests
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyModule
from runplane.domain.policy_unit_tests import UnitTestOutcome, discover
from runplane.domain.rego_v0 import compiled_source, set_context


def _v1(source: str) -> str:
    """What the evaluator compiles for a module of package ``a`` holding ``source``."""
    upgraded = compiled_source("m.rego", "package a\n\n" + source).source
    return upgraded.removeprefix("package a\n\n")


# -- the rewrite ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("v0", "v1"),
    [
        # a head followed by `{` with no space (regression: `basenameif {`)
        ("f(p) = b{\n\tb := p\n}\n", "f(p) = b if {\n\tb := p\n}\n"),
        ("allow{\n\ttrue\n}\n", "allow if {\n\ttrue\n}\n"),
        ("deny[m]{\n\tm := 1\n}\n", "deny contains m if {\n\tm := 1\n}\n"),
        # partial sets, a composite key, a constant member, a two-term dotted head
        (
            'p[[x, {"y": y}]] {\n\tx = 1\n\ty = 2\n}\n',
            'p contains [x, {"y": y}] if {\n\tx = 1\n\ty = 2\n}\n',
        ),
        ('d["c"]\n', 'd contains "c"\n'),
        ("a.b {\n\ttrue\n}\n", 'a contains "b" if {\n\ttrue\n}\n'),
        # a head of three terms and a partial object stay objects
        ("a.b[x] {\n\tx := 1\n}\n", "a.b[x] if {\n\tx := 1\n}\n"),
        ('o[k] = {"a": 1} {\n\tk := "b"\n}\n', 'o[k] = {"a": 1} if {\n\tk := "b"\n}\n'),
        # values: `=` and `:=`, infix expressions, collections, a value on the next line
        ("p := x + 1 {\n\tx := 2\n}\n", "p := x + 1 if {\n\tx := 2\n}\n"),
        ('s = {"a"} {\n\ttrue\n}\n', 's = {"a"} if {\n\ttrue\n}\n'),
        ("n = count(x) > 1 {\n\tx := [1, 2]\n}\n", "n = count(x) > 1 if {\n\tx := [1, 2]\n}\n"),
        ("v =\n\t3 {\n\ttrue\n}\n", "v =\n\t3 if {\n\ttrue\n}\n"),
        # functions, constant arguments, no value
        ("multi(1, x) = y {\n\ty = x\n}\n", "multi(1, x) = y if {\n\ty = x\n}\n"),
        ("void(x) {\n\tx = 1\n}\n", "void(x) if {\n\tx = 1\n}\n"),
        # else chains: with and without values, on the next lines, after a blank line,
        # the last one without a body
        (
            'f(x) = "a" {\n\tx == 1\n} else = "b" {\n\tx == 2\n} else = "c"\n',
            'f(x) = "a" if {\n\tx == 1\n} else = "b" if {\n\tx == 2\n} else = "c"\n',
        ),
        (
            "g(x) {\n\tx = 1\n}\n\nelse = false {\n\ttrue\n}\n",
            "g(x) if {\n\tx = 1\n}\n\nelse = false if {\n\ttrue\n}\n",
        ),
        ("vars {\n\tfalse\n} else {\n\ttrue\n}\n", "vars if {\n\tfalse\n} else if {\n\ttrue\n}\n"),
        # several bodies: each becomes a rule of its own, on its line
        (
            "p[x] {\n\tx := 1\n} {\n\tx := 2\n}\n",
            "p contains x if {\n\tx := 1\n} p contains x if {\n\tx := 2\n}\n",
        ),
        (
            "q = 1 {\n\tinput.a\n}\n{\n\tinput.b\n}\n",
            "q = 1 if {\n\tinput.a\n}\nq = 1 if {\n\tinput.b\n}\n",
        ),
        # bodies holding every other construct are left as they are
        (
            "r {\n\tsome i\n\tnot input.x[i]\n\tc := [y | y := input.y[_]; y > 1]\n"
            "\to := {k: v | v := input.o[k]}\n\tdeny with input as {}\n}\n",
            "r if {\n\tsome i\n\tnot input.x[i]\n\tc := [y | y := input.y[_]; y > 1]\n"
            "\to := {k: v | v := input.o[k]}\n\tdeny with input as {}\n}\n",
        ),
        # strings, escapes and raw strings that look like syntax; comments in odd places
        (
            'm = "{ p[x] { # }" {\n\tr := `a {\n} b`\n\ts := "q\\"{"\n}\n',
            'm = "{ p[x] { # }" if {\n\tr := `a {\n} b`\n\ts := "q\\"{"\n}\n',
        ),
        (
            "p[x] # a comment { here\n{ # and here\n\tx := 1 # }\n} # end\nelse_ := 1\n",
            "p contains x # a comment { here\nif { # and here\n\tx := 1 # }\n} # end\nelse_ := 1\n",
        ),
        # default rules read the same in v1
        (
            "default allow = false\nallow {\n\ttrue\n}\n",
            "default allow = false\nallow if {\n\ttrue\n}\n",
        ),
    ],
)
def test_each_v0_form_becomes_v1_on_the_same_lines(v0: str, v1: str) -> None:
    upgraded = _v1(v0)
    assert upgraded == v1
    assert upgraded.count("\n") == v0.count("\n")


@pytest.mark.parametrize(
    ("v0", "v1"),
    [
        # a v0 function named `every`, and its calls (regression)
        (
            "every(arr, m) {\n\tarr[_] == m\n}\nt {\n\tevery([1], 1)\n}\n",
            "every__v0(arr, m) if {\n\tarr[_] == m\n}\nt if {\n\tevery__v0([1], 1)\n}\n",
        ),
        # `in` as a variable (regression)
        (
            "p {\n\tin := input.x[_]\n\tin.from == 0\n}\n",
            "p if {\n\tin__v0 := input.x[_]\n\tin__v0.from == 0\n}\n",
        ),
        # `if` as a variable, `some in`; a field named like a keyword stays
        ("p {\n\tsome if\n\tinput.if[if]\n}\n", "p if {\n\tsome if__v0\n\tinput.if[if__v0]\n}\n"),
        # a function named `contains` is renamed with its calls; the builtin elsewhere is not
        (
            "contains(arr, e) {\n\tarr[_] = e\n}\nq {\n\tcontains([1], 1)\n}\n",
            "contains__v0(arr, e) if {\n\tarr[_] = e\n}\nq if {\n\tcontains__v0([1], 1)\n}\n",
        ),
        ('q {\n\tcontains("abc", "b")\n}\n', 'q if {\n\tcontains("abc", "b")\n}\n'),
    ],
)
def test_keywords_not_imported_are_names_in_v0(v0: str, v1: str) -> None:
    assert _v1(v0) == v1


def test_imported_keywords_are_keywords() -> None:
    source = "import future.keywords.in\n\np {\n\tsome x in input.xs\n\tx == 1\n}\n"
    assert _v1(source) == "import future.keywords.in\n\np if {\n\tsome x in input.xs\n\tx == 1\n}\n"


def test_a_v0_partial_set_with_if_is_an_object_as_opa_reads_it() -> None:
    # `p[x] if` is an object in v0 as in v1 (only `p[x] {` is a set)
    source = "import future.keywords.if\n\np[x] if {\n\tx := 1\n}\nq {\n\ttrue\n}\n"
    assert _v1(source) == "import future.keywords.if\n\np[x] if {\n\tx := 1\n}\nq if {\n\ttrue\n}\n"


def test_locals_named_input_duplicate_imports_and_deprecated_builtins() -> None:
    source = (
        "import data.lib\nimport data.lib\n\n"
        't {\n\tinput := {"a": 1}\n\tr := deny with input as input\n\tinput.a == 1\n'
        '\tre_match("^a", "ab")\n\tnet.cidr_overlap("10.0.0.0/8", "10.1.2.3")\n}\n'
    )
    assert _v1(source) == (
        "import data.lib\n \n\n"
        't if {\n\tinput__local := {"a": 1}\n\tr := deny with input as input__local\n'
        '\tinput__local.a == 1\n\tregex.match("^a", "ab")\n'
        '\tnet.cidr_contains("10.0.0.0/8", "10.1.2.3")\n}\n'
    )


def test_a_v1_module_is_compiled_as_written() -> None:
    source = 'package a\n\nimport rego.v1\n\ndeny contains "x" if {\n\tsome y in input\n}\n'
    upgrade = compiled_source("m.rego", source)
    assert (upgrade.source, upgrade.rewrites, upgrade.v0) == (source, (), False)
    # also without the import, when the module is written in v1
    source = "package a\n\ndeny contains x if {\n\tsome x in input\n}\nf(y) := z if z := y\n"
    assert compiled_source("m.rego", source).source == source


def test_each_rewrite_is_named_with_its_line() -> None:
    upgrade = compiled_source("m.rego", "package a\n\nd[x] {\n\tin := 1\n\tx := in\n}\n")
    assert upgrade.v0
    assert upgrade.rewrites == (
        "line 3: partial set rule d[...] -> d contains ...",
        "line 3: rule d body -> if { ... }",
        "line 4: 'in' used as a name -> in__v0",
        "line 5: 'in' used as a name -> in__v0",
    )


def test_a_keyword_rule_is_renamed_in_the_modules_that_reference_it() -> None:
    # Given a v0 helper defining `every`, used by another package through an import, a
    # data reference, and by a v1 module
    helper = ("u.rego", "package utils\n\nevery(a, m) {\n\ta[_] == m\n}\n")
    user = (
        "p.rego",
        "package p\n\nimport data.utils\n\n"
        "ok {\n\tutils.every([1], 1)\n\tdata.utils.every([2], 2)\n\tinput.every\n}\n",
    )
    context = set_context([helper, user])
    assert context.keyword_rules == frozenset({"utils.every"})
    # Then both compile against the renamed rule; input.every is a field, not the rule
    assert "every__v0(a, m) if {" in compiled_source(*helper, context=context).source
    assert compiled_source(*user, context=context).source.endswith(
        "ok if {\n\tutils.every__v0([1], 1)\n\tdata.utils.every__v0([2], 2)\n\tinput.every\n}\n"
    )


# -- what the engines refuse although OPA accepts it -----------------------------------------


def test_a_some_variable_named_like_a_rule_is_renamed_where_it_is_declared() -> None:
    # regression: regorus 0.13 refuses `var resource used before definition below`
    source = (
        "import rego.v1\n\nresource := 1\n\n"
        'f(x) if { some resource in x; resource.type == "a" }\n'
        "g(x) := [r | some resource, r in x; resource > 0]\n"
        "h := resource\n"
    )
    assert _v1(source) == (
        "import rego.v1\n\nresource := 1\n\n"
        'f(x) if { some resource__local in x; resource__local.type == "a" }\n'
        "g(x) := [r | some resource__local, r in x; resource__local > 0]\n"
        "h := resource\n"
    )


def test_a_rule_of_another_module_of_the_package_is_known() -> None:
    modules = [
        ("a.rego", "package s\n\nimport rego.v1\n\nlogin := 1\n"),
        ("b.rego", "package s\n\nimport rego.v1\n\np if { some login in input.l; login }\n"),
    ]
    context = set_context(modules)
    assert (
        "some login__local in input.l; login__local"
        in compiled_source(*modules[1], context=context).source
    )


def test_bare_calls_with_targets_and_walk_are_rewritten_to_their_equivalents() -> None:
    source = (
        'import rego.v1\n\nimport data.lib\n\nport_covers("*", _)\nlimit := 1\n'
        "t if { limit == 2 with limit as 2 with lib.x as 1 }\n"
        "k := {p[0] | [p, v] := walk(input); count(p) > 0}\n"
    )
    assert _v1(source) == (
        'import rego.v1\n\nimport data.lib\n\nport_covers("*", _) = true\nlimit := 1\n'
        "t if { limit == 2 with data.a.limit as 2 with data.lib.x as 1 }\n"
        "k := {p[0] | walk(input, [p, v])   ; count(p) > 0}\n"
    )


@pytest.mark.parametrize(
    ("source", "phrase"),
    [
        # rego-cpp reads one rule per line: a second body on the first one's line
        (
            "p {\n\ttrue\n} {\n\tfalse\n}\n",
            "m.rego line 5: Rego v0 rule p (line 3) with several bodies on one line",
        ),
        # a head on several lines cannot be repeated on one
        (
            "p[x\n] {\n\tx := 1\n}\n{\n\tx := 2\n}\n",
            "m.rego line 7: Rego v0 rule p (line 3) with several bodies and a head",
        ),
    ],
)
def test_what_cannot_be_upgraded_is_refused_with_module_line_and_fix(
    source: str, phrase: str
) -> None:
    with pytest.raises(InvalidPolicySet, match=re.escape(phrase)):
        compiled_source("m.rego", "package a\n\n" + source, rego_cpp=True)


def test_a_syntax_error_is_left_to_the_engine() -> None:
    source = "package a\n\np {\n\tx := [1, 2\n}\n"
    assert compiled_source("m.rego", source).source == source


# -- evaluated: the values OPA gives ---------------------------------------------------------

_POLICY = """package a

import data.lib

ports[p] {
	in := input.rules[_]
	p := in.port
}

every(arr, m) {
	arr[_] == m
}

contains(arr, e) {
	arr[_] = e
}

get_basename(path) = basename{
	basename := split(path, "/")[count(split(path, "/")) - 1]
}

grade(x) = "a" {
	x >= 90
} else = "b" {
	x >= 80
}

else = "c" {
	true
}

reasons[r] {
	input.a
	r := "a"
} {
	input.b
	r := "b"
}

labels.team {
	input.team
}

flags[k] = true {
	k := input.flags[_]
}

default allow = false

allow {
	count(ports) > 0
	not contains(input.blocked, 22)
}

resource := "rule"

kinds(rs) = ks {
	ks := {k | some resource; k := rs[resource].kind}
}
"""

_TESTS = """package a

test_in_as_a_name {
	ports == {22, 80} with input as {"rules": [{"port": 22}, {"port": 80}]}
}

test_every_as_a_function {
	every([1, 2], 2)
	not every([1], 3)
}

test_contains_is_the_package_function {
	contains([1, 2], 2)
	not contains([1], 3)
}

test_no_space_before_the_body {
	get_basename("a/b/c.rego") == "c.rego"
}

test_else_chain {
	grade(95) == "a"
	grade(85) == "b"
	grade(10) == "c"
}

test_several_bodies {
	reasons == {"a", "b"} with input as {"a": true, "b": true}
	reasons == {"b"} with input as {"b": true}
}

test_two_term_dotted_head_is_a_set {
	labels == {"team"} with input as {"team": "x"}
}

test_partial_object {
	flags == {"x": true} with input as {"flags": ["x"]}
}

test_default {
	not allow
	allow with input as {"rules": [{"port": 1}], "blocked": []}
}

test_input_as_a_local {
	input := {"rules": [{"port": 8}]}
	p := ports with input as input
	p == {8}
}

test_some_shadows_a_rule {
	kinds([{"kind": "x"}]) == {"x"}
	resource == "rule"
}

test_with_a_rule {
	resource == "mocked" with resource as "mocked"
}
"""


@pytest.mark.parametrize("engine", ["regorus"])
def test_v0_policies_evaluate_as_opa_evaluates_them(engine: str) -> None:
    modules = [PolicyModule("a.rego", _POLICY), PolicyModule("a_test.rego", _TESTS)]
    results = run_unit_tests(modules, discover(modules), isolation="thread", engine=engine)
    assert [(r.test.rule, r.outcome, r.message) for r in results] == [
        (r.test.rule, UnitTestOutcome.PASS, "") for r in results
    ]
    assert len(results) == 12


_WORKAROUNDS = """package a

import rego.v1

resource := "rule"
limit := 1
port_covers("*", _)
kinds(rs) := {k | some resource in rs; k := resource.kind}
keys(o) := {p[0] | [p, v] := walk(o); count(p) > 0}
over(n) if n > limit
"""

_WORKAROUND_TESTS = """package a

import rego.v1

test_what_opa_accepts if {
	kinds([{"kind": "x"}]) == {"x"}
	resource == "rule"
	port_covers("*", 1)
	keys({"a": 1, "b": {"c": 2}}) == {"a", "b"}
	over(5)
	not over(5) with limit as 9
}
"""


@pytest.mark.parametrize("engine", ["regorus", "regopy"])
def test_the_workarounds_evaluate_as_opa_on_both_engines(engine: str) -> None:
    modules = [PolicyModule("a.rego", _WORKAROUNDS), PolicyModule("a_test.rego", _WORKAROUND_TESTS)]
    [result] = run_unit_tests(modules, discover(modules), engine=engine)
    assert (result.outcome, result.message) == (UnitTestOutcome.PASS, "")


_FUNCTIONS = """package ex

first(s) = y {
	y := split(s, "i")[0]
}

multi(1, x) = y {
	y = x
}

multi(2, x) = y {
	y = (2 * x) + 1
}

multi("foo", x) = y {
	y = "bar"
}

falsy(x) = false

falsy_else(x) {
	x = 1
}

else = false {
	true
}

always(x) = true

vars {
	false
} else = ["hello", x] {
	data.b.v2 = x
}
"""

_FUNCTION_TESTS = """package ex

test_output_argument {
	first("hiya", y)
	y == "h"
}

test_constant_arguments {
	multi(1, 2) == 2
	multi(2, 2) == 5
	multi("foo", 1) == "bar"
}

test_false_values {
	falsy(1) == false
	not falsy(1)
	falsy_else(1)
	falsy_else(2) == false
	not falsy_else(2)
	always(3)
}

test_else_value_with_a_variable {
	vars == ["hello", "goodbye"] with data.b.v2 as "goodbye"
}
"""


def test_v0_functions_evaluate_as_opa_evaluates_them() -> None:
    # Functions as OPA's v0 fixtures use them: output arguments, constant arguments,
    # false values, an else after a blank line, an else value bound in its body
    modules = [PolicyModule("ex.rego", _FUNCTIONS), PolicyModule("ex_test.rego", _FUNCTION_TESTS)]
    results = run_unit_tests(modules, discover(modules), isolation="thread")
    assert [(r.test.rule, r.outcome, r.message) for r in results] == [
        (rule, UnitTestOutcome.PASS, "")
        for rule in (
            "test_output_argument",
            "test_constant_arguments",
            "test_false_values",
            "test_else_value_with_a_variable",
        )
    ]
