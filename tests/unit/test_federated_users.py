"""Mapping a federated person's token to a principal (services.identity.user_principal)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from runplane.adapters.jwt import LocalIssuer
from runplane.domain.federation import federation_from_json
from runplane.domain.identity import ROLES, Permission, Unauthenticated
from runplane.services.identity import user_principal

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ISSUER = LocalIssuer.create("https://cognito.example/pool", "cli-client")
FEDERATION = federation_from_json(
    json.dumps(
        {
            "Okta": {"organization": "org-a", "roles": {"platform-admins": "admin"}},
            "Corp SAML": {"organization": "org-b", "roles": {"ops": "operator"}},
        }
    )
)


def claims(subject: str, groups: tuple[str, ...] = (), **extra: Any) -> Any:
    """A verified token of ``subject``; ``extra`` claims by keyword (``custom__x`` is
    ``custom:x``)."""
    extra = {k.replace("__", ":"): v for k, v in extra.items()}
    token = ISSUER.issue(subject=subject, now=NOW, groups=groups, extra=extra)
    return ISSUER.verifier().verify(token, NOW)


def identities(provider: str) -> list[dict[str, str]]:
    return [{"userId": "u1", "providerName": provider, "providerType": "OIDC", "primary": "true"}]


def test_a_federated_person_belongs_to_the_providers_organization_whatever_attributes_say() -> None:
    # Given an Okta user whose token also carries another organization's attribute
    verified = claims(
        "Okta_u1",
        identities=identities("Okta"),
        custom__organization="org-b",
        custom__groups='["platform-admins","dev"]',
    )
    # When it is mapped
    principal = user_principal(verified, FEDERATION)
    # Then the organization is the one Okta is bound to, with the mapped role's permissions
    assert principal.organization_id == "org-a"
    assert principal.permissions == ROLES["admin"]
    assert principal.groups == ("dev", "platform-admins")
    assert principal.user == "Okta_u1"


def test_an_idp_group_named_like_a_role_grants_nothing_unmapped() -> None:
    verified = claims(
        "Corp SAML_u2", identities=identities("Corp SAML"), custom__groups="[admin, ops]"
    )
    principal = user_principal(verified, FEDERATION)
    assert principal.organization_id == "org-b"
    assert principal.permissions == ROLES["operator"]
    assert Permission.TOKEN_MANAGE not in principal.permissions
    assert set(principal.groups) == {"admin", "ops"}


def test_cognito_groups_and_idp_groups_are_both_kept() -> None:
    verified = claims("Okta_u3", ("reader",), identities=identities("Okta"), custom__groups="dev")
    principal = user_principal(verified, FEDERATION)
    assert principal.groups == ("reader", "dev")
    assert principal.permissions == ROLES["reader"]


def test_a_provider_the_deployment_did_not_bind_signs_nobody_in() -> None:
    verified = claims("Rogue_u4", identities=identities("Rogue"), custom__organization="org-a")
    with pytest.raises(Unauthenticated):
        user_principal(verified, FEDERATION)


def test_a_user_of_the_pool_keeps_the_organization_attribute() -> None:
    verified = claims("alice", ("developer",), custom__organization="org-b")
    principal = user_principal(verified, FEDERATION)
    assert principal.organization_id == "org-b"
    assert principal.permissions == ROLES["developer"]
    # And with no federation configured, a federated token is still no one's
    with pytest.raises(Unauthenticated):
        user_principal(claims("Okta_u1", identities=identities("Okta")))
