"""The principal as an API Gateway authorizer passes it to handlers.

Apart from the identity service so that a handler reading its caller loads only this
(not the token store, runner sessions or the JWT verifier the authorizer uses).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane.domain.identity import Permission, Principal, PrincipalKind, Unauthenticated


def encode_principal(principal: Principal) -> dict[str, str]:
    """Authorizer context values must be strings: the principal travels as JSON."""
    body: dict[str, Any] = {
        "kind": principal.kind.value,
        "id": principal.id,
        "organization_id": principal.organization_id,
        "permissions": sorted(p.value for p in principal.permissions),
        "display": principal.display,
        "auth_time": principal.auth_time.isoformat() if principal.auth_time else None,
        "run_id": principal.run_id,
        "workspace_id": principal.workspace_id,
        "attempt_id": principal.attempt_id,
        "sandbox_id": principal.sandbox_id,
        "phase": principal.phase,
        "inputs": list(principal.inputs),
        "user": principal.user,
        "groups": list(principal.groups),
        "team_id": principal.team_id,
    }
    return {"principal": json.dumps(body, sort_keys=True)}


def decode_principal(
    context: Mapping[str, Any] | None, source_address: str | None = None
) -> Principal:
    """The principal an authorizer put in ``requestContext.authorizer``; none is 401.
    ``source_address`` is the request's, as API Gateway saw it."""
    if not context or "principal" not in context:
        raise Unauthenticated()
    body = json.loads(context["principal"])
    auth_time = body.get("auth_time")
    return Principal(
        kind=PrincipalKind(body["kind"]),
        id=body["id"],
        organization_id=body["organization_id"],
        permissions=frozenset(Permission(p) for p in body["permissions"]),
        display=body["display"],
        auth_time=datetime.fromisoformat(auth_time) if auth_time else None,
        run_id=body.get("run_id"),
        workspace_id=body.get("workspace_id"),
        attempt_id=body.get("attempt_id"),
        sandbox_id=body.get("sandbox_id"),
        phase=body.get("phase"),
        inputs=tuple(body.get("inputs") or ()),
        user=body.get("user"),
        groups=tuple(body.get("groups") or ()),
        team_id=body.get("team_id"),
        source_address=source_address,
    )


def source_address(event: Mapping[str, Any]) -> str | None:
    """The address an API Gateway proxy event came from (absent in a direct invocation)."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    address = identity.get("sourceIp")
    return address if isinstance(address, str) and address else None
