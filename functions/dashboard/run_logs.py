"""A run's logs as the run page shows and follows them.

Reads go through the same log service as the API; what is shown of them is the pure
log view (``runplane.domain.log_view``): styled segments without terminal controls or
sandbox paths. A read of a log that goes on stops after its last whole line, so the
next read (from the returned offset, in bytes) never starts inside an escape
sequence, a UTF-8 character or a path, and each read renders as the whole log would.
"""

from __future__ import annotations

from typing import Any

from runplane.domain.capabilities import Phase
from runplane.domain.errors import NotFound
from runplane.domain.identity import Principal
from runplane.domain.log_view import readable_end, render
from runplane.domain.logs import DEFAULT_READ_BYTES
from runplane.wiring import services


def shown(principal: Principal, run_id: str, phase: Phase) -> dict[str, Any] | None:
    """A phase's log for the page's first render (None: the phase has not started)."""
    try:
        read = services().logs.read(principal, run_id, phase, 0, DEFAULT_READ_BYTES)
    except NotFound:
        return None
    view = _view(read.data, read.offset, more=not read.at_end)
    return {
        **view,
        "truncated": read.next_offset < read.length,
        "complete": read.complete,
        "at_end": read.at_end,
    }


def followed(
    principal: Principal, run_id: str, phase: Phase, offset: int, size: int
) -> dict[str, Any]:
    """The next bytes of a phase's log from ``offset``, for the page to append.

    ``text`` is the bytes as stored (what older pages append); ``segments`` is what the
    page shows of them, as ``[classes, text]`` pairs. Raises ``NotFound`` if the phase
    has not started."""
    read = services().logs.read(principal, run_id, phase, offset, size)
    view = _view(read.data, read.offset, more=not read.at_end)
    return {
        "text": view["text"],
        "segments": [list(segment) for segment in view["segments"]],
        "offset": read.offset,
        "next_offset": view["next_offset"],
        "length": read.length,
        "complete": read.complete,
        "at_end": read.at_end,
    }


def _view(data: bytes, offset: int, *, more: bool) -> dict[str, Any]:
    end = readable_end(data, more=more)
    text = data[:end].decode("utf-8", "replace")
    return {"text": text, "segments": render(text), "next_offset": offset + end}
