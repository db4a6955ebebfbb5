"""Runplane as an OpenID Connect issuer: the KMS key that signs workload identity tokens,
the keys still published after a rotation, and who may use them (docs/credentials.md).

The issuer is the API's base URL (the custom domain's, else the stage's
``execute-api`` URL): AWS IAM's OIDC provider fetches
``<issuer>/.well-known/openid-configuration`` and the JWKS it names, both served by the
run API without the authorizer (``infra/constructs/api.py``).

Least privilege: publishing the JWKS needs ``kms:GetPublicKey`` on every published key;
signing needs ``kms:Sign`` on the current key only, and only the function that issues
run credentials gets it. The runner's endpoints (``/api/v1/runner/*``, where a runner
redeems its credential capability) are served by the run API's function, so that one
function both publishes and signs; no other function can sign.

Rotation (``oidcSigningKeyGeneration``, ``oidcPublishedKeyArns``): raising the
generation creates a new key, which signs from that deployment on; the earlier key's
ARN goes in ``oidcPublishedKeyArns`` so that it stays published until the tokens it
signed have expired. Signing keys are never deleted with the stack or on rotation
(a deleted key would break every verification of its tokens): delete one by hand
once it is no longer published.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs.functions import RunplaneFunction
from infra.constructs.nag import acknowledge

PUBLISH = ("kms:GetPublicKey",)
SIGN = ("kms:Sign",)
# Assuming a workspace's role with its external ID, session tags and source identity.
ASSUME_FOR_RUNS = ("sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity")


class OidcIssuer(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RunplaneConfig,
        issuer_url: str,
        publishers: Sequence[RunplaneFunction],
        signer: RunplaneFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.issuer_url = issuer_url
        generation = config.oidc_signing_key_generation
        self.signing_key = kms.Key(
            self,
            "SigningKey" if generation == 1 else f"SigningKey{generation}",
            description=(
                f"Runplane {config.environment_name}: signs workload identity tokens "
                f"(OpenID Connect issuer, key generation {generation})"
            ),
            key_spec=kms.KeySpec.RSA_2048,
            key_usage=kms.KeyUsage.SIGN_VERIFY,
            # Asymmetric keys do not rotate in KMS: rotation is a new generation.
            enable_key_rotation=False,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # The signing key first: the settings read the first key as the signer.
        self.published_key_arns = [self.signing_key.key_arn, *config.published_key_arns]
        settings = {
            "RUNPLANE_OIDC_ISSUER_URL": issuer_url,
            "RUNPLANE_OIDC_SIGNING_KEY_IDS": ",".join(self.published_key_arns),
        }
        for function in {id(f): f for f in (*publishers, signer)}.values():
            for name, value in settings.items():
                function.function.add_environment(name, value)
        for publisher in publishers:
            publisher.role.add_to_policy(
                iam.PolicyStatement(
                    sid="OidcPublicKeys",
                    actions=list(PUBLISH),
                    resources=self.published_key_arns,
                )
            )
        # The runner API's function (the run API's, see the module docstring) is the
        # only one that may sign, and only with the current key.
        signer.role.add_to_policy(
            iam.PolicyStatement(
                sid="OidcSign", actions=list(SIGN), resources=[self.signing_key.key_arn]
            )
        )
        # The same function issues a run's AWS credentials. With a web identity token it
        # needs no permission (the token is the proof); a workspace that names an
        # external ID has its role assumed by this function's own role, tagged with the
        # run and naming it as the source identity, and only roles (of any account that
        # trusts this deployment) can be assumed so.
        signer.role.add_to_policy(
            iam.PolicyStatement(
                sid="RunCredentialsAssumeRole",
                actions=list(ASSUME_FOR_RUNS),
                resources=["arn:*:iam::*:role/*"],
            )
        )
        acknowledge(
            signer.role,
            "AwsSolutions-IAM5[Resource::arn:*:iam::*:role/*]",
            "A workspace names its own role in its own AWS account, unknown when this "
            "stack is built; the role's trust policy and external ID decide whether this "
            "deployment may assume it, and only roles match.",
        )
