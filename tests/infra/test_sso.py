"""Single sign-on in the synthesized stack: federated providers, what they may map,
the clients that list them, token lifetimes and the CLI's loopback client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.config import ConfigError, RunplaneConfig
from tests.infra.synth import Synthesized, ref, synthesize

OKTA = {
    "name": "Okta",
    "type": "oidc",
    "organization": "org-acme",
    "issuer": "https://acme.okta.com",
    "clientId": "0oa1runplane",
    "clientSecretName": "runplane/okta-client-secret",
    "scopes": ["openid", "email", "profile", "groups"],
    "attributes": {"email": "email", "groups": "groups"},
    "groupRoles": {"platform-admins": "admin", "engineers": "developer"},
}
ENTRA = {
    "name": "Entra",
    "type": "saml",
    "organization": "org-globex",
    "metadataUrl": "https://login.microsoftonline.com/tenant/federationmetadata/2007-06/federationmetadata.xml?appid=1",
    "attributes": {
        "email": "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
        "groups": "http://schemas.microsoft.com/ws/2008/06/identity/claims/groups",
    },
}


@pytest.fixture(scope="module")
def sso_stack(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk-sso"), {"identityProviders": [OKTA, ENTRA]})


def clients(stack: Synthesized) -> dict[str, dict[str, Any]]:
    return stack.of_type("AWS::Cognito::UserPoolClient")


def test_each_provider_is_a_federated_provider_of_the_pool(sso_stack: Synthesized) -> None:
    providers = {
        p["ProviderName"]: p
        for p in sso_stack.of_type("AWS::Cognito::UserPoolIdentityProvider").values()
    }
    assert set(providers) == {"Okta", "Entra"}
    okta = providers["Okta"]
    assert okta["ProviderType"] == "OIDC"
    assert okta["ProviderDetails"]["oidc_issuer"] == "https://acme.okta.com"
    assert okta["ProviderDetails"]["authorize_scopes"] == "openid email profile groups"
    # The client secret is a dynamic reference to its secret, never its value
    secret = json.dumps(okta["ProviderDetails"]["client_secret"])
    assert "resolve:secretsmanager:runplane/okta-client-secret" in secret
    assert okta["AttributeMapping"] == {"email": "email", "custom:groups": "groups"}
    entra = providers["Entra"]
    assert entra["ProviderType"] == "SAML"
    assert entra["ProviderDetails"]["MetadataURL"] == ENTRA["metadataUrl"]


def test_no_mapping_and_no_client_can_set_the_organization(sso_stack: Synthesized) -> None:
    for provider in sso_stack.of_type("AWS::Cognito::UserPoolIdentityProvider").values():
        assert "custom:organization" not in provider.get("AttributeMapping", {})
    for client in clients(sso_stack).values():
        assert "custom:organization" not in client.get("WriteAttributes", [])
        # Nobody can rewrite their own attributes (groups) with a user-pool access token
        assert "aws.cognito.signin.user.admin" not in client.get("AllowedOAuthScopes", [])
    _, pool = sso_stack.one("AWS::Cognito::UserPool")
    groups = [a for a in pool["Schema"] if a["Name"] == "groups"]
    assert groups == [
        {
            "AttributeDataType": "String",
            "Mutable": True,
            "Name": "groups",
            "StringAttributeConstraints": {"MaxLength": "2048"},
        }
    ]


def test_the_clients_list_the_providers_and_tokens_live_an_hour(sso_stack: Synthesized) -> None:
    providers = set(sso_stack.of_type("AWS::Cognito::UserPoolIdentityProvider"))
    for client in clients(sso_stack).values():
        listed = client["SupportedIdentityProviders"]
        assert {p if isinstance(p, str) else ref(p) for p in listed} == {"COGNITO"} | providers
        assert client["IdTokenValidity"] == 60
        assert client["AccessTokenValidity"] == 60
        assert client["TokenValidityUnits"]["IdToken"] == "minutes"
        assert client["RefreshTokenValidity"] == 60
        assert "custom:groups" in client["WriteAttributes"]


def test_the_cli_client_is_public_and_calls_back_to_fixed_loopback_ports(
    sso_stack: Synthesized,
) -> None:
    (cli,) = [c for c in clients(sso_stack).values() if not c.get("GenerateSecret")]
    assert cli["AllowedOAuthFlows"] == ["code"]
    assert cli["CallbackURLs"] == [
        f"http://127.0.0.1:{port}/callback" for port in (47800, 47801, 47802)
    ]
    run_api = sso_stack.environment("functions.api.app.handler")
    assert run_api["RUNPLANE_CLI_SIGN_IN_PORTS"] == "47800,47801,47802"
    assert "RUNPLANE_CLI_SIGN_IN_CLIENT_ID" in run_api


def test_the_authorizer_and_dashboard_know_each_providers_organization(
    sso_stack: Synthesized,
) -> None:
    expected = {
        "Entra": {"organization": "org-globex", "roles": {}},
        "Okta": {
            "organization": "org-acme",
            "roles": {"platform-admins": "admin", "engineers": "developer"},
        },
    }
    for handler in ("functions.authorizer.handler.handler", "functions.dashboard.app.handler"):
        setting = sso_stack.environment(handler)["RUNPLANE_SSO_PROVIDERS"]
        assert json.loads(setting) == expected


def test_a_deployment_without_providers_lists_cognito_only(stack: Synthesized) -> None:
    assert not stack.of_type("AWS::Cognito::UserPoolIdentityProvider")
    for client in clients(stack).values():
        assert client["SupportedIdentityProviders"] == ["COGNITO"]
    assert "RUNPLANE_SSO_PROVIDERS" not in stack.environment("functions.authorizer.handler.handler")


@pytest.mark.parametrize(
    "change",
    [
        {"attributes": {"email": "email", "organization": "org"}},
        {"attributes": {"custom:organization": "org"}},
        {"groupRoles": {"x": "superuser"}},
        {"issuer": "http://acme.okta.com"},
        {"scopes": ["email"]},
        {"name": "Cognito"},
        {"name": "bad_name"},
        {"organization": ""},
        {"clientSecret": "inline-secret"},
    ],
)
def test_a_provider_that_could_misplace_people_fails_the_synth(change: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        RunplaneConfig.from_mapping({"identity_providers": json.dumps([{**OKTA, **change}])})


def test_saml_needs_one_metadata_source_and_names_are_unique(tmp_path: Path) -> None:
    both = {**ENTRA, "metadataFile": str(tmp_path / "m.xml")}
    for providers in ([both], [OKTA, {**OKTA}]):
        with pytest.raises(ConfigError):
            RunplaneConfig.from_mapping({"identity_providers": providers})
    with pytest.raises(ConfigError):
        RunplaneConfig.from_mapping({"cli_sign_in_ports": "80"})
