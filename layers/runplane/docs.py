"""Render the parts of the documentation that are derived from code.

A document keeps hand-written prose around generated blocks::

    <!-- generated:NAME -->
    ...replaced on every run...
    <!-- end generated:NAME -->

``python -m runplane.docs`` (``make docs``) rewrites every block; a test fails
while any block is stale.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from runplane.domain.parts import CREATED_AS, MOVES, PartKind
from runplane.domain.run import RunStatus, apply_record_on_end
from runplane.domain.tfe_runs import REFINEMENTS, RUN_STATUS_TABLE
from runplane.domain.transitions import TRANSITIONS, WRITER_ON_ENTRY, Requires


def statuses_table() -> str:
    lines = [
        "| Status | Meaning | Ends the run | Writer reservation on entry |",
        "| --- | --- | --- | --- |",
    ]
    for status in RunStatus:
        ends = (
            "intervention" if status.needs_intervention else ("yes" if status.is_terminal else "")
        )
        lines.append(
            f"| `{status}` | {status.meaning} | {ends} | {WRITER_ON_ENTRY[status].value} |"
        )
    return "\n".join(lines)


def transitions_table() -> str:
    lines = [
        "| From | To | Allowed when | Audit event | Stages |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in TRANSITIONS:
        when = "" if row.requires is Requires.NOTHING else row.requires.value
        stages = ", ".join(f"{stage} → {status}" for stage, status in row.stages.items())
        lines.append(f"| `{row.source}` | `{row.target}` | {when} | `{row.event}` | {stages} |")
    return "\n".join(lines)


def state_diagram() -> str:
    lines = ["```mermaid", "stateDiagram-v2", "    [*] --> dispatch_pending"]
    for row in TRANSITIONS:
        lines.append(f"    {row.source} --> {row.target}")
    for status in RunStatus:
        if status.is_terminal:
            lines.append(f"    {status} --> [*]")
    lines.append("```")
    return "\n".join(lines)


def apply_record_table() -> str:
    lines = [
        "| The run ends | An apply record still open becomes |",
        "| --- | --- |",
    ]
    for status in RunStatus:
        if status.is_terminal:
            lines.append(f"| `{status}` | `{apply_record_on_end(status)}` |")
    return "\n".join(lines)


def part_moves() -> str:
    lines = []
    for kind in PartKind:
        lines += [
            f"**{kind.value}** (created `{CREATED_AS[kind]}`)",
            "",
            "| From | To | When |",
            "| --- | --- | --- |",
        ]
        lines += [f"| `{m.source}` | `{m.target}` | {m.why} |" for m in MOVES[kind]]
        if not MOVES[kind]:
            lines.append("| | | never moves: written once |")
        lines.append("")
    return "\n".join(lines).rstrip()


def tfe_run_statuses() -> str:
    lines = ["| Run status | TFE run status | Unless |", "| --- | --- | --- |"]
    for status in RunStatus:
        unless = "; ".join(
            f"{when}: `{tfe}`" for source, when, tfe in REFINEMENTS if source is status
        )
        lines.append(f"| `{status}` | `{RUN_STATUS_TABLE[status]}` | {unless} |")
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[], str]] = {
    "run-statuses": statuses_table,
    "run-transitions": transitions_table,
    "run-diagram": state_diagram,
    "apply-record-on-end": apply_record_table,
    "run-part-moves": part_moves,
    "tfe-run-statuses": tfe_run_statuses,
}

DOCUMENTS = ("docs/run-lifecycle.md", "docs/cloud-api.md")

_BLOCK = re.compile(
    r"(<!-- generated:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated:(?P=name) -->)",
    re.DOTALL,
)


def render(text: str) -> str:
    """``text`` with every generated block rewritten from code."""

    def replace(match: re.Match[str]) -> str:
        body = BLOCKS[match["name"]]()
        return f"{match[1]}{body}\n{match[4]}"

    return _BLOCK.sub(replace, text)


def main(root: Path) -> int:
    for name in DOCUMENTS:
        path = root / name
        text = path.read_text(encoding="utf-8")
        rendered = render(text)
        if rendered != text:
            path.write_text(rendered, encoding="utf-8")
            print(f"updated {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path.cwd()))
