"""The error names the run workflow (statemachines/run.asl.json) refers to.

Task Lambdas raise these classes; the workflow's Retry and Catch match their
names. A test checks that every name the ASL uses is defined here and that
everything here is used.
"""

from __future__ import annotations

from runplane.domain.errors import (
    ConcurrentChange,
    RunEnded,
    SandboxCapacityExhausted,
    TooMuchContention,
)
from runplane.domain.sandbox_exits import SANDBOX_STOPPED

# Raised by tasks; safe to retry (the step is rebuilt from fresh reads). A full
# sandbox capacity is retried for longer, with backoff, by the runner-phase steps.
RETRYABLE: dict[str, type[Exception]] = {
    cls.__name__: cls for cls in (ConcurrentChange, TooMuchContention, SandboxCapacityExhausted)
}

# Raised by a step (or sent to a wait) when the run already ended: the
# workflow stops quietly, the run having recorded why.
ENDING: dict[str, type[Exception]] = {RunEnded.__name__: RunEnded}

# Sent to a runner phase's wait by the control plane, never raised by a task: the
# phase's sandbox stopped before its result (services/sandbox_exits.py), caught where
# a heartbeat timeout is.
SENT_TO_WAITS = (SANDBOX_STOPPED,)

# Raised by the workflow's own Fail states.
FAIL_STATES = ("RunFailed", "ApprovalWaitFailed")
