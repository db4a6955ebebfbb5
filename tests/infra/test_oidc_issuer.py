"""The OpenID Connect issuer in the template: an RSA_2048 signing key, the issuer URL as
an output and in the run API's settings, GetPublicKey for the JWKS, Sign for exactly
one function, and a rotation's keys published in order."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import ConfigError, RunplaneConfig
from tests.infra.synth import Synthesized, ref

RUN_API = "functions.api.app.handler"
EARLIER_KEY = "arn:aws:kms:eu-west-1:111122223333:key/0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"


def _granted(stack: Synthesized, action: str) -> dict[str, list[Any]]:
    """Each function granted ``action``, with the resources it is granted it on."""
    found: dict[str, list[Any]] = {}
    for handler in stack.functions():
        for granted, resource, _ in stack.grants(stack.role_of(handler)):
            if granted in (action, "kms:*", "*"):
                found.setdefault(handler, []).append(resource)
    return found


def test_one_rsa_signing_key_that_is_kept_when_the_stack_goes(stack: Synthesized) -> None:
    # Given the default deployment, Then it has one signing key for RS256 tokens
    ((logical_id, key),) = stack.signing_keys().items()
    assert key["KeySpec"] == "RSA_2048"
    assert key["KeyUsage"] == "SIGN_VERIFY"
    # And KMS cannot rotate an asymmetric key: rotation is a new key generation
    assert key.get("EnableKeyRotation") is False
    # And the key outlives the stack (its tokens' verifiers may still need it)
    resource = stack.resources[logical_id]
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"


def test_sign_is_granted_to_exactly_one_function_on_the_current_key(stack: Synthesized) -> None:
    ((key, _),) = stack.signing_keys().items()
    signers = _granted(stack, "kms:Sign")
    # The runner's endpoints are the run API function's: it alone may sign
    assert list(signers) == [RUN_API]
    assert [ref(resource) for resource in signers[RUN_API]] == [key]


@pytest.mark.parametrize("action", ["sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"])
def test_only_the_function_issuing_run_credentials_may_assume_roles_for_runs(
    stack: Synthesized, action: str
) -> None:
    # Given the default deployment, Then one function may assume (only) roles for runs
    assumers = _granted(stack, action)
    assert list(assumers) == [RUN_API]
    assert assumers[RUN_API] == ["arn:*:iam::*:role/*"]


def test_the_run_api_may_read_the_public_key_it_publishes(stack: Synthesized) -> None:
    ((key, _),) = stack.signing_keys().items()
    publishers = _granted(stack, "kms:GetPublicKey")
    assert list(publishers) == [RUN_API]
    assert [ref(resource) for resource in publishers[RUN_API]] == [key]


def test_the_issuer_is_the_apis_url_and_the_run_api_is_configured_with_it(
    stack: Synthesized,
) -> None:
    ((key, _),) = stack.signing_keys().items()
    outputs = stack.template["Outputs"]
    # The issuer URL is the API's base URL, the one ControlPlaneUrl names
    assert outputs["OidcIssuerUrl"]["Value"] == outputs["ControlPlaneUrl"]["Value"]
    assert outputs["OidcSigningKeyArn"]["Value"] == {"Fn::GetAtt": [key, "Arn"]}
    env = stack.environment(RUN_API)
    assert env["RUNPLANE_OIDC_ISSUER_URL"] == outputs["OidcIssuerUrl"]["Value"]
    assert env["RUNPLANE_OIDC_SIGNING_KEY_IDS"] == {"Fn::GetAtt": [key, "Arn"]}
    # And no other function is configured as the issuer
    for handler in stack.functions():
        if handler != RUN_API:
            assert not any(name.startswith("RUNPLANE_OIDC_") for name in stack.environment(handler))


def test_the_custom_domain_is_the_issuer(custom_stack: Synthesized) -> None:
    outputs = custom_stack.template["Outputs"]
    assert outputs["OidcIssuerUrl"]["Value"] == "https://runplane.example.com"
    assert custom_stack.environment(RUN_API)["RUNPLANE_OIDC_ISSUER_URL"] == (
        "https://runplane.example.com"
    )


def test_during_a_rotation_the_new_key_signs_and_the_earlier_one_stays_published(
    custom_stack: Synthesized,
) -> None:
    # Given a deployment at signing key generation 2 publishing the earlier key's ARN
    ((key, props),) = custom_stack.signing_keys().items()
    assert key.startswith("OidcIssuerSigningKey2")
    assert props["KeySpec"] == "RSA_2048"
    # Then the new key is the first of the issuer's keys, the earlier one after it
    keys = custom_stack.environment(RUN_API)["RUNPLANE_OIDC_SIGNING_KEY_IDS"]
    assert keys == {"Fn::Join": ["", [{"Fn::GetAtt": [key, "Arn"]}, f",{EARLIER_KEY}"]]}
    # And both are published, while only the new one may sign
    published = _granted(custom_stack, "kms:GetPublicKey")[RUN_API]
    assert sorted(ref(r) or r for r in published) == sorted([key, EARLIER_KEY])
    signers = _granted(custom_stack, "kms:Sign")
    assert {h: [ref(r) for r in rs] for h, rs in signers.items()} == {RUN_API: [key]}


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"oidcSigningKeyGeneration": "0"}, "oidcSigningKeyGeneration"),
        ({"oidcSigningKeyGeneration": "two"}, "oidcSigningKeyGeneration"),
        ({"oidcPublishedKeyArns": "alias/runplane-oidc"}, "oidcPublishedKeyArns"),
        ({"oidcPublishedKeyArns": "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}, "oidcPublishedKeyArns"),
        ({"oidcPublishedKeyArns": f"{EARLIER_KEY},{EARLIER_KEY}"}, "oidcPublishedKeyArns"),
        (
            {"oidcPublishedKeyArns": ",".join([EARLIER_KEY[:-1] + str(n) for n in range(5)])},
            "oidcPublishedKeyArns",
        ),
    ],
)
def test_rotation_options_are_checked_before_anything_is_built(
    context: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError, match=key):
        RunplaneConfig.from_context(context.get)


def test_published_keys_are_read_in_order() -> None:
    other = EARLIER_KEY[:-1] + "0"
    config = RunplaneConfig.from_context({"oidcPublishedKeyArns": f" {EARLIER_KEY} , {other}"}.get)
    assert config.published_key_arns == (EARLIER_KEY, other)
