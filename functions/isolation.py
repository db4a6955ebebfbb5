"""Request isolation for Powertools resolvers served from several threads at once.

Powertools keeps the event being resolved on a class attribute shared by every
resolver (``BaseRouter.current_event``) and its routing state in the
resolver's ``context`` dict. One request at a time (Lambda) is fine; the
embedded gateway serves requests on threads, where one request could read
another caller's event (and identity) or lose its route. So each resolver
here keeps its own event, and a pool hands each in-flight request a resolver
of its own. Reusing resolvers costs ~0.1 ms a request; building one per
request ~1.3 ms (route compilation and validation models).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from runplane.wiring import identity_map, read_ahead_in

# The event being resolved on this thread, for routes declared on Routers: a Router
# included in several pooled resolvers reads its last resolver's event, not its own.
_resolving: ContextVar[APIGatewayProxyEvent | None] = ContextVar("resolving", default=None)


def current_event() -> APIGatewayProxyEvent:
    """The event this thread is resolving."""
    event = _resolving.get()
    if event is None:
        raise RuntimeError("current_event is only available while resolving a request")
    return event


class IsolatedRestResolver(APIGatewayRestResolver):
    """A REST resolver whose ``current_event`` is its own, not the class-wide one."""

    _own_event: APIGatewayProxyEvent | None = None

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEvent:
        if self._own_event is None:
            raise RuntimeError("current_event is only available while resolving a request")
        return self._own_event

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEvent) -> None:
        self._own_event = value

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        self._own_event = cast(
            APIGatewayProxyEvent, self._to_proxy_event(cast(dict[str, Any], event))
        )
        resolving = _resolving.set(self._own_event)
        # The request's identity map, holding the items the authorizer read with this
        # request's credentials to serve its first reads.
        authorizer = (cast(dict[str, Any], event).get("requestContext") or {}).get("authorizer")
        try:
            with identity_map(read_ahead_in(authorizer)):
                return super().resolve(event, context)
        finally:
            _resolving.reset(resolving)
            self._own_event = None


class ResolverPool:
    """Resolvers built on demand, each serving one request at a time, then reused."""

    def __init__(self, build: Callable[[], APIGatewayRestResolver]) -> None:
        self._build = build
        self._idle: queue.SimpleQueue[APIGatewayRestResolver] = queue.SimpleQueue()

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            app = self._idle.get_nowait()
        except queue.Empty:
            app = self._build()
        try:
            result: dict[str, Any] = app.resolve(event, context)
        finally:
            self._idle.put(app)
        return result
