"""Who signs users in: a Cognito user pool and app client, or an existing issuer.

Runplane reads a user's organization from the ``custom:organization`` claim and
their roles from ``cognito:groups`` (``runplane.services.identity``); the pool
has that attribute (writable by administrators only) and one group per role.
The authorizer verifies tokens against a fixed key set, which a small custom
resource reads from the pool's JWKS URL at deploy time.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs import assets
from runplane.domain.identity import ROLES
from runplane.services.identity import ORGANIZATION_CLAIM

JWKS_FETCHER = Path(__file__).resolve().parents[1] / "custom_resources" / "jwks.py"
ORGANIZATION_ATTRIBUTE = ORGANIZATION_CLAIM.removeprefix("custom:")


class Identity(Construct):
    """``issuer``, ``audience`` and ``jwks`` are what the authorizer verifies against."""

    def __init__(self, scope: Construct, construct_id: str, *, config: RunplaneConfig) -> None:
        super().__init__(scope, construct_id)
        self.user_pool: cognito.UserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        if not config.uses_cognito:
            assert config.jwt_issuer
            assert config.jwt_audience
            assert config.jwt_jwks
            self.issuer = config.jwt_issuer
            self.audience = config.jwt_audience
            self.jwks = config.jwt_jwks
            return

        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        pool = cognito.UserPool(
            self,
            "Users",
            user_pool_name=config.prefix,
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True, username=True),
            sign_in_case_sensitive=False,
            standard_attributes=cognito.StandardAttributes(
                email=cognito.StandardAttribute(required=True, mutable=True)
            ),
            custom_attributes={
                ORGANIZATION_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=64, mutable=True)
            },
            password_policy=cognito.PasswordPolicy(
                min_length=14,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(sms=False, otp=True),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=cognito.FeaturePlan.PLUS,
            standard_threat_protection_mode=cognito.StandardThreatProtectionMode.FULL_FUNCTION,
            deletion_protection=config.retain_data,
            removal_policy=removal,
        )
        for role in sorted(ROLES):
            cognito.CfnUserPoolGroup(
                self,
                f"Group{role.capitalize()}",
                user_pool_id=pool.user_pool_id,
                group_name=role,
                description=f"Runplane role {role}",
            )
        # Users may edit their profile but never the organization they belong to.
        writable = cognito.ClientAttributes().with_standard_attributes(email=True)
        client = pool.add_client(
            "Cli",
            user_pool_client_name=f"{config.prefix}-cli",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=True),
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            refresh_token_validity=Duration.days(1),
            write_attributes=writable,
        )
        self.user_pool, self.client = pool, client
        stack = Stack.of(self)
        self.issuer = f"https://cognito-idp.{stack.region}.{stack.url_suffix}/{pool.user_pool_id}"
        self.audience = client.user_pool_client_id
        self.jwks = self._fetched_jwks(config, f"{self.issuer}/.well-known/jwks.json")

    def _fetched_jwks(self, config: RunplaneConfig, url: str) -> str:
        logs_group = logs.LogGroup(
            self,
            "JwksFetcherLogs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            "JwksFetcherRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Runplane deploy-time JWKS fetch: writes its own logs, nothing else",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[logs_group.log_group_arn],
            )
        )
        fetcher = lambda_.Function(
            self,
            "JwksFetcher",
            description="Runplane: reads the user pool's JWKS for the authorizer (deploy time)",
            runtime=assets.RUNTIME,
            architecture=assets.ARCHITECTURE,
            handler="index.handler",
            code=lambda_.Code.from_inline(JWKS_FETCHER.read_text(encoding="utf-8")),
            role=role,
            timeout=Duration.seconds(30),
            log_group=logs_group,
        )
        fetched = CustomResource(
            self,
            "Jwks",
            service_token=fetcher.function_arn,
            resource_type="Custom::RunplaneJwks",
            properties={"JwksUrl": url},
        )
        return fetched.get_att_string("Jwks")
