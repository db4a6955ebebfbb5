"""The OpenID Connect issuer's settings: its URL and its ordered signing keys, read
from a function's environment; malformed values are refused when read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runplane.settings import Settings

KEY_A = "0b2f6c1e-1111-4a4a-9b9b-123456789abc"
KEY_B = "arn:aws:kms:eu-west-1:111122223333:key/9a8b7c6d-2222-4b4b-8c8c-abcdefabcdef"
DEPLOYED = {"RUNPLANE_TABLE_NAME": "prod-runplane", "AWS_REGION": "eu-west-1"}


def test_the_issuer_and_its_keys_come_from_the_environment_in_order() -> None:
    # Given a deployed function's environment naming the issuer and two keys
    settings = Settings.from_env(
        {
            **DEPLOYED,
            "RUNPLANE_OIDC_ISSUER_URL": "https://abc123.execute-api.eu-west-1.amazonaws.com/prod",
            "RUNPLANE_OIDC_SIGNING_KEY_IDS": f"{KEY_B}, {KEY_A}",
        }
    )
    # Then the first key is the signer, the second still published
    assert settings.oidc_signing_keys == (KEY_B, KEY_A)
    assert settings.oidc_issuer_url == "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"


def test_without_them_the_deployment_is_no_issuer() -> None:
    settings = Settings.from_env(DEPLOYED)
    assert settings.oidc_issuer_url is None
    assert settings.oidc_signing_keys == ()


@pytest.mark.parametrize(
    "url",
    [
        "https://runplane.example.com",
        "https://runplane.example.com/prod",
        "http://127.0.0.1:8700",
        "http://localhost:8700",
    ],
)
def test_an_https_issuer_or_a_loopback_one_is_accepted(url: str) -> None:
    assert Settings(oidc_issuer_url=url).oidc_issuer_url == url


@pytest.mark.parametrize(
    "url",
    [
        "http://runplane.example.com",  # tokens verified over plain http
        "https://runplane.example.com/",  # iss must equal the URL exactly: one spelling
        "https://runplane.example.com?x=1",
        "https://runplane.example.com?",
        "https://runplane.example.com#frag",
        "https://user:pw@runplane.example.com",
        "ftp://runplane.example.com",
        "runplane.example.com",
        "https://",
    ],
)
def test_any_other_issuer_url_is_refused(url: str) -> None:
    with pytest.raises(ValidationError, match="oidc_issuer_url"):
        Settings(oidc_issuer_url=url)


@pytest.mark.parametrize(
    "keys",
    [
        "alias/runplane-oidc",  # an alias can be pointed at another key
        "arn:aws:kms:eu-west-1:111122223333:alias/runplane-oidc",
        f"{KEY_A},{KEY_A}",
        "not-a-key",
        ",".join(f"0b2f6c1e-1111-4a4a-9b9b-12345678900{n}" for n in range(6)),
    ],
)
def test_signing_keys_are_named_by_id_or_arn_once_each_and_at_most_five(keys: str) -> None:
    with pytest.raises(ValidationError, match="oidc_signing_key_ids"):
        Settings(oidc_signing_key_ids=keys)


def test_a_multi_region_key_id_is_accepted() -> None:
    key = "mrk-1234abcd12ab34cd56ef1234567890ab"
    assert Settings(oidc_signing_key_ids=key).oidc_signing_keys == (key,)
