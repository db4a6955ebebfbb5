"""Hosted-UI sign-in for the dashboard: the app client, its secret and the settings
the dashboard function receives."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.synth import Synthesized, ref

DASHBOARD = "functions.dashboard.app.handler"
# The dashboard client's secret, beside the GitHub App's secrets.
DASHBOARD_SECRET = "IdentityDashboardClientSecret"


def dashboard_client(stack: Synthesized) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, p)
        for k, p in stack.of_type("AWS::Cognito::UserPoolClient").items()
        if p.get("GenerateSecret")
    ]
    return found


def dashboard_secret(stack: Synthesized) -> str:
    (found,) = [
        k for k in stack.of_type("AWS::SecretsManager::Secret") if k.startswith(DASHBOARD_SECRET)
    ]
    return found


def joined(value: Any) -> list[Any]:
    return list(value["Fn::Join"][1])


def test_the_dashboard_client_allows_only_the_code_grant_back_to_the_dashboard(
    stack: Synthesized,
) -> None:
    # Given the dashboard's app client
    _, client = dashboard_client(stack)
    rest_api, _ = stack.one("AWS::ApiGateway::RestApi")
    # Then it is confidential and may only use the authorization code grant with OpenID
    assert client["AllowedOAuthFlows"] == ["code"]
    assert client["AllowedOAuthFlowsUserPoolClient"] is True
    assert set(client["AllowedOAuthScopes"]) == {"openid", "email", "profile"}
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    assert client["PreventUserExistenceErrors"] == "ENABLED"
    assert client["EnableTokenRevocation"] is True
    # And it returns the browser only to the dashboard's callback and sign-in page
    (callback,) = client["CallbackURLs"]
    (logout,) = client["LogoutURLs"]
    for url, path in ((callback, "/ui/oauth2/callback"), (logout, "/ui/sign-in")):
        parts = joined(url)
        assert parts[0] == "https://"
        assert ref(parts[1]) == rest_api
        assert parts[-1].endswith(f"/{stack.config.environment_name}{path}")


def test_the_user_pool_has_a_hosted_ui_domain(stack: Synthesized) -> None:
    pool, _ = stack.one("AWS::Cognito::UserPool")
    _, domain = stack.one("AWS::Cognito::UserPoolDomain")
    assert ref(domain["UserPoolId"]) == pool
    assert joined(domain["Domain"]) == [
        f"runplane-{stack.config.environment_name}-",
        {"Ref": "AWS::AccountId"},
    ]


def test_the_client_secret_is_copied_into_secrets_manager_at_deploy_time(
    stack: Synthesized,
) -> None:
    # Given the secret and the resource that fills it
    pool, _ = stack.one("AWS::Cognito::UserPool")
    client, _ = dashboard_client(stack)
    secret = dashboard_secret(stack)
    _, copy = stack.one("Custom::RunplaneClientSecret")
    # Then it copies exactly the dashboard client's secret into that secret
    assert ref(copy["UserPoolId"]) == pool
    assert ref(copy["ClientId"]) == client
    assert ref(copy["SecretArn"]) == secret
    # And its function may read that client and write that secret, nothing else
    (copier,) = [
        p
        for p in stack.of_type("AWS::Lambda::Function").values()
        if "put_secret_value" in json.dumps(p.get("Code", {}))
    ]
    role = ref(copier["Role"])
    assert role is not None
    grants = {(a, json.dumps(r)) for a, r, _ in stack.grants(role) if not a.startswith("logs:")}
    assert {a for a, _ in grants} == {
        "cognito-idp:DescribeUserPoolClient",
        "secretsmanager:PutSecretValue",
    }
    for action, resource in grants:
        owner = pool if action.startswith("cognito-idp") else secret
        assert owner in resource, action
    # And the value never passes through CloudFormation (no attribute of any resource
    # carries it; the secret is filled by the copy, not by a reference)
    template = json.dumps(stack.template)
    assert '"ClientSecret"]' not in template
    assert "DescribeCognitoUserPoolClient" not in template
    assert "SecretString" not in stack.of_type("AWS::SecretsManager::Secret")[secret]


def test_the_dashboard_is_configured_for_hosted_ui_sign_in(stack: Synthesized) -> None:
    # Given the dashboard function's settings
    env = stack.environment(DASHBOARD)
    client, _ = dashboard_client(stack)
    secret = dashboard_secret(stack)
    domain, _ = stack.one("AWS::Cognito::UserPoolDomain")
    pool, _ = stack.one("AWS::Cognito::UserPool")
    # Then it names the hosted UI, its client, the secret's ARN (never the value), the
    # callback, and the pool's issuer and key set
    assert env["RUNPLANE_SIGN_IN_CLIENT_ID"] == {"Ref": client}
    assert env["RUNPLANE_SIGN_IN_CLIENT_SECRET_ARN"] == {"Ref": secret}
    assert "RUNPLANE_SIGN_IN_CLIENT_SECRET" not in env
    assert domain in json.dumps(env["RUNPLANE_SIGN_IN_DOMAIN"])
    assert joined(env["RUNPLANE_SIGN_IN_DOMAIN"])[0] == "https://"
    assert joined(env["RUNPLANE_SIGN_IN_REDIRECT_URI"])[-1].endswith("/ui/oauth2/callback")
    assert pool in json.dumps(env["RUNPLANE_JWT_ISSUER"])
    jwks, _ = stack.one("Custom::RunplaneJwks")
    assert env["RUNPLANE_JWT_JWKS"] == {"Fn::GetAtt": [jwks, "Jwks"]}
    # And it may read that secret, and the GitHub App's client secret (connecting an
    # installation), and no other
    [github_client] = [
        name
        for name in stack.of_type("AWS::SecretsManager::Secret")
        if name.startswith("GitHubAppClientSecret")
    ]
    role = stack.role_of(DASHBOARD)
    reads = [r for a, r, _ in stack.grants(role) if a.startswith("secretsmanager:")]
    assert sorted(reads, key=str) == sorted([{"Ref": secret}, {"Ref": github_client}], key=str)


def test_an_existing_issuer_keeps_the_dashboard_on_login_links(custom_stack: Synthesized) -> None:
    env = custom_stack.environment(DASHBOARD)
    assert not [name for name in env if name.startswith("RUNPLANE_SIGN_IN_")]
    assert not [
        secret
        for secret in custom_stack.of_type("AWS::SecretsManager::Secret")
        if secret.startswith(DASHBOARD_SECRET)
    ]
    assert not custom_stack.of_type("AWS::Cognito::UserPoolDomain")
