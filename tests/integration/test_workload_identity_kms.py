"""Workload identity tokens signed by KMS keys (moto), verified as a cloud verifies them:
PyJWT against the issuer's JWKS, checking signature, issuer, audience and expiry. The
rotation procedure of docs/credentials.md: a new key put in front signs, tokens of the
old key verify while it is published and fail once it is dropped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import jwt
import pytest

from runplane import wiring
from runplane.adapters.token_signer import b64url, create_signing_key
from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import SigningKeyUnavailable
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind
from runplane.domain.workload_identity import RunPhase, TokenRequest
from runplane.services.workload_identity import WorkloadIdentity
from tests.integration.conftest import Stack

ISSUER = "https://runplane.example.com/prod"
AUDIENCE = "sts.amazonaws.com"
DIGEST = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"


@dataclass
class Keys:
    a: str
    b: str
    symmetric: str


@pytest.fixture
def keys(stack: Stack) -> Keys:
    kms = boto3.client("kms", region_name="us-east-1")
    # Tokens are verified against the wall clock, as a cloud does.
    stack.clock.current = datetime.now(UTC)
    return Keys(
        a=create_signing_key(kms, "alias/oidc-a", "A"),
        b=create_signing_key(kms, "alias/oidc-b", "B"),
        symmetric=kms.create_key(Description="data keys")["KeyMetadata"]["Arn"],
    )


def issuer(stack: Stack, *key_ids: str) -> WorkloadIdentity:
    """The issuer as the composition root builds it, with these keys configured."""
    return stack.rewired(
        oidc_issuer_url=ISSUER, oidc_signing_key_ids=",".join(key_ids)
    ).workload_identity


def request(stack: Stack, org: Organization, ws: Workspace, phase: RunPhase) -> TokenRequest:
    return TokenRequest(
        organization_id=org.id,
        organization_name=org.name,
        workspace_id=ws.id,
        workspace_name=ws.name,
        run_id=stack.ids.new(IdKind.RUN),
        attempt_id=stack.ids.new(IdKind.ATTEMPT),
        run_phase=phase,
        run_kind=RunKind.PLAN_AND_APPLY,
        audience=AUDIENCE,
        plan_digest=DIGEST if phase is RunPhase.APPLY else None,
    )


def mint(
    stack: Stack, service: WorkloadIdentity, org: Organization, ws: Workspace, **kw: Any
) -> str:
    phase = kw.pop("phase", RunPhase.PLAN)
    return service.issue(
        request(stack, org, ws, phase), phase_deadline=stack.clock.now() + timedelta(hours=4), **kw
    )


def verify(
    token: str, jwks: dict[str, Any], *, audience: str = AUDIENCE, issuer: str = ISSUER
) -> dict[str, Any]:
    """As a verifier does: the key the header's kid names in the JWKS, then RS256 only,
    the issuer and audience exactly, and exp, iat and nbf against the wall clock."""
    key = jwt.PyJWKSet.from_dict(jwks)[jwt.get_unverified_header(token)["kid"]]
    decoded: dict[str, Any] = jwt.decode(
        token,
        key.key,
        algorithms=["RS256"],
        audience=audience,
        issuer=issuer,
        options={"require": ["iss", "aud", "sub", "exp", "iat", "nbf", "jti"]},
    )
    return decoded


def test_a_minted_token_verifies_against_the_published_keys(
    stack: Stack, keys: Keys, org: Organization, workspace: Workspace
) -> None:
    # Given an issuer signing with a KMS key
    service = issuer(stack, keys.a)
    # When an apply's token is minted
    token = mint(stack, service, org, workspace, phase=RunPhase.APPLY)
    # Then it verifies against the JWKS: signature, issuer, audience, times
    claims = verify(token, service.jwks())
    assert claims["sub"] == f"organization:acme:workspace:{workspace.id}:run_phase:apply"
    assert claims["runplane_plan_digest"] == DIGEST
    assert claims["exp"] - claims["iat"] == 3600
    # And the JWKS is where the discovery document says it is
    assert service.discovery()["jwks_uri"] == f"{ISSUER}/.well-known/jwks.json"
    # And it names no key ARN: the kid is the key's thumbprint
    assert keys.a not in str(service.jwks())
    assert keys.a.rsplit("/", 1)[1] not in token


def test_a_token_for_another_audience_issuer_or_past_its_expiry_is_refused(
    stack: Stack, keys: Keys, org: Organization, workspace: Workspace
) -> None:
    service = issuer(stack, keys.a)
    token = mint(stack, service, org, workspace)
    jwks = service.jwks()
    with pytest.raises(jwt.InvalidAudienceError):
        verify(token, jwks, audience="api://AzureADTokenExchange")
    with pytest.raises(jwt.InvalidIssuerError):
        verify(token, jwks, issuer="https://runplane.example.com")
    # Given a token that was minted two hours ago for one hour
    stack.clock.current = datetime.now(UTC) - timedelta(hours=2)
    stale = mint(stack, service, org, workspace, lifetime=timedelta(hours=1))
    # Then it has expired
    with pytest.raises(jwt.ExpiredSignatureError):
        verify(stale, jwks)


def test_a_tampered_token_fails(
    stack: Stack, keys: Keys, org: Organization, workspace: Workspace
) -> None:
    service = issuer(stack, keys.a)
    other = stack.tenancy.create_workspace(org.id, "database")
    header, payload, signature = mint(stack, service, org, workspace).split(".")
    # Given the token's claims rewritten to name another workspace, its signature kept
    forged_claims = jwt.decode(
        f"{header}.{payload}.{signature}", options={"verify_signature": False}
    )
    forged_claims["sub"] = forged_claims["sub"].replace(workspace.id, other.id)
    forged = f"{header}.{b64url(json.dumps(forged_claims).encode())}.{signature}"
    # Then it does not verify
    with pytest.raises(jwt.InvalidSignatureError):
        verify(forged, service.jwks())
    # Nor does the token with one bit of its signature flipped
    raw = bytearray(jwt.utils.base64url_decode(signature))
    raw[-1] ^= 1
    with pytest.raises(jwt.InvalidSignatureError):
        verify(f"{header}.{payload}.{b64url(bytes(raw))}", service.jwks())


def test_rotation_a_new_key_in_front_signs_and_the_old_keys_tokens_verify_until_dropped(
    stack: Stack, keys: Keys, org: Organization, workspace: Workspace
) -> None:
    # Given tokens signed by key A before the rotation
    before = issuer(stack, keys.a)
    token_a = mint(stack, before, org, workspace)
    # When key B is put in front of A (both published)
    during = issuer(stack, keys.b, keys.a)
    token_b = mint(stack, during, org, workspace)
    published = during.jwks()
    # Then new tokens are signed by B
    kid_a, kid_b = (k["kid"] for k in reversed(published["keys"]))
    assert [k["kid"] for k in published["keys"]] == [kid_b, kid_a]
    assert jwt.get_unverified_header(token_b)["kid"] == kid_b
    assert jwt.get_unverified_header(token_a)["kid"] == kid_a
    # And tokens of both keys verify against the JWKS
    verify(token_a, published)
    verify(token_b, published)
    # But B's token fails where only A is published (before the rotation's JWKS)
    with pytest.raises(KeyError):
        verify(token_b, before.jwks())
    only_a = jwt.PyJWKSet.from_dict(before.jwks())[kid_a].key
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token_b, only_a, algorithms=["RS256"], audience=AUDIENCE)
    # When A is dropped after the longest token lifetime
    after = issuer(stack, keys.b)
    # Then A's tokens no longer verify, and B's still do
    with pytest.raises(KeyError):
        verify(token_a, after.jwks())
    verify(token_b, after.jwks())


def test_two_organizations_tokens_each_verify_with_their_own_subject(
    stack: Stack, keys: Keys, org: Organization, workspace: Workspace
) -> None:
    other_org = stack.tenancy.create_organization("globex")
    other_ws = stack.tenancy.create_workspace(other_org.id, "network")
    service = issuer(stack, keys.a)
    mine = verify(mint(stack, service, org, workspace), service.jwks())
    theirs = verify(mint(stack, service, other_org, other_ws), service.jwks())
    assert mine["sub"] == f"organization:acme:workspace:{workspace.id}:run_phase:plan"
    assert theirs["sub"] == f"organization:globex:workspace:{other_ws.id}:run_phase:plan"
    assert theirs["runplane_organization_id"] == other_org.id != mine["runplane_organization_id"]


def test_a_key_that_is_not_a_signing_key_or_missing_is_unavailable(
    stack: Stack, keys: Keys, org: Organization, workspace: Workspace
) -> None:
    missing = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-4000-8000-000000000000"
    for key in (keys.symmetric, missing):
        service = issuer(stack, key)
        for call in (service.jwks, lambda s=service: mint(stack, s, org, workspace)):
            with pytest.raises(SigningKeyUnavailable) as unavailable:
                call()
            assert key not in unavailable.value.message


def test_an_earlier_key_deleted_too_early_leaves_the_jwks_but_the_signing_key_never(
    stack: Stack, keys: Keys, org: Organization, workspace: Workspace
) -> None:
    # Given key B signing and an earlier key KMS no longer has
    gone = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-4000-8000-000000000000"
    service = issuer(stack, keys.b, gone)
    # Then the JWKS publishes B alone, and B's tokens verify
    jwks = service.jwks()
    assert len(jwks["keys"]) == 1
    verify(mint(stack, service, org, workspace), jwks)
    # But a signing key KMS does not have serves neither keys nor tokens
    with pytest.raises(SigningKeyUnavailable):
        issuer(stack, gone, keys.b).jwks()


def _get(path: str) -> dict[str, Any]:
    """The run API's Lambda handler, as API Gateway invokes it for a public GET."""
    from functions.api.app import handler

    event = {
        "httpMethod": "GET",
        "path": path,
        "resource": path,
        "headers": {},
        "queryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
        "requestContext": {"stage": "prod", "path": path},
    }
    reply: dict[str, Any] = handler(event, None)
    return reply


@pytest.mark.parametrize("path", ["/.well-known/openid-configuration", "/.well-known/jwks.json"])
def test_the_run_api_serves_the_documents_or_a_typed_503_when_not_an_issuer(
    stack: Stack, keys: Keys, path: str
) -> None:
    try:
        # Given a run API function whose environment names no issuer
        wiring.install(stack.rewired())
        # When a verifier asks for the document
        reply = _get(path)
        # Then it is told, with a code, that this deployment is not an issuer
        assert reply["statusCode"] == 503
        body = json.loads(reply["body"])
        assert body["code"] == "OIDC_ISSUER_NOT_CONFIGURED"
        assert "RUNPLANE_OIDC_ISSUER_URL" in body["message"]
        # Given the function configured as the issuer
        wiring.install(stack.rewired(oidc_issuer_url=ISSUER, oidc_signing_key_ids=keys.a))
        # Then it serves the document, cacheable for five minutes
        reply = _get(path)
        assert reply["statusCode"] == 200, reply["body"]
        headers = reply["multiValueHeaders"]
        assert headers["Content-Type"] == ["application/json"]
        assert headers["Cache-Control"] == ["public, max-age=300"]
        served = json.loads(reply["body"])
        service = issuer(stack, keys.a)
        assert served == (service.discovery() if "openid" in path else service.jwks())
        # And a key KMS cannot use is a typed 503 too, naming no key
        wiring.install(stack.rewired(oidc_issuer_url=ISSUER, oidc_signing_key_ids=keys.symmetric))
        reply = _get(path)
        if path.endswith("jwks.json"):
            assert reply["statusCode"] == 503
            assert json.loads(reply["body"])["code"] == "SIGNING_KEY_UNAVAILABLE"
            assert keys.symmetric.rsplit("/", 1)[1] not in reply["body"]
    finally:
        wiring._installed.clear()
