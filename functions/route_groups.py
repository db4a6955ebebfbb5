"""Resolvers built per resource group, so a cold start's first request imports and
builds only the Routers its path can reach.

Each group is a Router module with the route templates it declares (a test keeps
every table equal to what its Routers declare). A request is served by a resolver
holding every group with a route its path matches, whatever the method, in the
full app's order: the routes that can match it are the full app's, so its answer
(a route's, a 404 or a validation error) is the full app's. A path no group
declares (the OpenAPI document, an unknown path, a route the table lacks) is
served by the full app.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from functions.isolation import ResolverPool

Build = Callable[[Sequence[str] | None], APIGatewayRestResolver]


def route_pattern(template: str) -> re.Pattern[str]:
    """The pattern Powertools' REST resolver matches a route's path with."""
    # Its own compiler (a trailing slash ignored, a parameter one segment), not a copy.
    compiled = APIGatewayRestResolver._compile_regex(template.rstrip("/"))
    return cast(re.Pattern[str], compiled)


class RouteGroups:
    """Resolver pools per set of groups, each built on its first request."""

    def __init__(self, groups: Mapping[str, Sequence[str]], build: Build) -> None:
        """``groups``: each group's route templates, in the order the full app
        includes them; ``build(names)``: a resolver with those groups (None: all)."""
        self._groups = [
            (name, tuple(route_pattern(t) for t in templates)) for name, templates in groups.items()
        ]
        self._build = build
        self._pools: dict[tuple[str, ...] | None, ResolverPool] = {}
        self._lock = threading.Lock()

    def groups_for(self, path: str) -> tuple[str, ...] | None:
        """The groups a request for ``path`` needs (None: the full app)."""
        found = tuple(
            name for name, patterns in self._groups if any(p.match(path) for p in patterns)
        )
        return found or None

    def pool(self, names: tuple[str, ...] | None) -> ResolverPool:
        with self._lock:
            pool = self._pools.get(names)
            if pool is None:
                pool = self._pools[names] = ResolverPool(lambda: self._build(names))
            return pool

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        names = self.groups_for(str(event.get("path") or "/"))
        return self.pool(names).resolve(event, context)
