"""A plan document with the run's secret values taken out, before anyone reads it.

The engine marks a value sensitive only when the configuration lets it: a configuration
can pass a sensitive variable through ``nonsensitive()``, a string function or an
encoding, and the plan document then holds it in the clear (the runner's log redacts
it; the plan document, which policies are judged on, is kept as the engine wrote it).
So a plan is shown only after :func:`without_secrets`: every string that spells one of
the run's sensitive values, in any spelling the log's redaction knows
(:mod:`runplane.domain.redaction`: as written, escaped, encoded, in another case), is
replaced whole by :class:`Hidden` (shown as "(sensitive)"); in the strings that name
things (addresses, names, keys) only the secret's own characters are replaced, so the
change can still be told apart. Matching is done on whole strings, before any is cut
for display, so a secret is never shown in part either.

Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from runplane.domain.redaction import secret_needles

PLACEHOLDER: Final = "(sensitive)"
# The fields of a change that name things: a secret in them is cut out, the rest kept.
NAMING_FIELDS: Final = frozenset(
    {"address", "module_address", "previous_address", "name", "deposed", "type"}
)


class Hidden(str):
    """A string value that spelled a secret of the run: shown as sensitive."""

    def __new__(cls) -> Hidden:
        return super().__new__(cls, PLACEHOLDER)


class Secrets:
    """The spellings of a run's sensitive values, as two patterns: those matched as
    written, and those matched whatever their case (and with a space also where the
    text has a newline, as the log's redaction folds them). One search per string: a
    plan holds many thousands of strings."""

    def __init__(self, values: Iterable[str]) -> None:
        exact: set[str] = set()
        folded: set[str] = set()
        for value in values:
            spellings = secret_needles(value)
            exact |= {_text(needle) for needle in spellings.exact}
            folded |= {_text(needle) for needle in spellings.folded}
        exact -= {""}
        folded -= {""}
        self._patterns = [
            pattern
            for pattern in (_pattern(exact, 0), _pattern(folded, re.IGNORECASE))
            if pattern is not None
        ]

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def found_in(self, text: str) -> bool:
        return any(pattern.search(text) for pattern in self._patterns)

    def cut(self, text: str) -> str:
        """``text`` with each spelling of a secret replaced by the placeholder."""
        for pattern in self._patterns:
            text = pattern.sub(PLACEHOLDER, text)
        return text


def _text(needle: bytes) -> str:
    # The spellings are of text, so they decode; a byte that would not is kept apart
    # (it then matches only where the same byte was decoded the same way).
    return needle.decode("utf-8", "surrogateescape")


def _pattern(needles: set[str], flags: int) -> re.Pattern[str] | None:
    if not needles:
        return None
    # Longest first, so an alternation takes the whole of an overlapping spelling.
    ordered = sorted(needles, key=len, reverse=True)
    alternatives = [re.escape(needle) for needle in ordered]
    if flags & re.IGNORECASE:
        alternatives = [a.replace("\\ ", "[ \n]").replace("\\\n", "[ \n]") for a in alternatives]
    return re.compile("|".join(alternatives), flags)


def without_secrets(document: Any, secrets: Secrets) -> Any:
    """``document`` (a parsed plan) with every string spelling a secret hidden; the same
    object when there is no secret to look for. Raises ``RecursionError`` for nesting
    deeper than the interpreter follows (the caller refuses such a plan)."""
    if not secrets:
        return document
    return _walk(document, secrets, naming=False)


def _walk(value: Any, secrets: Secrets, *, naming: bool) -> Any:
    if isinstance(value, str):
        if naming:
            return secrets.cut(value)
        return Hidden() if secrets.found_in(value) else value
    if isinstance(value, dict):
        return {
            secrets.cut(key): _walk(item, secrets, naming=key in NAMING_FIELDS)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_walk(item, secrets, naming=naming) for item in value]
    return value
