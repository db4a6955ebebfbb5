"""The engine's error diagnostics, picked out of the (already redacted) run log.

A failed plan or apply is reported with the engine's own ``Error:`` blocks, so the run
review says what went wrong without opening the log. The text comes from the
:class:`~runplane.runner.bounded_log.BoundedLog`, so secrets are already redacted.
"""

from __future__ import annotations

import re
from typing import Final

from runplane.domain.log_view import STEP_PREFIX

_BOX: Final = re.compile(r"^[│╷╵]\s?")
_STARTS: Final = ("Error: ", "Warning: ")
# A line that starts something other than the diagnostic's detail.
_ENDS: Final = (STEP_PREFIX, "[runner] ", "[... ")


def engine_errors(log_text: str, limit: int) -> str:
    """The engine's ``Error:`` blocks (summary and detail), joined, at most ``limit``
    characters ("" if there is none). Blank lines inside a block collapse to one."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for raw in log_text.splitlines():
        line = _BOX.sub("", raw.rstrip())
        if line.startswith(_STARTS) or line.startswith(_ENDS):
            current = [line] if line.startswith("Error: ") else None
            if current is not None:
                blocks.append(current)
            continue
        if current is not None and (line or (current[-1] != "")):
            current.append(line)
    text = "\n\n".join("\n".join(block).strip() for block in blocks)
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"
