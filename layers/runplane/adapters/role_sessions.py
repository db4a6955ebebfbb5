"""AWS role sessions for a run's phase, from AWS STS.

Two ways in, as the workspace's settings choose:

- ``AssumeRoleWithWebIdentity`` with Runplane's workload identity token: STS checks the
  token against the role's trust policy (the issuer's IAM OIDC provider, ``aud`` and
  ``sub``); the call is unsigned, so the control plane needs no AWS permission at all;
- ``AssumeRole`` with an external ID, session tags and a source identity naming run
  and workspace: signed with the control plane's own role, for accounts that trust it.

A refusal becomes ``CloudCredentialsRefused`` with a sentence that says what to fix; an
unreachable STS, ``CloudCredentialsUnavailable``. Neither carries the token or STS's
own text (which can quote a policy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from runplane.domain.errors import CloudCredentialsRefused, CloudCredentialsUnavailable
from runplane.domain.run_credentials import AwsSession

# An STS client for a region, signed (AssumeRole) or unsigned (with a web identity token).
StsClients = Callable[[str, bool], Any]

_WHY: Mapping[str, str] = {
    "AccessDenied": "the role does not allow this caller to assume it: check its trust policy",
    "InvalidIdentityToken": (
        "STS could not verify the workload identity token: check that the account has an "
        "IAM OIDC provider for the issuer URL and audience"
    ),
    "IDPRejectedClaim": "the role's trust policy refused the token's claims (aud or sub)",
    "IDPCommunicationError": "STS could not fetch the issuer's keys (its JWKS URL)",
    "ExpiredTokenException": "the token expired before STS read it",
    "PackedPolicyTooLarge": "the session tags are too large for STS",
    "RegionDisabledException": "STS is not activated in this region for the account",
    "ValidationError": (
        "STS refused the request: the session duration may exceed the role's maximum "
        "session duration, or the role ARN may be wrong"
    ),
}


class RoleSessions:
    def __init__(self, clients: StsClients, endpoint_url: str | None = None) -> None:
        self._clients = clients
        # Handed to the engine with the credentials: the STS that issued them.
        self.endpoint_url = endpoint_url

    def with_web_identity(
        self,
        role_arn: str,
        region: str,
        session_name: str,
        token: str,
        duration: timedelta,
        *,
        explain: str,
    ) -> AwsSession:
        """``role_arn``'s session for the holder of ``token``. ``explain`` (the issuer,
        audience and subject the role must trust) ends a refusal's message."""
        return self._session(
            role_arn,
            region,
            explain,
            lambda sts: sts.assume_role_with_web_identity(
                RoleArn=role_arn,
                RoleSessionName=session_name,
                WebIdentityToken=token,
                DurationSeconds=int(duration.total_seconds()),
            ),
            signed=False,
        )

    def with_external_id(
        self,
        role_arn: str,
        region: str,
        session_name: str,
        external_id: str,
        duration: timedelta,
        *,
        tags: Mapping[str, str],
        source_identity: str,
        explain: str,
    ) -> AwsSession:
        """``role_arn``'s session assumed by the control plane itself, with the
        workspace's external ID, ``tags`` as session tags and ``source_identity``."""
        return self._session(
            role_arn,
            region,
            explain,
            lambda sts: sts.assume_role(
                RoleArn=role_arn,
                RoleSessionName=session_name,
                ExternalId=external_id,
                DurationSeconds=int(duration.total_seconds()),
                Tags=[{"Key": key, "Value": value} for key, value in tags.items()],
                SourceIdentity=source_identity,
            ),
            signed=True,
        )

    def _session(
        self,
        role_arn: str,
        region: str,
        explain: str,
        call: Callable[[Any], Mapping[str, Any]],
        *,
        signed: bool,
    ) -> AwsSession:
        try:
            issued = call(self._clients(region, signed))["Credentials"]
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", "Unknown"))
            why = _WHY.get(code, "STS refused the request")
            raise CloudCredentialsRefused(
                f"AWS STS refused to issue credentials for role {role_arn} ({code}): {why}. "
                f"{explain}"
            ) from None
        except BotoCoreError as error:
            raise CloudCredentialsUnavailable(
                f"AWS STS could not be reached to issue credentials for role {role_arn} "
                f"({type(error).__name__}); the phase was not started"
            ) from None
        return AwsSession(
            role_arn=role_arn,
            region=region,
            access_key_id=issued["AccessKeyId"],
            secret_access_key=issued["SecretAccessKey"],
            session_token=issued["SessionToken"],
            expiration=issued["Expiration"],
        )
