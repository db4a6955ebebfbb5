"""The capability scan of policy modules: the builtins a published module may not reference,
found lexically (comments and string contents are not references).

Pure: standard library only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from runplane.domain.errors import PolicyModuleRefused
from runplane.domain.rego_v0 import tokens as rego_tokens

if TYPE_CHECKING:
    from runplane.domain.policy import PolicySetContent


FORBIDDEN_BUILTINS: Final[frozenset[str]] = frozenset(
    {
        # network
        "http.send",
        "net.lookup_ip_addr",
        # runtime environment (OPA's and rego-cpp's opa.runtime() include every
        # environment variable of the evaluating process)
        "opa.runtime",
        # clock
        "time.now_ns",
        "io.jwt.decode_verify",  # checks exp/nbf against the current time
        "crypto.x509.parse_and_verify_certificates",  # verifies validity at "now"
        "crypto.x509.parse_and_verify_certificates_with_options",
        # randomness
        "uuid.rfc4122",
        "io.jwt.encode_sign",  # ECDSA and RSA-PSS signatures are randomised
        "io.jwt.encode_sign_raw",
    }
)
"""Builtins a published module may not reference.

Policies run with fixed, deterministic capabilities: the same input and modules always
give the same result, and nothing leaves the evaluator. Deliberately allowed because
they are pure: ``net.cidr_*``, ``uuid.parse``, every other ``time.*`` function (they
compute on their arguments), ``io.jwt.decode`` and ``io.jwt.verify_*``, ``trace`` and
``print``. Any reference counts, including ``with time.now_ns as ...`` mocks and
variables that shadow a name, and bracket forms such as ``time["now_ns"]``.
"""

FORBIDDEN_PREFIXES: Final[tuple[str, ...]] = ("http.", "rand.")
"""Whole namespaces refused: all of ``http.*`` (network) and ``rand.*`` (randomness)."""


def forbidden_builtins(source: str) -> list[tuple[str, int]]:
    """The forbidden builtins ``source`` references, as ``(builtin, line)`` in source order.

    Comments and the contents of string literals (``"..."`` with escapes and raw
    `` `...` `` strings) are not references. A reference is a name not preceded by
    ``.``, followed by ``.name`` or ``["name"]`` segments, whitespace allowed.
    """
    found: list[tuple[str, int]] = []
    tokens = _tokens(source)
    for i, (kind, text, line) in enumerate(tokens):
        if kind != "ident" or (i > 0 and tokens[i - 1][0] == "."):
            continue
        path = [text]
        j = i + 1
        while j < len(tokens):
            if tokens[j][0] == "." and j + 1 < len(tokens) and tokens[j + 1][0] == "ident":
                path.append(tokens[j + 1][1])
                j += 2
            elif (
                tokens[j][0] == "["
                and j + 2 < len(tokens)
                and tokens[j + 1][0] == "str"
                and tokens[j + 2][0] == "]"
            ):
                path.append(tokens[j + 1][1])
                j += 3
            else:
                break
        name = _forbidden_name(path)
        if name is not None and (name, line) not in found:
            found.append((name, line))
    return found


def _forbidden_name(path: list[str]) -> str | None:
    dotted = ".".join(path)
    for builtin in sorted(FORBIDDEN_BUILTINS):
        if dotted == builtin or dotted.startswith(builtin + "."):
            return builtin
    if len(path) > 1:
        for prefix in FORBIDDEN_PREFIXES:
            if dotted.startswith(prefix):
                return ".".join(path[:2])
    return None


def refuse_forbidden_builtins(content: PolicySetContent) -> None:
    """Raise ``PolicyModuleRefused`` for the first forbidden reference (modules by name)."""
    for module in content.modules:
        found = forbidden_builtins(module.source)
        if found:
            builtin, line = found[0]
            raise PolicyModuleRefused(module.name, builtin, line)


_Token = tuple[str, str, int]


def _tokens(source: str) -> list[_Token]:
    """Rego tokens (``rego_v0.tokens``) as the reference scans read them: identifiers,
    strings (decoded), ``.``, ``[``, ``]``; every other token is ``other``; comments and
    newlines are dropped."""
    out: list[_Token] = []
    for token in rego_tokens(source):
        if token.kind == "nl":
            continue
        if token.kind == "str":
            out.append(("str", _string_value(token.text), token.line))
        elif token.kind == "ident":
            out.append(("ident", token.text, token.line))
        elif token.kind == "num":
            out.append(("other", token.text, token.line))
        else:  # punctuation, one token per character (":=" is two)
            out.extend((c if c in ".[]" else "other", c, token.line) for c in token.text)
    return out


def _string_value(literal: str) -> str:
    """A string token's value: a raw string's text, a quoted string decoded (as written
    when it does not decode)."""
    if literal.startswith("`"):
        return literal[1:-1] if len(literal) > 1 and literal.endswith("`") else literal[1:]
    try:
        value = json.loads(literal)
    except ValueError:
        value = literal.strip('"')
    return value if isinstance(value, str) else literal


def _blank_comments_and_strings(source: str) -> str:
    """``source`` with comments and string contents replaced by spaces (lines kept)."""
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "#":
            while i < n and source[i] != "\n":
                out[i] = " "
                i += 1
        elif c == '"':
            i += 1
            while i < n and source[i] not in '"\n':
                step = 2 if source[i] == "\\" else 1
                for k in range(i, min(i + step, n)):
                    if source[k] != "\n":
                        out[k] = " "
                i += step
            i += 1
        elif c == "`":
            i += 1
            while i < n and source[i] != "`":
                if source[i] != "\n":
                    out[i] = " "
                i += 1
            i += 1
        else:
            i += 1
    return "".join(out)
