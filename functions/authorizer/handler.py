"""API Gateway REQUEST authorizer: the caller's credentials become a principal.

Results must not be cached by the gateway (TTL 0): revoking a token or a
runner session takes effect on the next request.
"""

from __future__ import annotations

from typing import Any

from functions.observability import observed


def _header(event: dict[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name.lower():
            return str(value)
    return None


def _route(event: dict[str, Any]) -> str:
    """``"<METHOD> <path>"`` of the request being authorized (what it reads first)."""
    return f"{event.get('httpMethod') or ''} {event.get('path') or ''}"


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Loaded by the first request, not at import: the module stays cheap to import
    # and the identity service brings only what authenticating needs.
    from runplane.domain.identity import Unauthenticated
    from runplane.services.principals import encode_principal
    from runplane.wiring import read_ahead_context, services

    try:
        principal, read = services().identity.authenticate_request(
            _header(event, "Authorization"), _route(event)
        )
    except Unauthenticated:
        # API Gateway turns exactly this message into a 401.
        raise Exception("Unauthorized") from None
    return {
        "principalId": principal.ref,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": event["methodArn"]}
            ],
        },
        # What the authentication read for the call to read next travels with it.
        "context": encode_principal(principal) | read_ahead_context(read),
    }
