"""A run's log as a page shows it: styled segments of plain text, no terminal controls.

The stored log is what the sandbox wrote, and every reader (``runplane run logs``,
Terraform's remote backend, the dashboard) gets those bytes unchanged. Only the
dashboard's view is shaped here, at display time:

- **Colour.** ANSI SGR sequences become CSS classes: ``ansi-bold`` and ``ansi-fg-N``
  (N 0-7 for the 8 colours, 8-15 for their bright variants); a reset, ``22`` and ``39``
  undo them. Backgrounds, 256-colour and true-colour sequences are read past (their
  parameters never taken for other attributes) and ignored: the page's palette keeps
  every colour readable. A style ends with its line, so a log split into reads at line
  ends renders the same as the whole log.
- **Nothing else of the terminal.** Every other escape sequence (cursor movement,
  erasing, OSC titles and hyperlinks — the link's text stays — device control strings),
  an unterminated one up to its line's end, and every control character but newline and
  tab is dropped, as are the invisible characters that reorder text (bidirectional
  overrides), so a line reads as what it says.
- **No sandbox paths.** The engine names files by their absolute path in the sandbox
  (``Saved the plan to: /work/engine/plan.bin``, a provider's cache under
  ``/work/engine/config/.terraform``): the path is shown relative to the engine's
  directory or configuration (``plan.bin``, ``.terraform/…``), the way the user knows
  the files.
- **Steps.** The runner's step lines (``==> Planning``) get ``log-step``, to stand out.
- **The engine's own colours, restored.** The engine runs without colour (its colour
  codes would split a word-wrapped secret where the log's redaction looks for it), so a
  line with no style of its own is coloured by what it says, as the engine would have:
  a planned change by its symbol (indented ``+`` green, ``-``/``-/+`` red, ``~``
  yellow, ``<=`` blue), ``Error:`` bold red, ``Warning:`` bold yellow, and the summaries
  (``Plan:``, ``Apply complete!``, ``No changes.``, ``Changes to Outputs:``) bold.

The result is text for ``textContent`` or autoescaping: nothing here is markup.
Everything is a single left-to-right pass per line (linear in the log's size).
"""

from __future__ import annotations

import re
from typing import Final

Segment = tuple[str, str]
"""``(css classes, text)``: a run of the log's text in one style ("" for none)."""

STEP_PREFIX: Final = "==> "
"""How the runner starts a line naming its next step (``runplane.runner.engine``)."""

LONGEST_SEQUENCE: Final = 4096
"""Bytes an escape sequence is looked for behind a read's end (one longer is broken)."""

_ESCAPE_OR_CONTROL: Final = re.compile(
    "\x1b(?:"
    r"\[[0-?]*[ -/]*[@-~]?"  # CSI: SGR and cursor movement, erasing...
    "|[\\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\\\)?"  # OSC, DCS, SOS, PM, APC strings
    r"|[ -/]*[0-~]?"  # any other escape (or a lone ESC)
    ")"
    "|[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_SGR: Final = re.compile(r"\x1b\[([0-9;:]*)m")
# An absolute path through the sandbox's engine or runner directory (and the engine's
# configuration directory): not one inside a URL or a longer word.
_SANDBOX_PATH: Final = re.compile(
    r"(?<![\w.:/~+@-])/(?:[\w.+@-]+/)*?(?:engine|runner)/(?:config/)?(?=[^\s/])"
)
_EXTENDED_COLOUR: Final = frozenset({"38", "48", "58"})
# An engine line's colour by what it says (the classes of the ANSI colours it would use).
# A diagnostic's lines carry the box the engine draws around it ("│ Error: ...").
_BOX: Final = "│ "
_CHANGE_SYMBOLS: Final = (
    ("-/+ ", "ansi-fg-1"),
    ("+/- ", "ansi-fg-1"),
    ("<= ", "ansi-fg-4"),
    ("+ ", "ansi-fg-2"),
    ("- ", "ansi-fg-1"),
    ("~ ", "ansi-fg-3"),
)
_HEADINGS: Final = (
    ("Error: ", "ansi-bold ansi-fg-1"),
    ("Warning: ", "ansi-bold ansi-fg-3"),
    ("Plan: ", "ansi-bold"),
    ("Apply complete!", "ansi-bold ansi-fg-2"),
    ("Destroy complete!", "ansi-bold ansi-fg-2"),
    ("No changes.", "ansi-bold"),
    ("Changes to Outputs:", "ansi-bold"),
)


# A style: (bold, colour 0-15 or None). Plain tuples: a log has many thousands.
_Style = tuple[bool, int | None]
_PLAIN: Final[_Style] = (False, None)


def _classes(style: _Style) -> str:
    bold, colour = style
    names = ["ansi-bold"] if bold else []
    if colour is not None:
        names.append(f"ansi-fg-{colour}")
    return " ".join(names)


def _after(style: _Style, parameters: str) -> _Style:
    """``style`` changed by an SGR sequence's parameters."""
    bold, colour = style
    codes = parameters.split(";")
    index = 0
    while index < len(codes):
        code = codes[index] or "0"
        index += 1
        if code in _EXTENDED_COLOUR and index < len(codes):
            # 5;N or 2;R;G;B follow: skip them, they are not attributes.
            index += 2 if codes[index] == "5" else 4 if codes[index] == "2" else 0
            continue
        if not code.isdigit():
            continue  # a sub-parameter form such as 4:3: not one of ours
        number = int(code)
        if number == 0:
            bold, colour = _PLAIN
        elif number in (1, 22):
            bold = number == 1
        elif 30 <= number <= 37:
            colour = number - 30
        elif 90 <= number <= 97:
            colour = number - 90 + 8
        elif number == 39:
            colour = None
    return bold, colour


def render(text: str) -> list[Segment]:
    """``text`` (a log, or a read of it that ends at a line's end) as styled segments:
    their texts joined are the log without terminal controls or sandbox paths."""
    # Runs of one style are gathered as lists and joined once: linear, however long.
    runs: list[tuple[str, list[str]]] = []
    lines = text.split("\n")
    for number, line in enumerate(lines):
        ending = "\n" if number < len(lines) - 1 else ""
        for classes, part in _line(line + ending):
            if runs and runs[-1][0] == classes:
                runs[-1][1].append(part)
            else:
                runs.append((classes, [part]))
    return [(classes, "".join(parts)) for classes, parts in runs]


def plain(text: str) -> str:
    """``text`` as :func:`render` shows it, without the styles."""
    return "".join(part for _, part in render(text))


def readable_end(data: bytes, *, more: bool) -> int:
    """Where a read of a log should stop so that the next one starts cleanly.

    With ``more`` (the log goes on past ``data``): after the last complete line, so no
    escape sequence, style or path is cut in two; a line longer than the whole read is
    cut before its last escape sequence (which may be incomplete). The cut never
    returns nothing for a read that has something. Without ``more``, all of it.
    """
    if not more:
        return len(data)
    newline = data.rfind(b"\n")
    if newline >= 0:
        return newline + 1
    escape = data.rfind(b"\x1b", max(0, len(data) - LONGEST_SEQUENCE))
    return escape if escape > 0 else len(data)


def _line(line: str) -> list[Segment]:
    styled: list[Segment] = []
    style = _PLAIN
    position = 0
    for control in _ESCAPE_OR_CONTROL.finditer(line):
        if control.start() > position:
            styled.append((_classes(style), line[position : control.start()]))
        sgr = _SGR.fullmatch(control.group())
        if sgr is not None:
            style = _after(style, sgr.group(1))
        position = control.end()
    if position < len(line):
        styled.append((_classes(style), line[position:]))
    step = bool(styled) and styled[0][1].startswith(STEP_PREFIX)
    if step:
        return [(_with_step(classes), _SANDBOX_PATH.sub("", part)) for classes, part in styled]
    if styled and all(not classes for classes, _ in styled):
        colour = _engine_colour("".join(part for _, part in styled))
        return [(colour, _SANDBOX_PATH.sub("", part)) for _, part in styled]
    return [(classes, _SANDBOX_PATH.sub("", part)) for classes, part in styled]


def _engine_colour(line: str) -> str:
    """The classes the engine's colours would give an unstyled line ("" for none)."""
    text = line.lstrip(" ")
    indented = len(text) < len(line)
    if text.startswith(_BOX):
        text = text[len(_BOX) :]
    for heading, classes in _HEADINGS:
        if text.startswith(heading):
            return classes
    # Only an indented symbol is a planned change (`- Installing ...` is init's); the
    # engine writes a replacement's three-character symbol from the line's start.
    for symbol, classes in _CHANGE_SYMBOLS:
        if text.startswith(symbol) and (indented or len(symbol) == 4):
            return classes
    return ""


def _with_step(classes: str) -> str:
    return f"log-step {classes}".rstrip()
