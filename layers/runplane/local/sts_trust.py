"""The embedded stack's STS, checking role trust as AWS does.

moto issues credentials for any role and any token. AWS does not: ``AssumeRoleWithWebIdentity``
succeeds only if the account has an IAM OIDC provider for the token's issuer whose
client IDs list the token's audience, the token verifies against the issuer's keys and
has not expired, and the role's trust policy allows that provider with conditions the
token's ``aud`` and ``sub`` meet. This wrapper makes those checks (the subset of the
policy language trust policies for workload identity use: ``Allow`` and ``Deny``
statements, ``Principal.Federated``, ``StringEquals`` and ``StringLike`` on
``ISSUER:aud`` and ``ISSUER:sub``) against the roles and providers in moto's IAM, then
lets moto issue; so a run on the embedded stack fails the way it would in AWS when a
role does not trust it. ``AssumeRole`` with an external ID is checked against the
trust policy's ``sts:ExternalId`` condition the same way.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import boto3
import jwt
from botocore.exceptions import ClientError

# The issuer's published keys (a JWKS document), read when a token is checked.
Jwks = Callable[[], Mapping[str, Any]]


def _refused(code: str, message: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def trust_checking_sts(endpoint: str, jwks: Jwks) -> Callable[[str, bool], TrustCheckingSts]:
    """STS clients of the moto at ``endpoint``, by region and signing, checking trust
    against moto's IAM and the issuer's ``jwks``."""
    from runplane.adapters import aws

    def clients(region: str, signed: bool) -> TrustCheckingSts:
        iam = boto3.session.Session().client("iam", region_name=region, endpoint_url=endpoint)
        return TrustCheckingSts(aws.sts(endpoint, region, signed), iam, jwks)

    return clients


class TrustCheckingSts:
    """An STS client (moto's) that refuses what AWS would before it issues."""

    def __init__(self, sts: Any, iam: Any, jwks: Jwks) -> None:
        self._sts = sts
        self._iam = iam
        self._jwks = jwks

    def assume_role_with_web_identity(self, **request: Any) -> Any:
        operation = "AssumeRoleWithWebIdentity"
        token = str(request["WebIdentityToken"])
        claims = self._verified(token, operation)
        provider = self._provider(str(claims["iss"]), str(claims["aud"]), operation)
        context = {
            f"{provider['host']}:aud": str(claims["aud"]),
            f"{provider['host']}:sub": str(claims["sub"]),
        }
        self._trusted(
            str(request["RoleArn"]),
            operation,
            lambda principal: principal.get("Federated") == provider["arn"],
            "sts:AssumeRoleWithWebIdentity",
            context,
        )
        return self._sts.assume_role_with_web_identity(**request)

    def assume_role(self, **request: Any) -> Any:
        operation = "AssumeRole"
        self._trusted(
            str(request["RoleArn"]),
            operation,
            lambda principal: "AWS" in principal,
            "sts:AssumeRole",
            {"sts:ExternalId": str(request.get("ExternalId", ""))},
        )
        return self._sts.assume_role(**request)

    # -- the checks AWS makes ---------------------------------------------------------

    def _verified(self, token: str, operation: str) -> Mapping[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
            keys = {key["kid"]: key for key in self._jwks().get("keys", [])}
            key = jwt.PyJWK(keys[header["kid"]]).key
            claims: Mapping[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                options={"verify_aud": False, "require": ["iss", "sub", "aud", "exp"]},
            )
        except jwt.ExpiredSignatureError:
            raise _refused("ExpiredTokenException", "token expired", operation) from None
        except (jwt.PyJWTError, KeyError, ValueError):
            raise _refused("InvalidIdentityToken", "token not verified", operation) from None
        return claims

    def _provider(self, issuer: str, audience: str, operation: str) -> dict[str, str]:
        split = urllib.parse.urlsplit(issuer)
        host = f"{split.netloc}{split.path}".rstrip("/")
        for listed in self._iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]:
            arn = listed["Arn"]
            if not arn.endswith(f":oidc-provider/{host}"):
                continue
            provider = self._iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)
            if audience not in provider.get("ClientIDList", []):
                raise _refused("InvalidIdentityToken", "audience not listed", operation)
            return {"arn": arn, "host": host}
        raise _refused("InvalidIdentityToken", "no OIDC provider for the issuer", operation)

    def _trusted(
        self,
        role_arn: str,
        operation: str,
        principal_matches: Callable[[Mapping[str, Any]], bool],
        action: str,
        context: Mapping[str, str],
    ) -> None:
        name = role_arn.rsplit("/", 1)[-1]
        try:
            document = self._iam.get_role(RoleName=name)["Role"]["AssumeRolePolicyDocument"]
        except ClientError:
            raise _refused("AccessDenied", "no such role", operation) from None
        policy = (
            json.loads(urllib.parse.unquote(document)) if isinstance(document, str) else document
        )
        allowed = False
        for statement in _listed(policy.get("Statement")):
            if not (
                principal_matches(statement.get("Principal") or {})
                and action in _listed(statement.get("Action"))
                and _conditions_met(statement.get("Condition") or {}, context)
            ):
                continue
            if statement.get("Effect") == "Deny":
                raise _refused("AccessDenied", "denied by the trust policy", operation)
            allowed = allowed or statement.get("Effect") == "Allow"
        if not allowed:
            raise _refused("AccessDenied", "not allowed by the trust policy", operation)


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _conditions_met(conditions: Mapping[str, Any], context: Mapping[str, str]) -> bool:
    for operator, tests in conditions.items():
        for key, wanted in tests.items():
            actual = context.get(key)
            if actual is None:
                return False
            values = [str(value) for value in _listed(wanted)]
            if operator == "StringEquals":
                met = actual in values
            elif operator == "StringLike":
                met = any(_like(actual, pattern) for pattern in values)
            else:
                return False  # an operator this check does not know: as AWS, no match
            if not met:
                return False
    return True


def _like(actual: str, pattern: str) -> bool:
    """IAM's ``StringLike``: ``*`` any run of characters, ``?`` any one; nothing else
    is special (unlike a shell glob's brackets)."""
    regex = "".join(
        ".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern
    )
    return re.fullmatch(regex, actual, re.DOTALL) is not None
