"""The runner's refusals of its inputs.

A refusal's message is written for the run's status reason: it names the offending
input (an archive member, a configuration file, a variable name) and never a value,
token or path of the sandbox, so it is safe to report as is.
"""

from __future__ import annotations

from typing import Final

_SHOWN_NAME: Final = 80


class Refused(Exception):
    """An input the runner will not use; the run ends with this message as its reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def shown(name: str) -> str:
    """``name`` quoted for a reason: control characters escaped, long names shortened."""
    text = repr(name)
    if len(text) > _SHOWN_NAME:
        text = text[: _SHOWN_NAME - 4] + "...'"
    return text
