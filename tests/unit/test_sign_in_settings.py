"""Hosted-UI sign-in settings: all or nothing, secure URLs, the secret kept out of sight."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from pydantic import ValidationError

from runplane.adapters import aws
from runplane.settings import Settings

COMPLETE = {
    "RUNPLANE_JWT_ISSUER": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_pool",
    "RUNPLANE_SIGN_IN_DOMAIN": "https://runplane-prod.auth.us-east-1.amazoncognito.com",
    "RUNPLANE_SIGN_IN_CLIENT_ID": "client-1",
    "RUNPLANE_SIGN_IN_CLIENT_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:x",
    "RUNPLANE_SIGN_IN_REDIRECT_URI": "https://runplane.example.com/ui/oauth2/callback",
}


def test_without_a_hosted_ui_domain_sign_in_is_off() -> None:
    assert not Settings.from_env({}).hosted_ui_sign_in
    assert Settings.from_env(COMPLETE).hosted_ui_sign_in


@pytest.mark.parametrize(
    "missing",
    [
        "RUNPLANE_JWT_ISSUER",
        "RUNPLANE_SIGN_IN_CLIENT_ID",
        "RUNPLANE_SIGN_IN_CLIENT_SECRET_ARN",
        "RUNPLANE_SIGN_IN_REDIRECT_URI",
    ],
)
def test_a_partial_hosted_ui_configuration_is_refused(missing: str) -> None:
    env = {k: v for k, v in COMPLETE.items() if k != missing}
    with pytest.raises(ValidationError, match="hosted-UI sign-in needs"):
        Settings.from_env(env)


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("RUNPLANE_SIGN_IN_DOMAIN", "http://auth.example.com"),
        ("RUNPLANE_SIGN_IN_REDIRECT_URI", "http://runplane.example.com/ui/oauth2/callback"),
        ("RUNPLANE_JWT_ISSUER", "ftp://issuer.example.com"),
        ("RUNPLANE_SIGN_IN_DOMAIN", "https://"),
    ],
)
def test_tokens_and_the_client_secret_travel_over_https_only(name: str, url: str) -> None:
    with pytest.raises(ValidationError, match="https URL"):
        Settings.from_env({**COMPLETE, name: url})
    # Plain HTTP is accepted on loopback (the embedded stack, tests)
    loopback = url.replace("http://", "http://127.0.0.1:9/").replace("ftp://", "http://localhost/")
    if loopback.startswith("http://"):
        assert Settings.from_env({**COMPLETE, name: loopback}).hosted_ui_sign_in


def test_an_inline_client_secret_never_shows_in_the_settings_repr() -> None:
    env: dict[str, Any] = {k: v for k, v in COMPLETE.items() if "SECRET_ARN" not in k}
    settings = Settings.from_env({**env, "RUNPLANE_SIGN_IN_CLIENT_SECRET": "very-secret-value"})
    assert "very-secret-value" not in repr(settings)
    assert "very-secret-value" not in str(settings.model_dump())
    assert settings.sign_in_client_secret is not None
    assert settings.sign_in_client_secret.get_secret_value() == "very-secret-value"


@mock_aws
def test_the_client_secret_is_read_from_secrets_manager() -> None:
    aws.forget_clients()
    client = boto3.client("secretsmanager", region_name="us-east-1")
    arn = client.create_secret(Name="runplane-dashboard-client", SecretString="from-sm")["ARN"]
    settings = Settings.from_env({**COMPLETE, "RUNPLANE_SIGN_IN_CLIENT_SECRET_ARN": arn})
    try:
        assert aws.secret_string(settings, arn) == "from-sm"
    finally:
        aws.forget_clients()
