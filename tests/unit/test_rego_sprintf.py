"""``sprintf`` as OPA formats (``runplane.domain.rego_sprintf``), and on the engine.

The expected strings are what Go's ``fmt`` documents (the format-errors examples of its
package documentation) and what OPA hands Go: ``int`` for integers, ``*big.Int`` beyond
64 bits (OPA's ``sprintf/big_int`` case), ``float64`` otherwise, and the Rego text of
anything that is not a number or a string.
"""

from __future__ import annotations

from typing import Any

import pytest

from runplane.adapters.rego import RegoEvaluator
from runplane.domain.policy import Enforcement, PolicyDefinition, PolicyModule, PolicySetContent
from runplane.domain.rego_sprintf import SprintfError, go_quote, rego_text, sprintf


@pytest.mark.parametrize(
    ("fmt", "args", "expected"),
    [
        # widths and flags (regression: regorus printed "40s")
        ("%-40s|", ["ab"], "ab" + " " * 38 + "|"),
        ("%8s|", ["ab"], "      ab|"),
        ("%5d|%-5d|%05d|%+d|% d", [42, 42, 42, 5, 5], "   42|42   |00042|+5| 5"),
        ("%05d", [-42], "-0042"),
        ("%-05d|", [7], "7    |"),
        ("%.2f|%8.3f|%08.3f", [3.14159, 3.14159, -3.14159], "3.14|   3.142|-003.142"),
        ("%6.2f%%", [99.5], " 99.50%"),
        ("%.3s|%-6.2s|", ["abcdef", "xyz"], "abc|xy    |"),
        # bases and characters
        (
            "%x %X %o %O %b %#x %#o %c %q %U %#U",
            [255, 255, 8, 8, 5, 255, 8, 65, 65, 65, 65],
            "ff FF 10 0o10 101 0xff 010 A 'A' U+0041 U+0041 'A'",
        ),
        ("%x|% x|%#x", ["hi", "hi", "hi"], "6869|68 69|0x6869"),
        # %v of numbers: integers, the shortest float, exponents as Go writes them
        ("%v %v %v %v %v", [1, 0.1, 1234567.0, 1e21, 1.5e-05], "1 0.1 1.234567e+06 1e+21 1.5e-05"),
        (
            "%e|%.1e|%g|%.3g|%G",
            [1234.5678, 12345.0, 0.000001234, 1234.5, 1e-07],
            "1.234568e+03|1.2e+04|1.234e-06|1.23e+03|1E-07",
        ),
        # composites are their Rego text: sorted keys and members, quoted strings
        ("%v", [[1, "a", {"k": 2}]], '[1, "a", {"k": 2}]'),
        ("%s", [{"b": 1, "a": [True, None]}], '{"a": [true, null], "b": 1}'),
        ("%v|%v|%v|%v", [{3, 1, 2}, set(), [], {}], "{1, 2, 3}|set()|[]|{}"),
        ("%v", [["x\ty", "é"]], '["x\\ty", "é"]'),
        ("%-12v|", [[1, 2]], "[1, 2]      |"),
        # strings
        ("%q|%+q|%#q|%#q", ['x"y', "é", "ab", "a`b"], '"x\\"y"|"\\u00e9"|`ab`|"a`b"'),
        ("%v|%s", ["str", "100%"], "str|100%"),
        ("100%%", [], "100%"),
        # what OPA prints for a verb that does not fit the value
        ("%s", [1], "%!s(int=1)"),
        ("%s", [1.5], "%!s(float64=1.5)"),
        ("%d", ["hi"], "%!d(string=hi)"),
        ("%d", [True], "%!d(string=true)"),
        ("%t", [True], "%!t(string=true)"),
        ("%f", [2], "%!f(int=2)"),
        ("%5d", ["ab"], "%!d(string=   ab)"),
        ("%z", [1], "%!z(int=1)"),
        # Go's documented format errors
        ("hi", ["guys"], "hi%!(EXTRA string=guys)"),
        ("%d %d", [1, 2, 3], "1 2%!(EXTRA int=3)"),
        ("hi%d", [], "hi%!d(MISSING)"),
        ("%*s", [4.5, "hi"], "%!(BADWIDTH)hi"),
        ("%.*s", [4.5, "hi"], "%!(BADPREC)hi"),
        ("%*[2]d", [7], "%!d(BADINDEX)"),
        ("%.[2]d", [7], "%!d(BADINDEX)"),
        ("%", [], "%!(NOVERB)"),
        # explicit argument indexes and * widths (Go's documented examples)
        ("%[2]d %[1]d", [11, 22], "22 11"),
        ("%[3]*.[2]*[1]f", [12.0, 2, 6], " 12.00"),
        ("%d %d %#[1]x %#x", [16, 17], "16 17 0x10 0x11"),
        ("%-*d|%*d|%.*f", [4, 7, -4, 7, 2, 3.14159], "7   |7   |3.14"),
        # integers beyond 64 bits are *big.Int (OPA's sprintf/big_int case)
        ("%s", [123456789123456789123], "123456789123456789123"),
        ("%d|%x|%c", [2**70, 2**70, 2**70], f"{2**70}|{2**70:x}|%!c(big.Int={2**70})"),
    ],
)
def test_sprintf_formats_as_opa(fmt: str, args: list[Any], expected: str) -> None:
    assert sprintf(fmt, args) == expected


def test_operands_of_the_wrong_type_are_errors_as_in_opa() -> None:
    with pytest.raises(SprintfError, match="operand 2 must be array but got string"):
        sprintf("%s", "x")
    with pytest.raises(SprintfError, match="operand 1 must be string but got number"):
        sprintf(1, [])


def test_rego_text_and_go_quote() -> None:
    assert rego_text({"b": {1, "x"}, "a": None}) == '{"a": null, "b": {1, "x"}}'
    assert go_quote("\a\x01\u2028\U0001f600é") == '"\\a\\x01\\u2028😀é"'


def _evaluate(source: str, engine: str | None = None) -> tuple[str, ...]:
    content = PolicySetContent(
        "f",
        (PolicyModule("m.rego", source),),
        (PolicyDefinition("f", Enforcement.ADVISORY, "data.f.deny"),),
    )
    [result] = RegoEvaluator(isolation="thread", engine=engine).evaluate([content], {})
    return result.messages


def test_the_default_engine_formats_as_opa() -> None:
    # Given a policy aligning columns and printing numbers and collections
    source = (
        "package f\n\nimport rego.v1\n\n"
        'deny contains sprintf("%-8s|%4d|%.1f|%v|%s", ["ab", 7, 2.25, {"k": [1, "x"]}, 3]) '
        "if true\n"
    )
    # Then the message is OPA's, not the engine's own
    assert _evaluate(source) == ('ab      |   7|2.2|{"k": [1, "x"]}|%!s(int=3)',)


def test_a_value_the_engine_cannot_hand_over_is_a_clear_error() -> None:
    source = 'package f\n\nimport rego.v1\n\ndeny contains sprintf("%v", [{{"a": 1}}]) if true\n'
    content = PolicySetContent(
        "f",
        (PolicyModule("m.rego", source),),
        (PolicyDefinition("f", Enforcement.ADVISORY, "data.f.deny"),),
    )
    [result] = RegoEvaluator(isolation="thread").evaluate([content], {})
    assert result.outcome == "errored"
    assert "m.rego line 5: sprintf cannot format an argument holding" in result.messages[0]


def test_an_operand_error_reads_as_opas() -> None:
    source = 'package f\n\nimport rego.v1\n\ndeny contains sprintf("%s", "x") if true\n'
    content = PolicySetContent(
        "f",
        (PolicyModule("m.rego", source),),
        (PolicyDefinition("f", Enforcement.ADVISORY, "data.f.deny"),),
    )
    [result] = RegoEvaluator(isolation="thread").evaluate([content], {})
    assert result.messages == (
        "evaluation failed: m.rego line 5: sprintf: operand 2 must be array but got string",
    )
