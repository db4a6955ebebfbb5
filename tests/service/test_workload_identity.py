"""The OpenID Connect issuer's use cases over an in-memory signer: the discovery
document, the published keys in rotation order, tokens signed by the current key only,
and a deployment that is not an issuer answering with a typed error."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import jwt
import pytest

from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import (
    OidcIssuerNotConfigured,
    SigningKeyUnavailable,
    WorkloadIdentityRefused,
)
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind
from runplane.domain.workload_identity import RunPhase, TokenRequest
from runplane.services.workload_identity import WorkloadIdentity
from tests.fakes import FakeClock, SeededIds
from tests.fakes_oidc import InMemorySigner
from tests.service.conftest import Tier

ISSUER = "https://runplane.example.com"
KEY_A = "1a1a1a1a-0000-4000-8000-00000000000a"
KEY_B = "2b2b2b2b-0000-4000-8000-00000000000b"
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def issuer(tier: Tier, signer: InMemorySigner, *key_ids: str) -> WorkloadIdentity:
    return WorkloadIdentity(tier.clock, tier.ids, signer, issuer=ISSUER, key_ids=key_ids)


def request(
    org: Organization, ws: Workspace, phase: RunPhase = RunPhase.PLAN, audience: str = "sts"
) -> TokenRequest:
    ids = SeededIds(len(ws.id))
    return TokenRequest(
        organization_id=org.id,
        organization_name=org.name,
        workspace_id=ws.id,
        workspace_name=ws.name,
        run_id=ids.new(IdKind.RUN),
        attempt_id=ids.new(IdKind.ATTEMPT),
        run_phase=phase,
        run_kind=RunKind.PLAN_AND_APPLY,
        audience=audience,
        plan_digest=DIGEST if phase is RunPhase.APPLY else None,
    )


def verify(token: str, jwks: dict[str, Any], audience: str = "sts") -> dict[str, Any]:
    keys = jwt.PyJWKSet.from_dict(jwks)
    key = keys[jwt.get_unverified_header(token)["kid"]]
    decoded: dict[str, Any] = jwt.decode(
        token,
        key.key,
        algorithms=["RS256"],
        audience=audience,
        issuer=ISSUER,
        # The tier's clock is not the wall clock: times are checked against it below.
        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
    )
    return decoded


@pytest.fixture
def two_workspaces(tier: Tier) -> tuple[tuple[Organization, Workspace], ...]:
    found = []
    for org_name, ws_name in (("acme", "network"), ("globex", "network")):
        org = tier.tenancy.create_organization(org_name)
        found.append((org, tier.tenancy.create_workspace(org.id, ws_name)))
    return tuple(found)


def test_the_discovery_document_names_the_issuer_and_its_keys(tier: Tier) -> None:
    # Given an issuer
    service = issuer(tier, InMemorySigner(KEY_A), KEY_A)
    # When its configuration is read
    document = service.discovery()
    # Then it names itself, where its keys are and what its tokens are
    assert document["issuer"] == ISSUER
    assert document["jwks_uri"] == f"{ISSUER}/.well-known/jwks.json"
    assert document["response_types_supported"] == ["id_token"]
    assert document["subject_types_supported"] == ["public"]
    assert document["id_token_signing_alg_values_supported"] == ["RS256"]
    assert {"sub", "aud", "runplane_plan_digest", "runplane_attempt_id"} <= set(
        document["claims_supported"]
    )


def test_the_jwks_publishes_every_configured_key_the_signer_first(tier: Tier) -> None:
    signer = InMemorySigner(KEY_A, KEY_B)
    # Given B signing and A still published (B was put in front of A)
    keys = issuer(tier, signer, KEY_B, KEY_A).jwks()["keys"]
    # Then both are published, B first, each once and for RS256 signatures only
    assert [k["kid"] for k in keys] == [
        signer.public_jwk(KEY_B)["kid"],
        signer.public_jwk(KEY_A)["kid"],
    ]
    assert all(k["kty"] == "RSA" and k["use"] == "sig" and k["alg"] == "RS256" for k in keys)
    assert all(set(k) == {"kty", "n", "e", "use", "alg", "kid"} for k in keys)


def test_an_earlier_key_kms_no_longer_serves_is_left_out_but_never_the_signing_key(
    tier: Tier, two_workspaces: tuple[tuple[Organization, Workspace], ...]
) -> None:
    (org, ws), _ = two_workspaces
    signer = InMemorySigner(KEY_A, KEY_B)
    # Given the earlier key A disabled before it was dropped from the list
    signer.unavailable.add(KEY_A)
    service = issuer(tier, signer, KEY_B, KEY_A)
    # Then the JWKS publishes B alone, and B's tokens still verify
    jwks = service.jwks()
    assert [k["kid"] for k in jwks["keys"]] == [signer.public_jwk(KEY_B)["kid"]]
    deadline = tier.clock.now() + timedelta(hours=1)
    verify(service.issue(request(org, ws), phase_deadline=deadline), jwks)
    # But with the signing key itself unavailable, no key set and no token is served
    stalled = issuer(tier, signer, KEY_A, KEY_B)
    with pytest.raises(SigningKeyUnavailable):
        stalled.jwks()
    with pytest.raises(SigningKeyUnavailable):
        stalled.issue(request(org, ws), phase_deadline=deadline)
    assert signer.signed == [KEY_B]


def test_tokens_are_signed_by_the_current_key_only(
    tier: Tier, two_workspaces: tuple[tuple[Organization, Workspace], ...]
) -> None:
    (org, ws), _ = two_workspaces
    signer = InMemorySigner(KEY_A, KEY_B)
    service = issuer(tier, signer, KEY_B, KEY_A)
    # When a token is minted
    token = service.issue(request(org, ws), phase_deadline=tier.clock.now() + timedelta(hours=2))
    # Then the current key signed it, and it verifies against the published keys
    assert signer.signed == [KEY_B]
    claims = verify(token, service.jwks())
    assert claims["sub"] == f"organization:acme:workspace:{ws.id}:run_phase:plan"
    assert claims["runplane_workspace_name"] == "network"


def test_two_organizations_tokens_name_their_own_organization_and_workspace(
    tier: Tier, two_workspaces: tuple[tuple[Organization, Workspace], ...]
) -> None:
    # Given a workspace named alike in two organizations
    service = issuer(tier, InMemorySigner(KEY_A), KEY_A)
    deadline = tier.clock.now() + timedelta(hours=1)
    subjects = []
    for org, ws in two_workspaces:
        # When each phase gets a token
        claims = verify(service.issue(request(org, ws), phase_deadline=deadline), service.jwks())
        # Then it names its own organization and workspace
        assert claims["runplane_organization_id"] == org.id
        assert claims["runplane_workspace_id"] == ws.id
        subjects.append(claims["sub"])
    # And no trust policy written for one subject trusts the other's tokens
    assert subjects[0] != subjects[1]
    assert subjects[0].startswith("organization:acme:")
    assert subjects[1].startswith("organization:globex:")


def test_an_apply_token_carries_its_plan_digest_and_a_fresh_id(
    tier: Tier, two_workspaces: tuple[tuple[Organization, Workspace], ...]
) -> None:
    (org, ws), _ = two_workspaces
    service = issuer(tier, InMemorySigner(KEY_A), KEY_A)
    deadline = tier.clock.now() + timedelta(hours=1)
    first = verify(
        service.issue(request(org, ws, RunPhase.APPLY), phase_deadline=deadline), service.jwks()
    )
    second = verify(
        service.issue(request(org, ws, RunPhase.APPLY), phase_deadline=deadline), service.jwks()
    )
    assert first["runplane_plan_digest"] == DIGEST
    assert first["sub"].endswith(":run_phase:apply")
    assert first["jti"] != second["jti"]


def test_a_lifetime_is_clipped_to_the_phase(
    tier: Tier, two_workspaces: tuple[tuple[Organization, Workspace], ...]
) -> None:
    (org, ws), _ = two_workspaces
    service = issuer(tier, InMemorySigner(KEY_A), KEY_A)
    deadline = tier.clock.now() + timedelta(minutes=5)
    claims = service.claims(request(org, ws), phase_deadline=deadline, lifetime=timedelta(hours=1))
    assert claims.expires_at <= deadline.timestamp()
    assert 295 <= claims.lifetime_seconds <= 300


def test_claims_of_another_issuer_or_expired_are_not_signed(
    tier: Tier, two_workspaces: tuple[tuple[Organization, Workspace], ...]
) -> None:
    (org, ws), _ = two_workspaces
    signer = InMemorySigner(KEY_A)
    service = issuer(tier, signer, KEY_A)
    claims = service.claims(request(org, ws), phase_deadline=tier.clock.now() + timedelta(hours=1))
    # Given claims built by another issuer
    other = WorkloadIdentity(
        tier.clock, tier.ids, signer, issuer="https://other.example.com", key_ids=[KEY_A]
    )
    with pytest.raises(WorkloadIdentityRefused):
        other.mint(claims)
    # And claims that expired before they were minted
    tier.clock.advance(timedelta(hours=1))
    with pytest.raises(WorkloadIdentityRefused):
        service.mint(claims)
    # Then nothing was signed
    assert signer.signed == []


@pytest.mark.parametrize(
    ("configured_issuer", "keys", "setting"),
    [
        (None, (KEY_A,), "oidc_issuer_url"),
        (ISSUER, (), "oidc_signing_key_ids"),
        (None, (), "oidc_issuer_url"),
    ],
)
def test_a_deployment_that_is_no_issuer_says_so_with_a_typed_error(
    tier: Tier,
    two_workspaces: tuple[tuple[Organization, Workspace], ...],
    configured_issuer: str | None,
    keys: tuple[str, ...],
    setting: str,
) -> None:
    (org, ws), _ = two_workspaces
    signer = InMemorySigner(KEY_A)
    service = WorkloadIdentity(
        FakeClock(), SeededIds(), signer, issuer=configured_issuer, key_ids=keys
    )
    for call in (
        service.discovery,
        service.jwks,
        lambda: service.issue(
            request(org, ws), phase_deadline=tier.clock.now() + timedelta(hours=1)
        ),
    ):
        with pytest.raises(OidcIssuerNotConfigured) as refused:
            call()
        assert refused.value.http_status == 503
        assert refused.value.code == "OIDC_ISSUER_NOT_CONFIGURED"
        assert f"RUNPLANE_{setting.upper()}" in refused.value.message
    assert signer.signed == []
    assert signer.published == []
