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

from collections.abc import Iterable
from typing import Any, Final

from runplane.domain.redaction import Needles, fold, secret_needles

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
    """The spellings of a run's sensitive values."""

    def __init__(self, values: Iterable[str]) -> None:
        exact: set[bytes] = set()
        folded: set[bytes] = set()
        for value in values:
            spellings = secret_needles(value)
            exact |= spellings.exact
            folded |= spellings.folded
        self._needles = Needles(exact, folded) if exact or folded else None

    def __bool__(self) -> bool:
        return self._needles is not None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where, in ``text``'s UTF-8 bytes, a secret is spelled."""
        if self._needles is None:
            return []
        data = text.encode("utf-8", "surrogatepass")
        return self._needles.spans(data, fold(data))

    def cut(self, text: str) -> str:
        """``text`` with each spelling of a secret replaced by the placeholder."""
        found = self.spans(text)
        if not found:
            return text
        data = text.encode("utf-8", "surrogatepass")
        out, at = bytearray(), 0
        for start, end in found:
            if end <= at:
                continue
            out += data[at:start] if start > at else b""
            out += PLACEHOLDER.encode()
            at = max(at, end)
        out += data[at:]
        return out.decode("utf-8", "replace")


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
        return Hidden() if secrets.spans(value) else value
    if isinstance(value, dict):
        return {
            secrets.cut(key): _walk(item, secrets, naming=key in NAMING_FIELDS)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_walk(item, secrets, naming=naming) for item in value]
    return value
