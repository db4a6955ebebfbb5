"""Which engine ends a signal caused: the runner reports those applies as interrupted."""

from __future__ import annotations

import pytest

from runplane.runner.engine import EngineResult


@pytest.mark.parametrize(
    ("exit_code", "signal"),
    [
        (-9, 9),  # ran directly: Popen reports the signal as a negative status
        (-15, 15),
        (137, 9),  # under bubblewrap: 128 + the signal that ended its child
        (143, 15),
        (0, None),
        (1, None),  # the engine's own error exit
        (2, None),
        (128, None),
        (255, None),  # not a signal number (past SIGRTMAX)
    ],
)
def test_a_signal_end_is_told_from_the_engine_s_own_exit(
    exit_code: int, signal: int | None
) -> None:
    # Given how an engine command ended
    result = EngineResult(exit_code, ("apply", "plan.bin"), 1.0)

    # When the runner asks which signal ended it, Then only a signal's end names one
    assert result.ended_by_signal == signal
