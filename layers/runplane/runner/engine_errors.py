"""The engine driver's errors."""

from __future__ import annotations

from collections.abc import Sequence


class EngineError(Exception):
    """Base of every error raised by the engine driver."""


class EngineNotFound(EngineError):
    """No usable engine binary: the pinned path is wrong, or nothing is on PATH."""


class EngineTimeout(EngineError):
    """A command ran past its timeout; its whole process group was killed."""

    def __init__(
        self, command: Sequence[str], timeout_seconds: float, step: str | None = None
    ) -> None:
        self.command = tuple(command)
        self.timeout_seconds = timeout_seconds
        # Said in the step's words: the command line names the sandbox's paths.
        super().__init__(
            f"{_named(step)} did not finish within {timeout_seconds:g} s; the engine was stopped"
        )


class EngineCommandFailed(EngineError):
    """A command whose output is a value (``show -json``, ``version``) exited non-zero."""

    def __init__(self, command: Sequence[str], exit_code: int, step: str | None = None) -> None:
        self.command = tuple(command)
        self.exit_code = exit_code
        super().__init__(f"{_named(step)} failed: the engine exited with {exit_code}")


class EngineOutputTooLarge(EngineError):
    """A command printed more than the driver accepts; the command was killed."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        super().__init__(f"engine output exceeds the {limit_bytes} byte limit")


class EngineOutputInvalid(EngineError):
    """A command's output could not be understood (for example, not a JSON object)."""


def _named(step: str | None) -> str:
    """A step as a message's subject (the command line is kept out of messages)."""
    return step or "The engine's command"
