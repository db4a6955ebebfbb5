"""Which deployed function the current AWS calls are made for.

In AWS every Lambda process has one role, so this is never set there and changes
nothing. The embedded stack runs every handler in one process: its dispatch (the
gateway's routes, the workflow's tasks, the stream relay, the event worker, the
schedules) names the function it is running here, so that a test tier can sign
that handler's AWS calls with the credentials of that function's own role
(``runplane.local.role_credentials``) and prove each role allows what it does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

# A function's handler as CDK deploys it (``functions.api.app.handler``).
_ACTING: ContextVar[str | None] = ContextVar("runplane_acting_function", default=None)


def acting_function() -> str | None:
    """The handler the current calls are made for, if the embedded stack named one."""
    return _ACTING.get()


@contextmanager
def acting_as(handler: str) -> Iterator[None]:
    token = _ACTING.set(handler)
    try:
        yield
    finally:
        _ACTING.reset(token)


def as_function(handler: str, call: Callable[P, T]) -> Callable[P, T]:
    """``call``, run as deployed function ``handler``."""

    @wraps(call)
    def acting(*args: P.args, **kwargs: P.kwargs) -> T:
        with acting_as(handler):
            return call(*args, **kwargs)

    return acting
