"""Federated users: which provider, which groups, from Cognito's exact encodings."""

from __future__ import annotations

import json

import pytest

from runplane.domain.federation import (
    NotFederated,
    federation_from_json,
    idp_groups,
    provider_names,
)

# An ID token's identities claim, as Cognito issues it for a federated user.
OKTA_IDENTITIES = [
    {
        "userId": "00u1abcd",
        "providerName": "Okta",
        "providerType": "OIDC",
        "issuer": None,
        "primary": "true",
        "dateCreated": "1642699117273",
    }
]


@pytest.mark.parametrize(
    ("stored", "groups"),
    [
        # A SAML attribute with several values.
        ("[platform, dev-team]", ("dev-team", "platform")),
        # An OIDC claim that is a JSON array.
        ('["platform","dev-team"]', ("dev-team", "platform")),
        # One value, in either protocol.
        ("platform", ("platform",)),
        ("[platform]", ("platform",)),
        ("[]", ()),
        ("", ()),
        (None, ()),
        # Group names with spaces (Entra ID display names) survive both encodings.
        ("[Platform Admins, Developers]", ("Developers", "Platform Admins")),
        ('["Platform Admins"]', ("Platform Admins",)),
    ],
)
def test_the_groups_attribute_is_read_in_each_encoding_cognito_writes(
    stored: str | None, groups: tuple[str, ...]
) -> None:
    assert idp_groups(stored) == groups


def test_the_provider_comes_from_the_identities_claim_as_a_list_or_as_text() -> None:
    assert provider_names(OKTA_IDENTITIES) == ("Okta",)
    assert provider_names(json.dumps(OKTA_IDENTITIES)) == ("Okta",)
    assert provider_names(None) == ()


@pytest.mark.parametrize("claim", [[], "not json", [{"userId": "x"}], {"providerName": "Okta"}])
def test_a_malformed_identities_claim_is_refused(claim: object) -> None:
    with pytest.raises(NotFederated):
        provider_names(claim)


def test_a_provider_not_bound_is_refused_and_a_bound_one_names_its_organization() -> None:
    federation = federation_from_json(
        json.dumps({"Okta": {"organization": "org-a", "roles": {"platform": "admin"}}})
    )
    provider = federation.provider_of({"identities": OKTA_IDENTITIES})
    assert provider is not None
    assert provider.organization_id == "org-a"
    assert provider.roles_of(("platform", "other")) == ("admin",)
    other = [{**OKTA_IDENTITIES[0], "providerName": "Entra"}]
    with pytest.raises(NotFederated):
        federation.provider_of({"identities": other})
    # A user of the pool itself has no provider.
    assert federation.provider_of({"custom:organization": "org-b"}) is None


def test_linked_providers_of_two_organizations_name_none() -> None:
    federation = federation_from_json(
        json.dumps({"Okta": {"organization": "org-a"}, "Entra": {"organization": "org-b"}})
    )
    both = [*OKTA_IDENTITIES, {**OKTA_IDENTITIES[0], "providerName": "Entra"}]
    with pytest.raises(NotFederated):
        federation.provider_of({"identities": both})


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"Okta": "org-a"}',
        '{"Okta": {"organization": ""}}',
        '{"Okta": {"organization": "org-a", "roles": {"g": "superuser"}}}',
        '{"Okta": {"organization": "org-a", "attributes": {}}}',
        '{"_bad": {"organization": "org-a"}}',
    ],
)
def test_malformed_bindings_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="sso_providers"):
        federation_from_json(text)
