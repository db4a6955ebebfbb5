"""Runplane as an OpenID Connect issuer: its discovery document and its keys.

Both are public (no Authorization header): a cloud's workload identity federation (AWS
IAM's OIDC provider, GCP, Azure) fetches them anonymously to verify the tokens runs
present. They hold the issuer's URL and public keys only. Both are standard documents
(OpenID Connect Discovery 1.0, RFC 7517), outside the run API's OpenAPI document.

They may be cached for five minutes: long enough to spare KMS and the function a read
per verification, short enough that a key added for a rotation is seen by every cache
soon after it is published (docs/credentials.md, "Rotating the signing key").
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.api.edge import Reply
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]

CACHE_CONTROL = "public, max-age=300"
DISCOVERY = "/.well-known/openid-configuration"
JWKS = "/.well-known/jwks.json"


def _public_document(body: dict[str, Any]) -> Reply:
    return Response(
        status_code=200,
        content_type="application/json",
        body=json.dumps(body),
        headers={"Cache-Control": CACHE_CONTROL},
    )


@router.get(DISCOVERY, include_in_schema=False)
def openid_configuration() -> Reply:
    return _public_document(services().workload_identity.discovery())


@router.get(JWKS, include_in_schema=False)
def jwks() -> Reply:
    return _public_document(services().workload_identity.jwks())
