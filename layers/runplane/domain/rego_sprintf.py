"""Rego's ``sprintf`` as OPA computes it: Go's ``fmt.Sprintf`` over converted arguments.

Pure: standard library only. The engines' own ``sprintf`` differ from OPA's (regorus 0.13
prints ``%-40s`` as ``40s``, ignores widths on strings and prints ``1`` for ``%s`` of a
number; rego-cpp 1.5.2 prints ``%q`` verbatim and nothing for ``%s`` of an array), so
policies' messages would differ from what their authors see with ``opa``. The regorus
adapter registers ``sprintf`` as an extension calling ``sprintf`` here.

OPA hands Go each argument as (``topdown/strings.go``):

- a number that is an integer of 64 bits as ``int``, a larger integer as ``*big.Int``,
  any other number as ``float64``;
- a string as ``string``;
- anything else (booleans, null, arrays, objects, sets) as the ``string`` of its Rego
  text: ``true``, ``null``, ``[1, "a"]``, ``{"a": 1}`` (keys sorted), ``{1, 2}``,
  ``set()``.

Go then formats them: so ``%s`` of a number is ``%!s(int=1)``, ``%d`` of a string
``%!d(string=a)``, a missing argument ``%!s(MISSING)`` and an unused one
``%!(EXTRA string=x)``, as OPA prints them. Values arrive as Python values: an integral
number the engine hands over as an ``int`` is one (regorus reads ``3.0`` as ``3``).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

_INT64: Final = 2**63
_MAX_WIDTH: Final = 1_000_000
"""Go refuses a width or precision beyond this (``%!(BADWIDTH)``)."""


class SprintfError(ValueError):
    """An operand of the wrong type, as OPA reports it."""


class _BigInt(int):
    """An integer beyond 64 bits: Go's ``*big.Int``, with its own ``Format``."""


def sprintf(fmt: object, args: object) -> str:
    """``sprintf(fmt, args)`` as OPA evaluates it (see the module docstring)."""
    if not isinstance(fmt, str):
        raise SprintfError(f"operand 1 must be string but got {_rego_type(fmt)}")
    if not isinstance(args, list | tuple):
        raise SprintfError(f"operand 2 must be array but got {_rego_type(args)}")
    return _printf(fmt, [_go_value(a) for a in args])


def _rego_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "set"


# -- the Go values OPA passes ----------------------------------------------------------------


def _go_value(value: object) -> object:
    if isinstance(value, bool) or value is None:
        return rego_text(value)
    if isinstance(value, int):
        return value if -_INT64 <= value < _INT64 else _BigInt(value)
    if isinstance(value, float | str):
        return value
    return rego_text(value)


def rego_text(value: object) -> str:
    """The Rego text of a value, as OPA prints a term (``ast.Term.String``)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number_text(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(rego_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: _order(kv[0]))
        return "{" + ", ".join(f"{rego_text(k)}: {rego_text(v)}" for k, v in items) + "}"
    if isinstance(value, set | frozenset):
        if not value:
            return "set()"
        return "{" + ", ".join(rego_text(v) for v in sorted(value, key=_order)) + "}"
    return str(value)


def _number_text(value: float) -> str:
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _order(value: object) -> tuple[int, Any]:
    """Rego's total order: null < booleans < numbers < strings < arrays < objects < sets."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, list | tuple):
        return (4, [_order(v) for v in value])
    if isinstance(value, Mapping):
        return (5, sorted((_order(k), _order(v)) for k, v in value.items()))
    return (6, sorted(_order(v) for v in value))  # type: ignore[attr-defined]


def go_quote(text: str, *, ascii_only: bool = False) -> str:
    """Go's ``strconv.Quote`` (``QuoteToASCII`` with ``ascii_only``)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable() and (not ascii_only or code < 0x80):
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_quote_rune(code: int, *, ascii_only: bool = False) -> str:
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        code = 0xFFFD
    ch = chr(code)
    if ch == "'":
        return "'\\''"
    if ch == '"':
        return "'\"'"
    return "'" + go_quote(ch, ascii_only=ascii_only)[1:-1] + "'"


# -- the format string ------------------------------------------------------------------------


@dataclass
class _Spec:
    minus: bool = False
    plus: bool = False
    sharp: bool = False
    space: bool = False
    zero: bool = False
    width: int | None = None
    prec: int | None = None
    plus_v: bool = False
    sharp_v: bool = False


_FLAGS: Final = {"#": "sharp", "0": "zero", "+": "plus", "-": "minus", " ": "space"}


_PLAIN: Final = _Spec()


@functools.lru_cache(maxsize=512)
def _plan(fmt: str) -> tuple[tuple[tuple[str, _Spec, str, bool], ...], str] | None:
    """The directives of a format without argument indexes or ``*``: ``((text before,
    spec, verb, plain), ...), text after`` (``plain``: no flag, width or precision);
    None for any other format (read by ``_do_printf``)."""
    if "[" in fmt or "*" in fmt:
        return None
    steps: list[tuple[str, _Spec, str, bool]] = []
    text: list[str] = []
    i, end = 0, len(fmt)
    while i < end:
        j = fmt.find("%", i)
        if j < 0:
            text.append(fmt[i:])
            break
        text.append(fmt[i:j])
        spec, i = _flags(fmt, j + 1)
        spec.width, i = _parse_number(fmt, i)
        if i + 1 < end and fmt[i] == ".":
            spec.prec, i = _parse_number(fmt, i + 1)
            spec.prec = spec.prec or 0
        if i >= end:
            return None  # %!(NOVERB): rare, let the full reader say it
        verb = fmt[i]
        i += 1
        if verb == "%":
            text.append("%")
            continue
        if verb == "v":  # %#v and %+v are flags of their own (Go's sharpV, plusV)
            spec.sharp_v, spec.sharp = spec.sharp, False
            spec.plus_v, spec.plus = spec.plus, False
        steps.append(("".join(text), spec, verb, spec == _PLAIN))
        text = []
    return tuple(steps), "".join(text)


def _flags(fmt: str, i: int) -> tuple[_Spec, int]:
    spec = _Spec()
    while i < len(fmt) and fmt[i] in _FLAGS:
        setattr(spec, _FLAGS[fmt[i]], True)
        i += 1
    return spec, i


def _parse_number(fmt: str, i: int) -> tuple[int | None, int]:
    """Go's ``parsenum``: the decimal number at ``i`` and the index after it; a number
    beyond a million is refused, and reading skips to the end of the format."""
    num, found = 0, False
    while i < len(fmt) and "0" <= fmt[i] <= "9":
        if num > _MAX_WIDTH:
            return None, len(fmt)
        num = num * 10 + ord(fmt[i]) - 48
        found = True
        i += 1
    return (num if found else None), i


def _printf(fmt: str, args: Sequence[object]) -> str:
    plan = _plan(fmt)
    if plan is None:
        return _do_printf(fmt, args)
    steps, tail = plan
    out: list[str] = []
    arg = 0
    for text, spec, verb, plain in steps:  # a cached spec: never changed below
        out.append(text)
        if arg >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        value = args[arg]
        arg += 1
        # The most common directives, without the general formatter (same result):
        # sprintf runs once per violation message.
        if plain and type(value) is str and (verb == "s" or verb == "v"):
            out.append(value)
        elif plain and type(value) is int and (verb == "d" or verb == "v"):
            out.append(str(value))
        else:
            out.append(_format(value, verb, spec))
    out.append(tail)
    if arg < len(args):
        out.append(_extra(args[arg:]))
    return "".join(out)


def _extra(args: Sequence[object]) -> str:
    shown = ", ".join(f"{_type_name(a)}={_format(a, 'v', _Spec())}" for a in args)
    return f"%!(EXTRA {shown})"


def _arg_number(fmt: str, i: int, arg: int, count: int) -> tuple[int, int, bool, bool]:
    """Go's ``argNumber``: ``[n]`` at ``i``. Returns ``(argument, index after, found,
    valid)``; ``found`` is whether an index was written (even a bad one)."""
    if i >= len(fmt) or fmt[i] != "[":
        return arg, i, False, True
    close = fmt.find("]", i + 1)
    if len(fmt) - i < 3 or close < 0:
        return arg, i + 1, False, False
    number, after = _parse_number(fmt, i + 1)
    if number is None or after != close:
        return arg, close + 1, False, False
    if 0 <= number - 1 < count:
        return number - 1, close + 1, True, True
    return arg, close + 1, True, False


def _do_printf(fmt: str, args: Sequence[object]) -> str:  # noqa: C901 - Go fmt verbs
    """Go's ``doPrintf`` for any format (argument indexes, ``*`` widths)."""
    out: list[str] = []
    end = len(fmt)
    arg = 0
    reordered = False
    i = 0
    while i < end:
        j = fmt.find("%", i)
        if j < 0:
            out.append(fmt[i:])
            break
        out.append(fmt[i:j])
        good = True
        spec, i = _flags(fmt, j + 1)
        if spec.minus:
            spec.zero = False
        if i < end and fmt[i] == "[":
            reordered = True
        arg, i, after_index, ok = _arg_number(fmt, i, arg, len(args))
        good = good and ok
        if i < end and fmt[i] == "*":
            i += 1
            width, arg = _int_arg(args, arg)
            if width is None:
                out.append("%!(BADWIDTH)")
            else:
                spec.width = width
                if width < 0:
                    spec.width, spec.minus, spec.zero = -width, True, False
            after_index = False
        else:
            spec.width, i = _parse_number(fmt, i)
            if after_index and spec.width is not None:
                good = False  # "%[3]2d"
        if i + 1 < end and fmt[i] == ".":
            i += 1
            if after_index:
                good = False  # "%[3].2d"
            if i < end and fmt[i] == "[":
                reordered = True
            arg, i, after_index, ok = _arg_number(fmt, i, arg, len(args))
            good = good and ok
            if i < end and fmt[i] == "*":
                i += 1
                prec, arg = _int_arg(args, arg)
                if prec is not None and prec < 0:
                    prec = None
                    spec.prec = None
                elif prec is None:
                    out.append("%!(BADPREC)")
                else:
                    spec.prec = prec
                after_index = False
            else:
                spec.prec, i = _parse_number(fmt, i)
                spec.prec = spec.prec or 0
        if not after_index:
            if i < end and fmt[i] == "[":
                reordered = True
            arg, i, after_index, ok = _arg_number(fmt, i, arg, len(args))
            good = good and ok
        if i >= end:
            out.append("%!(NOVERB)")
            break
        verb = fmt[i]
        i += 1
        if verb == "%":
            out.append("%")
        elif not good:
            out.append(f"%!{verb}(BADINDEX)")
        elif arg >= len(args):
            out.append(f"%!{verb}(MISSING)")
        else:
            if verb == "v":
                spec.sharp_v, spec.sharp = spec.sharp, False
                spec.plus_v, spec.plus = spec.plus, False
            out.append(_format(args[arg], verb, spec))
            arg += 1
    if not reordered and arg < len(args):
        out.append(_extra(args[arg:]))
    return "".join(out)


def _int_arg(args: Sequence[object], i: int) -> tuple[int | None, int]:
    if i >= len(args):
        return None, i
    value = args[i]
    if isinstance(value, int) and not isinstance(value, _BigInt) and abs(value) <= _MAX_WIDTH:
        return value, i + 1
    return None, i + 1


def _type_name(value: object) -> str:
    if isinstance(value, _BigInt):
        return "*big.Int"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    return "string"


def _format(value: object, verb: str, spec: _Spec) -> str:
    if verb == "T":
        return _pad(_type_name(value), spec)
    if isinstance(value, _BigInt):
        return _format_big(value, verb, spec)
    if isinstance(value, int):
        return _format_int(value, verb, spec)
    if isinstance(value, float):
        return _format_float(value, verb, spec)
    assert isinstance(value, str)
    return _format_str(value, verb, spec)


def _bad(value: object, verb: str, spec: _Spec) -> str:
    shown = _format(value, "v", _Spec(**{**spec.__dict__, "sharp_v": False, "plus_v": False}))
    return f"%!{verb}({_type_name(value)}={shown})"


def _pad(text: str, spec: _Spec, *, zero: bool | None = None) -> str:
    width = spec.width or 0
    missing = width - len(text)
    if missing <= 0:
        return text
    if spec.minus:
        return text + " " * missing
    use_zero = spec.zero if zero is None else zero
    return ("0" if use_zero else " ") * missing + text


def _format_str(value: str, verb: str, spec: _Spec) -> str:
    if verb == "v" and spec.sharp_v:
        return _pad(go_quote(_truncate(value, spec)), spec)
    if verb in ("v", "s"):
        return _pad(_truncate(value, spec), spec)
    if verb == "q":
        text = _truncate(value, spec)
        if spec.sharp and "`" not in text and all(c == "\t" or c.isprintable() for c in text):
            return _pad(f"`{text}`", spec)
        return _pad(go_quote(text, ascii_only=spec.plus), spec)
    if verb in ("x", "X"):
        return _hex_bytes(value.encode("utf-8"), verb, spec)
    return _bad(value, verb, spec)


def _truncate(value: str, spec: _Spec) -> str:
    return value if spec.prec is None else value[: spec.prec]


def _hex_bytes(data: bytes, verb: str, spec: _Spec) -> str:
    if spec.prec is not None:
        data = data[: spec.prec]
    digits = "0123456789abcdef" if verb == "x" else "0123456789ABCDEF"
    prefix = "0x" if verb == "x" else "0X"
    parts = []
    for i, byte in enumerate(data):
        pair = digits[byte >> 4] + digits[byte & 0xF]
        if spec.space:
            parts.append((" " if i else "") + (prefix if spec.sharp else "") + pair)
        else:
            parts.append(pair)
    text = "".join(parts)
    if spec.sharp and not spec.space and data:
        text = prefix + text
    return _pad(text, spec, zero=spec.zero and not spec.minus)


_BASES: Final = {"b": 2, "o": 8, "O": 8, "d": 10, "v": 10, "x": 16, "X": 16}


def _format_int(value: int, verb: str, spec: _Spec) -> str:
    if verb in _BASES:
        return _integer(value, _BASES[verb], verb, spec)
    if verb == "c":
        return _pad(chr(value) if 0 <= value <= 0x10FFFF else "\ufffd", spec, zero=False)
    if verb == "q":
        return _pad(_go_quote_rune(value, ascii_only=spec.plus), spec, zero=False)
    if verb == "U":
        return _unicode(value, spec)
    return _bad(value, verb, spec)


def _integer(value: int, base: int, verb: str, spec: _Spec) -> str:
    negative = value < 0
    magnitude = -value if negative else value
    if spec.prec == 0 and magnitude == 0:
        return " " * (spec.width or 0)
    digits = _digits(magnitude, base, upper=verb == "X")
    prec = spec.prec
    if prec is None and spec.zero and spec.width and not spec.minus:
        prec = spec.width - (1 if negative or spec.plus or spec.space else 0)
    if prec is not None and len(digits) < prec:
        digits = "0" * (prec - len(digits)) + digits
    if spec.sharp:
        if base == 8 and not digits.startswith("0"):
            digits = "0" + digits
        elif base == 16:
            digits = ("0x" if verb == "x" else "0X") + digits
        elif base == 2:
            digits = "0b" + digits
    if verb == "O":
        digits = "0o" + digits
    if negative:
        digits = "-" + digits
    elif spec.plus:
        digits = "+" + digits
    elif spec.space:
        digits = " " + digits
    return _pad(digits, spec, zero=False)


def _digits(value: int, base: int, *, upper: bool) -> str:
    if base == 10:
        return str(value)
    if base == 16:
        return format(value, "X" if upper else "x")
    if base == 8:
        return format(value, "o")
    return format(value, "b")


def _unicode(value: int, spec: _Spec) -> str:
    prec = 4 if spec.prec is None or spec.prec <= 4 else spec.prec
    text = "U+" + format(value & 0xFFFFFFFFFFFFFFFF, "X").rjust(prec, "0")
    if spec.sharp and 0 <= value <= 0x10FFFF and chr(value).isprintable():
        text += f" '{chr(value)}'"
    return _pad(text, spec, zero=False)


def _format_big(value: _BigInt, verb: str, spec: _Spec) -> str:
    """``*big.Int``'s ``Format``: bases and flags as for integers; ``%s`` and ``%v``
    are decimal; any other verb is ``%!c(big.Int=N)``."""
    if verb in ("s", "v") or verb in _BASES:
        return _integer(int(value), _BASES.get(verb, 10), verb, spec)
    return f"%!{verb}(big.Int={int(value)})"


def _format_float(value: float, verb: str, spec: _Spec) -> str:
    if verb in ("v", "g", "G"):
        text = _float_g(value, spec.prec, upper=verb == "G", sharp=spec.sharp)
    elif verb in ("e", "E"):
        prec = 6 if spec.prec is None else spec.prec
        text = _float_e(value, prec, upper=verb == "E", sharp=spec.sharp)
    elif verb in ("f", "F"):
        prec = 6 if spec.prec is None else spec.prec
        text = _float_f(value, prec, sharp=spec.sharp)
    elif verb in ("x", "X"):
        text = _float_hex(value, upper=verb == "X")
    elif verb == "b":
        text = _float_binary(value)
    else:
        return _bad(value, verb, spec)
    if math.isinf(value) or math.isnan(value):
        if math.isnan(value):
            body = ("+" if spec.plus else " " if spec.space else "") + "NaN"
        else:
            body = ("-" if value < 0 else "+" if spec.plus else " " if spec.space else "") + "Inf"
        return _pad(body, spec, zero=False)
    sign = ""
    if text.startswith("-"):
        sign, text = "-", text[1:]
    elif spec.plus:
        sign = "+"
    elif spec.space:
        sign = " "
    if spec.zero and not spec.minus and spec.width and spec.width > len(sign) + len(text):
        return sign + "0" * (spec.width - len(sign) - len(text)) + text
    return _pad(sign + text, spec, zero=False)


def _shortest(value: float) -> tuple[str, int]:
    """The shortest decimal digits identifying ``value`` and its decimal exponent
    (``value == 0.d1d2... * 10**exp``), as Go's ``strconv`` finds them."""
    if value == 0:
        return "0", 1
    _, digits, exponent = decimal.Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    return text, len(digits) + exponent


def _float_g(value: float, prec: int | None, *, upper: bool, sharp: bool) -> str:
    negative = value < 0 or (value == 0 and math.copysign(1, value) < 0)
    if prec is None:
        digits, point = _shortest(value)
        eprec = 6
    else:
        prec = max(prec, 1)
        digits, point = _rounded(value, prec)
        eprec = prec
        if eprec > len(digits) and len(digits) >= point:
            eprec = len(digits)
    if sharp:
        eprec = 6 if prec is None else prec
    exp = point - 1
    if exp < -4 or exp >= eprec:
        keep = digits if not sharp else digits.ljust(eprec, "0")
        mantissa = keep[0] + ("." + keep[1:] if len(keep) > 1 else ("." if sharp else ""))
        text = f"{mantissa}{'E' if upper else 'e'}{'-' if exp < 0 else '+'}{abs(exp):02d}"
    else:
        if point <= 0:
            text = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits))
            if sharp:
                text += "." + "0" * max(0, eprec - len(digits))
        else:
            text = digits[:point] + "." + digits[point:]
        if sharp and "." in text:
            significant = len(text.replace(".", "").lstrip("0"))
            text += "0" * max(0, eprec - significant)
    return ("-" if negative else "") + text


def _rounded(value: float, prec: int) -> tuple[str, int]:
    """``prec`` significant digits of ``value`` (trailing zeros dropped) and the
    exponent as in ``_shortest``, correctly rounded as Go rounds them."""
    if value == 0:
        return "0", 1
    text = f"{abs(value):.{prec - 1}e}"
    mantissa, exponent = text.split("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    return digits, int(exponent) + 1


def _float_e(value: float, prec: int, *, upper: bool, sharp: bool) -> str:
    text = f"{value:.{prec}e}"
    if sharp and prec == 0:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.e{exponent}"
    return text.upper() if upper else text


def _float_f(value: float, prec: int, *, sharp: bool) -> str:
    text = f"{value:.{prec}f}"
    if sharp and prec == 0:
        text += "."
    return text


def _float_hex(value: float, *, upper: bool) -> str:
    if value == 0:
        text = "-0x0p+00" if math.copysign(1, value) < 0 else "0x0p+00"
    else:
        raw = float.hex(value)  # -0x1.8000000000000p+1
        negative = raw.startswith("-")
        mantissa, exponent = raw.lstrip("-").split("p")
        mantissa = mantissa.rstrip("0").rstrip(".")
        sign = "-" if exponent.startswith("-") else "+"
        text = f"{'-' if negative else ''}{mantissa}p{sign}{abs(int(exponent)):02d}"
    return text.upper().replace("0X", "0X") if upper else text


def _float_binary(value: float) -> str:
    if value == 0:
        return "0p-1074"
    mantissa, exponent = math.frexp(abs(value))
    bits = int(mantissa * 2**53)
    exp = exponent - 53
    return f"{'-' if value < 0 else ''}{bits}p{'-' if exp < 0 else '+'}{abs(exp)}"
