"""What the runner's log redacts of a secret, and how all of it is found at once.

:func:`secret_needles` lists the byte strings that spell a secret (see
:mod:`runplane.runner.bounded_log` for exactly which); :class:`Needles` finds every
occurrence of any of them, overlapping ones included, at a cost per byte of text that
stays near flat as needles are added (a few regular-expression scans).
"""

from __future__ import annotations

import base64
import bisect
import json
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, TypeAlias

MIN_SECRET_LINE: Final = 4
"""Shortest line of a multi-line secret that is also redacted on its own."""

MIN_TRANSFORMED_SECRET: Final = 6
"""Shortest secret (in characters) whose transformed spellings are redacted too; a
shorter one is redacted only as written, so that a secret such as ``"1"`` or
``"true"`` does not blank every ``1`` or ``TRUE`` of the log."""

# Needles are found by their first bytes (their head), then checked whole.
_HEAD: Final = 32
# Heads are split by first byte among a few scans: at each position, a scan tries one
# branch per first byte it knows, so a few narrower scans beat one wide one (measured).
_FIRST_BYTES_PER_SCAN: Final = 12
# Up to this many needles, one bytes.find per needle beats the scans, whose cost per
# byte of text hardly depends on the number of needles (benchmarks/redaction.py).
_FIND_AT_MOST: Final = 200
_END: Final = -1  # a trie node's key for "a head ends here"
_Trie: TypeAlias = "dict[int, _Trie]"

_GO_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}
_URL_SAFE: Final = bytes.maketrans(b"+/", b"-_")
# Folding: ASCII letters to lower case, and a newline to a space, since the engine
# word-wraps its messages by replacing a space with a newline. One length-keeping pass.
_FOLD: Final = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ\n", b"abcdefghijklmnopqrstuvwxyz ")


@dataclass
class SecretNeedles:
    """A secret's spellings: ``exact`` ones match as written, ``folded`` ones (stored
    folded, see :func:`fold`) whatever the case of their ASCII letters, and with a space
    also where the text has a newline."""

    exact: set[bytes] = field(default_factory=set)
    folded: set[bytes] = field(default_factory=set)


def fold(text: bytes) -> bytes:
    """``text`` as folded spellings are compared with it: ASCII letters in lower case,
    newlines as spaces (the same length, so positions carry over)."""
    return text.translate(_FOLD)


def secret_needles(secret: str, *, transformed: bool = True) -> SecretNeedles:
    """The byte strings under which ``secret`` is redacted (none for an empty one).
    Without ``transformed``, only as written (raw, escaped, and its lines): a value
    that is not a secret, whose derived forms a reader needs to see."""
    needles = SecretNeedles()
    if not secret:
        return needles
    transformed = transformed and len(secret) >= MIN_TRANSFORMED_SECRET
    spellings = needles.folded if transformed else needles.exact
    spellings.update(_encoded(_escapings(secret)))
    for line in _lines(secret):
        (
            needles.folded if transformed and len(line) >= MIN_TRANSFORMED_SECRET else needles.exact
        ).add(line.encode("utf-8"))
    if transformed:
        # Folding covers ASCII letters; upper() and lower() the others.
        for text in (secret, secret[::-1]):
            for variant in (text, text.upper(), text.lower()):
                spellings.update(_encoded(_escapings(variant)))
        spellings.update(_encodings(secret.encode("utf-8")))
    needles.folded = {fold(needle) for needle in needles.folded if needle}
    needles.exact = {needle for needle in needles.exact if needle}
    return needles


def _encoded(texts: Iterable[str]) -> set[bytes]:
    return {text.encode("utf-8") for text in texts}


def _escapings(text: str) -> set[str]:
    """``text`` raw and as escaped inside a JSON string (ASCII, UTF-8, and Go's HTML-safe
    variant as used by ``output -json``), an HCL quoted string (as plans render it) and a
    Go-quoted string (as function errors print their arguments)."""
    utf8_json = json.dumps(text, ensure_ascii=False)[1:-1]
    go_json = (
        utf8_json.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return {text, json.dumps(text)[1:-1], utf8_json, go_json, _hcl_quoted(text), _go_quoted(text)}


def _hcl_quoted(text: str) -> str:
    return (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("${", "$${")
        .replace("%{", "%%{")
    )


def _go_quoted(text: str) -> str:
    """The inside of Go's ``strconv.Quote(text)``."""
    return "".join(_go_quoted_char(char) for char in text)


def _go_quoted_char(char: str) -> str:
    if char in _GO_ESCAPES:
        return _GO_ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _lines(secret: str) -> set[str]:
    """Each line of a multi-line secret of at least :data:`MIN_SECRET_LINE` characters,
    since plans render such strings as indented heredocs."""
    if "\n" not in secret and "\r" not in secret:
        return set()
    return {line.strip() for line in secret.splitlines() if len(line.strip()) >= MIN_SECRET_LINE}


def _encodings(data: bytes) -> set[bytes]:
    """``data`` in base64 (standard and URL-safe), hex and URL encoding."""
    spellings = {data.hex().encode()}
    for alphabet in (None, _URL_SAFE):
        spellings.update(
            spelling if alphabet is None else spelling.translate(alphabet)
            for spelling in _base64_spellings(data)
        )
    for plus_for_space in (True, False):
        quote = urllib.parse.quote_plus if plus_for_space else urllib.parse.quote
        spellings.add(quote(data, safe="").encode())
    return spellings


def _base64_spellings(data: bytes) -> set[bytes]:
    """``data`` encoded alone (with and without padding), and the characters that encode
    only ``data`` wherever it starts in a longer stream (0, 1 or 2 bytes after a group
    boundary): the characters shared with the neighbours' bytes depend on them."""
    alone = base64.b64encode(data)
    spellings = {alone, alone.rstrip(b"=")}
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data)
        first = -(-8 * offset // 6)  # the first character made of data's bits only
        end = 8 * (offset + len(data)) // 6
        spellings.add(encoded[first:end])
    return spellings


# --------------------------------------------------------------------------- the scan


@dataclass(frozen=True)
class _Needle:
    text: bytes  # as matched: folded if folded
    folded: bool


class Needles:
    """Every occurrence of a set of needles, whatever their number.

    Up to :data:`_FIND_AT_MOST` needles are each looked for on their own. Past that, the
    scan matches needles by their first :data:`_HEAD` bytes (folded, through a
    trie-shaped pattern that tries the longest head first), then checks whole needles
    from the longest down; it restarts one byte after each start found, so overlapping
    occurrences are all found. Folded needles are compared with the folded text, exact
    ones with the text as written.
    """

    def __init__(self, exact: Iterable[bytes] = (), folded: Iterable[bytes] = ()) -> None:
        folded_set = {fold(needle) for needle in folded if needle}
        needles = [_Needle(text, True) for text in folded_set]
        needles += [_Needle(text, False) for text in set(exact) if fold(text) not in folded_set]
        self.longest = max((len(needle.text) for needle in needles), default=0)
        by_head: dict[bytes, list[_Needle]] = {}
        for needle in needles:
            by_head.setdefault(fold(needle.text[:_HEAD]), []).append(needle)
        self._needles = needles if len(needles) <= _FIND_AT_MOST else None
        self._heads = sorted(by_head)
        self._candidates = _candidates(by_head)
        self._scans = (
            [re.compile(_trie_pattern(heads)) for heads in _by_first_bytes(self._heads)]
            if self._needles is None
            else []
        )
        # The needles longer than their head, which may begin long before the text's end.
        self._long = {
            head: tuple(fold(n.text) for n in found if len(n.text) > _HEAD)
            for head, found in by_head.items()
            if len(head) == _HEAD
        }
        long_heads = [head for head, found in self._long.items() if found]
        self._long_pattern = re.compile(_trie_pattern(long_heads)) if long_heads else None

    def spans(self, text: bytes, folded: bytes) -> list[tuple[int, int]]:
        """Where occurrences begin and end (at each start, at least the longest needle
        found there), in order of start; ``folded`` is ``fold(text)``."""
        found: list[tuple[int, int]] = []
        for needle in self._needles or ():
            haystack = folded if needle.folded else text
            at = haystack.find(needle.text)
            while at != -1:
                found.append((at, at + len(needle.text)))
                at = haystack.find(needle.text, at + 1)
        for scan in self._scans:
            at = 0
            while (match := scan.search(folded, at)) is not None:
                start = match.start()
                end = self._longest_at(text, folded, start, match.group())
                if end is not None:
                    found.append((start, end))
                at = start + 1
        found.sort()  # each needle's or scan's are in order already; the whole list is not
        return found

    def undecided(self, folded: bytes) -> int:
        """Where the suffix of the (folded) text that may still begin a needle starts (its
        length if none): any occurrence starting before it is complete in the text."""
        size = len(folded)
        window = max(0, size - max(self.longest - 1, 0))
        started = self._long_started(folded, window)
        if started is not None:
            return started
        for at in range(max(window, size - _HEAD), size):
            suffix = folded[at:]
            index = bisect.bisect_left(self._heads, suffix)
            if index < len(self._heads) and self._heads[index].startswith(suffix):
                return at
        return size

    def _long_started(self, folded: bytes, window: int) -> int | None:
        """The first start, from ``window`` on, of a needle longer than a head that runs
        past the end of the text (its head is then complete in the text)."""
        if self._long_pattern is None:
            return None
        at = window
        while (match := self._long_pattern.search(folded, at, len(folded) - 1)) is not None:
            start = match.start()
            suffix = folded[start:]
            if any(needle.startswith(suffix) for needle in self._long[match.group()]):
                return start
            at = start + 1
        return None

    def _longest_at(self, text: bytes, folded: bytes, start: int, head: bytes) -> int | None:
        for needle in self._candidates[head]:
            haystack = folded if needle.folded else text
            if haystack.startswith(needle.text, start):
                return start + len(needle.text)
        return None


def _by_first_bytes(heads: list[bytes]) -> list[list[bytes]]:
    """``heads`` (sorted) in groups of at most :data:`_FIRST_BYTES_PER_SCAN` first bytes."""
    groups: list[list[bytes]] = []
    firsts = 0
    for head in heads:
        if not groups or head[0] != groups[-1][-1][0]:
            firsts += 1
            if not groups or firsts > _FIRST_BYTES_PER_SCAN:
                groups.append([])
                firsts = 1
        groups[-1].append(head)
    return groups


def _candidates(by_head: dict[bytes, list[_Needle]]) -> dict[bytes, tuple[_Needle, ...]]:
    """For each head, the needles that may match where the scan found it: those whose
    head is a prefix of it (the scan reports the longest head), longest first."""
    candidates: dict[bytes, tuple[_Needle, ...]] = {}
    for head in by_head:
        found = [n for size in range(1, len(head) + 1) for n in by_head.get(head[:size], ())]
        candidates[head] = tuple(sorted(found, key=lambda n: len(n.text), reverse=True))
    return candidates


def _trie_pattern(words: Iterable[bytes]) -> bytes:
    """A pattern matching any of ``words``, the longest where several match: shared
    prefixes are written once, so a scan tries at most one branch per distinct byte."""
    root: _Trie = {}
    for word in words:
        node = root
        for byte in word:
            node = node.setdefault(byte, {})
        node[_END] = {}
    return _branches(root)


def _branches(node: _Trie) -> bytes:
    branches = []
    for byte, child in sorted(node.items()):
        if byte == _END:
            continue
        literal = bytearray([byte])
        while len(child) == 1 and _END not in child:  # a chain is one literal
            ((byte, child),) = child.items()
            literal.append(byte)
        rest = _branches(child)
        if rest:  # greedy: a longer word is tried before the one ending here
            rest = b"(?:" + rest + (b")?" if _END in child else b")")
        branches.append(re.escape(bytes(literal)) + rest)
    return b"|".join(branches)
