"""The embedded stack as an OpenID Connect issuer, over real HTTP on 127.0.0.1: a
verifier reads the discovery document and the JWKS without credentials, as a cloud's
workload identity federation does, and verifies the tokens the stack mints; every other
route of the API still wants credentials."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

import jwt
import pytest

from runplane.domain.entities import Workspace
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind
from runplane.domain.workload_identity import RunPhase, TokenRequest
from runplane.wiring import Services
from tests.e2e.conftest import Local, unique

AUDIENCE = "sts.amazonaws.com"
DIGEST = "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """A plain GET with no credentials (unless ``headers`` brings some)."""
    request = urllib.request.Request(url, headers=headers or {})  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def services(local: Local) -> Services:
    assert local.stack.services is not None
    return local.stack.services


def token_for(local: Local, organization: str, workspace: Workspace, phase: RunPhase) -> str:
    found = services(local)
    org_id = found.workspaces.organization_id_of(organization)
    request = TokenRequest(
        organization_id=org_id,
        organization_name=organization,
        workspace_id=workspace.id,
        workspace_name=workspace.name,
        run_id=found.ids.new(IdKind.RUN),
        attempt_id=found.ids.new(IdKind.ATTEMPT),
        run_phase=phase,
        run_kind=RunKind.PLAN_AND_APPLY,
        audience=AUDIENCE,
        plan_digest=DIGEST if phase is RunPhase.APPLY else None,
    )
    deadline = found.clock.now() + timedelta(hours=4)
    return found.workload_identity.issue(request, phase_deadline=deadline)


@pytest.fixture
def discovery(local: Local) -> dict[str, Any]:
    status, _, body = fetch(f"{local.url}/.well-known/openid-configuration")
    assert status == 200, body
    document: dict[str, Any] = json.loads(body)
    return document


def test_the_discovery_document_is_public_and_names_the_stack_as_issuer(local: Local) -> None:
    # When a verifier reads the discovery document with no credentials
    status, headers, body = fetch(f"{local.url}/.well-known/openid-configuration")
    # Then it is served as cacheable JSON
    assert status == 200, body
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "public, max-age=300"
    # And the issuer is the stack's own URL, its keys beside it
    document = json.loads(body)
    assert document["issuer"] == local.url
    assert document["jwks_uri"] == f"{local.url}/.well-known/jwks.json"
    assert document["id_token_signing_alg_values_supported"] == ["RS256"]
    assert document["response_types_supported"] == ["id_token"]
    assert document["subject_types_supported"] == ["public"]
    assert "runplane_plan_digest" in document["claims_supported"]


def test_the_jwks_is_public_and_publishes_the_signing_key(
    local: Local, discovery: dict[str, Any]
) -> None:
    # When the verifier follows jwks_uri with no credentials
    status, headers, body = fetch(discovery["jwks_uri"])
    # Then it gets the signing key, cacheable, as an RS256 RSA key
    assert status == 200, body
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "public, max-age=300"
    (key,) = json.loads(body)["keys"]
    assert key["kty"] == "RSA"
    assert key["alg"] == "RS256"
    assert key["use"] == "sig"
    # And it names no key ARN or account
    assert "arn:" not in body.decode()
    assert "123456789012" not in body.decode()


def test_tokens_minted_for_two_organizations_verify_with_the_published_keys(
    local: Local, discovery: dict[str, Any]
) -> None:
    # Given a workspace in the default organization and one in another organization
    found = services(local)
    mine = found.tenancy.create_workspace(
        found.workspaces.organization_id_of(local.organization), unique("oidc")
    )
    other_org, _ = local.other_organization(unique("oidc-org"))
    theirs = found.tenancy.create_workspace(
        found.workspaces.organization_id_of(other_org), unique("oidc")
    )
    # And a verifier that knows only the discovery document's jwks_uri
    keys = jwt.PyJWKClient(discovery["jwks_uri"], cache_keys=False)
    for organization, workspace, phase in (
        (local.organization, mine, RunPhase.PLAN),
        (other_org, theirs, RunPhase.APPLY),
    ):
        # When a token is minted for a phase of each
        token = token_for(local, organization, workspace, phase)
        # Then it verifies: signature by a published key, issuer, audience, expiry
        claims = jwt.decode(
            token,
            keys.get_signing_key_from_jwt(token).key,
            algorithms=["RS256"],
            audience=AUDIENCE,
            issuer=discovery["issuer"],
            options={"require": ["iss", "aud", "sub", "exp", "iat", "nbf", "jti"]},
        )
        # And names its own organization, workspace and phase
        assert claims["sub"] == (
            f"organization:{organization}:workspace:{workspace.id}:run_phase:{phase.value}"
        )
        assert claims["runplane_workspace_name"] == workspace.name
        assert claims.get("runplane_plan_digest") == (DIGEST if phase is RunPhase.APPLY else None)
        # But not for another audience
        with pytest.raises(jwt.InvalidAudienceError):
            jwt.decode(
                token,
                keys.get_signing_key_from_jwt(token).key,
                algorithms=["RS256"],
                audience="api://AzureADTokenExchange",
            )


def test_the_rest_of_the_api_still_wants_credentials(local: Local) -> None:
    # Given the issuer's documents served without credentials
    assert fetch(f"{local.url}/.well-known/jwks.json")[0] == 200
    # Then a protected route of the same API still answers 401 without them
    status, _, body = fetch(f"{local.url}/api/v1/workspaces")
    assert status == 401, body
    # And with a made-up bearer token
    status, _, _ = fetch(
        f"{local.url}/api/v1/workspaces", headers={"Authorization": "Bearer not-a-token"}
    )
    assert status == 401
    # And another path under /.well-known is not made public by these two
    status, _, _ = fetch(f"{local.url}/.well-known/anything-else")
    assert status == 401
