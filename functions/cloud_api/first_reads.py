"""The reads a phase's engine starts with, answered by one call.

The engine's ``remote`` backend starts a phase by reading its organization's
entitlements, its workspace by name, the workspace's current state version, that
version's state and (to plan) the workspace's variables: one call each, each
authenticated on its own. The relay in the sandbox (``runplane.runner.relay``) asks
for all of them at once with the engine's own credentials and answers the engine's
reads from what it got, as it answers a repeated read.

Each answer is the one its route gives: the sub-request is resolved by the Cloud
API itself, as the same principal, with the same authentication. The items that
authentication read are served to each sub-request (every one is a read, so all of
them see that one consistent snapshot). A state larger than ``MAX_BUNDLED_STATE`` is
left out; the engine downloads it itself.

An apply's engine also locks its workspace before it applies and unlocks it after it
uploads its state. For a runner session both only check the apply authority the session
holds (the run took the lock before its sandbox started, and releases it when it commits
the result), so they are answered here too, as they answer now: the relay answers the
engine's lock and unlock from them, once each. A refusal is left out: the engine's own
call then meets it.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.cloud_api.request import Reply, json_reply, principal
from functions.isolation import current_event
from runplane.wiring import read_ahead_context, read_ahead_in, services

router = Router()  # type: ignore[no-untyped-call]

FIRST_READS = "/api/v2/runner/first-reads"
API = "/api/v2/"
# A bundle travels in one Lambda response (at most 6 MB, base64 adding a third).
MAX_BUNDLED_STATE = 1024 * 1024
_BUNDLED_STATUSES = frozenset({200, 204, 404})
# An apply's lock and unlock, answered only when they confirm the session's authority.
_APPLY_CONFIRMATIONS = ("lock", "unlock")


@dataclass(frozen=True)
class _Answer:
    method: str
    route: str
    status: int
    headers: list[list[str]]
    body: bytes

    def to_wire(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.route,
            "status": self.status,
            "headers": self.headers,
            "body": base64.b64encode(self.body).decode("ascii"),
        }


@router.get(FIRST_READS)
def first_reads() -> Reply:
    who = principal()
    start = services().workspaces.engine_start(who)
    org, workspace = _segment(start.organization_name), start.workspace
    # Every answer reads from the items its own request would have: this request's
    # authentication's and the ones read for all of them.
    outer = current_event().raw_event
    authorizer = dict((outer.get("requestContext") or {}).get("authorizer") or {})
    authorizer.update(read_ahead_context(read_ahead_in(authorizer).with_(start.items)))
    routes = [
        f"organizations/{org}/entitlement-set",
        f"organizations/{org}/workspaces/{_segment(workspace.name)}",
        f"workspaces/{workspace.id}/current-state-version",
    ]
    answers = [_resolved(outer, authorizer, route) for route in routes]
    current = answers[-1]
    if current.status == 200:
        version = json.loads(current.body)["data"]
        if int(version["attributes"].get("size") or 0) <= MAX_BUNDLED_STATE:
            download = f"state-versions/{_segment(version['id'])}/download"
            state = _resolved(outer, authorizer, download)
            # A version that does not record its size is measured as read.
            if len(state.body) <= MAX_BUNDLED_STATE:
                answers.append(state)
    if who.phase == "plan":
        answers.append(_resolved(outer, authorizer, f"workspaces/{workspace.id}/vars"))
    kept = [answer.to_wire() for answer in answers if answer.status in _BUNDLED_STATUSES]
    if who.phase == "apply":
        for action in _APPLY_CONFIRMATIONS:
            route = f"workspaces/{workspace.id}/actions/{action}"
            confirmed = _resolved(outer, authorizer, route, method="POST")
            if confirmed.status == 200:
                kept.append(confirmed.to_wire())
    return json_reply(200, {"answers": kept}, content_type="application/json")


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _resolved(
    outer: dict[str, Any], authorizer: dict[str, Any], route: str, *, method: str = "GET"
) -> _Answer:
    """``<method> /api/v2/<route>`` (with no body) as the Cloud API answers ``outer``'s
    caller, authorized as ``authorizer`` says."""
    from functions.cloud_api.app import resolve

    context = dict(outer.get("requestContext") or {})
    full_path = str(context.get("path") or outer["path"])
    stage_prefix = full_path[: -len(outer["path"])] if full_path.endswith(outer["path"]) else ""
    path = f"{API}{route}"
    event = {
        **outer,
        "httpMethod": method,
        "path": path,
        "pathParameters": {"proxy": route},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
        "requestContext": {
            **context,
            "httpMethod": method,
            "path": f"{stage_prefix}{path}",
            "authorizer": authorizer,
        },
    }
    response = resolve(event, None)
    body = response.get("body") or ""
    raw = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode("utf-8")
    multi = response.get("multiValueHeaders") or {}
    headers = [[key, value] for key, values in multi.items() for value in values] or [
        [key, value] for key, value in (response.get("headers") or {}).items()
    ]
    return _Answer(method, route, int(response["statusCode"]), headers, raw)
