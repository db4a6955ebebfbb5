"""The embedded stack's STS refuses what AWS would: untrusted roles, unknown issuers,
unverifiable or expired tokens, wrong external IDs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import jwt
import pytest
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.asymmetric import rsa
from moto import mock_aws

from runplane.local.sts_trust import TrustCheckingSts

ISSUER = "http://127.0.0.1:8123/prod"
HOST = "127.0.0.1:8123/prod"
ACCOUNT = "123456789012"
PROVIDER = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{HOST}"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwks() -> dict[str, Any]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    return {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}


def token(sub: str, *, aud: str = "sts.amazonaws.com", key: Any = KEY, ttl: int = 600) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": sub, "aud": aud, "iat": now, "exp": now + ttl}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


def trust(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def web_identity(condition: dict[str, Any], effect: str = "Allow") -> dict[str, Any]:
    return {
        "Effect": effect,
        "Principal": {"Federated": PROVIDER},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": condition,
    }


ORG_A_PLAN = {
    "StringEquals": {f"{HOST}:aud": "sts.amazonaws.com"},
    "StringLike": {f"{HOST}:sub": "organization:org-a:workspace:*:run_phase:plan"},
}


@pytest.fixture
def sts() -> Iterator[TrustCheckingSts]:
    with mock_aws():
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_open_id_connect_provider(
            Url=ISSUER, ClientIDList=["sts.amazonaws.com"], ThumbprintList=["a" * 40]
        )
        iam.create_role(
            RoleName="org-a-plan", AssumeRolePolicyDocument=trust(web_identity(ORG_A_PLAN))
        )
        yield TrustCheckingSts(boto3.client("sts", region_name="us-east-1"), iam, _jwks)


def assume(sts: TrustCheckingSts, role: str, web_token: str) -> Any:
    return sts.assume_role_with_web_identity(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}",
        RoleSessionName="runplane-plan-run-1",
        WebIdentityToken=web_token,
    )


def refusal(sts: TrustCheckingSts, role: str, web_token: str) -> str:
    with pytest.raises(ClientError) as refused:
        assume(sts, role, web_token)
    return str(refused.value.response["Error"]["Code"])


def test_a_role_trusting_the_organizations_plans_is_assumed_by_its_plan(
    sts: TrustCheckingSts,
) -> None:
    issued = assume(sts, "org-a-plan", token("organization:org-a:workspace:ws-1:run_phase:plan"))
    assert issued["AssumedRoleUser"]["Arn"].endswith(":assumed-role/org-a-plan/runplane-plan-run-1")


@pytest.mark.parametrize(
    ("sub", "why"),
    [
        ("organization:org-b:workspace:ws-1:run_phase:plan", "another organization"),
        ("organization:org-a:workspace:ws-1:run_phase:apply", "the apply phase"),
        ("organization:org-a:workspace:ws-1:run_phase:plan:x", "a longer subject"),
    ],
)
def test_a_subject_the_trust_policy_does_not_name_is_denied(
    sts: TrustCheckingSts, sub: str, why: str
) -> None:
    assert refusal(sts, "org-a-plan", token(sub)) == "AccessDenied", why


def test_an_unlisted_audience_unknown_key_or_expired_token_is_not_verified(
    sts: TrustCheckingSts,
) -> None:
    sub = "organization:org-a:workspace:ws-1:run_phase:plan"
    assert refusal(sts, "org-a-plan", token(sub, aud="other")) == "InvalidIdentityToken"
    assert refusal(sts, "org-a-plan", token(sub, key=OTHER_KEY)) == "InvalidIdentityToken"
    assert refusal(sts, "org-a-plan", token(sub, ttl=-10)) == "ExpiredTokenException"
    assert refusal(sts, "org-a-plan", "not-a-token") == "InvalidIdentityToken"


def test_a_deny_statement_wins_and_an_unknown_role_is_denied(sts: TrustCheckingSts) -> None:
    iam = sts._iam
    deny_ws2 = web_identity(
        {"StringLike": {f"{HOST}:sub": "organization:org-a:workspace:ws-2:*"}}, effect="Deny"
    )
    iam.create_role(
        RoleName="guarded", AssumeRolePolicyDocument=trust(web_identity(ORG_A_PLAN), deny_ws2)
    )
    assert assume(sts, "guarded", token("organization:org-a:workspace:ws-1:run_phase:plan"))
    assert refusal(sts, "guarded", token("organization:org-a:workspace:ws-2:run_phase:plan")) == (
        "AccessDenied"
    )
    assert refusal(sts, "missing", token("organization:org-a:workspace:ws-1:run_phase:plan")) == (
        "AccessDenied"
    )


def test_string_like_treats_only_star_and_question_mark_as_wildcards(
    sts: TrustCheckingSts,
) -> None:
    iam = sts._iam
    bracket = web_identity({"StringLike": {f"{HOST}:sub": "organization:[ab]:*"}})
    iam.create_role(RoleName="brackets", AssumeRolePolicyDocument=trust(bracket))
    assert refusal(sts, "brackets", token("organization:a:workspace:w:run_phase:plan")) == (
        "AccessDenied"
    )
    assert assume(sts, "brackets", token("organization:[ab]:workspace:w:run_phase:plan"))


def test_an_external_id_must_match_the_trust_policys(sts: TrustCheckingSts) -> None:
    sts._iam.create_role(
        RoleName="third-party",
        AssumeRolePolicyDocument=trust(
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"sts:ExternalId": "ext-1234"}},
            }
        ),
    )
    role = f"arn:aws:iam::{ACCOUNT}:role/third-party"
    assert sts.assume_role(RoleArn=role, RoleSessionName="s1", ExternalId="ext-1234")
    with pytest.raises(ClientError) as refused:
        sts.assume_role(RoleArn=role, RoleSessionName="s1", ExternalId="wrong")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
