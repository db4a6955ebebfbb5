"""Who signs users in: a Cognito user pool and app client, or an existing issuer.

Runplane reads a user's organization from the ``custom:organization`` claim and
their roles from ``cognito:groups`` (``runplane.services.identity``); the pool
has that attribute (writable by administrators only) and one group per role.
The authorizer verifies tokens against a fixed key set, which a small custom
resource reads from the pool's JWKS URL at deploy time.

The dashboard signs people in through the pool's hosted UI
(``add_dashboard_sign_in``): a second app client, confidential (with a secret),
allowed only the authorization code grant, redirecting only to the dashboard's
callback; its secret is copied into Secrets Manager at deploy time and only the
dashboard function may read it.

Single sign-on (``identityProviders``, docs/sso.md): each external OIDC or SAML
provider becomes a federated identity provider of the pool, listed by the app
clients. Its people's organization is the one the deployment bound it to (the
``sso_providers`` setting, read with Cognito's ``identities`` claim); attribute
mappings fill profile attributes and ``custom:groups`` only, and no client may
write ``custom:organization``. No client may ask for the
``aws.cognito.signin.user.admin`` scope, so nobody can rewrite their own
``custom:groups`` between sign-ins. ``runplane login`` signs in through the CLI
app client (public, authorization code with PKCE) to a loopback callback.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy, SecretValue, Stack
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs import assets
from infra.constructs.nag import acknowledge
from infra.identity_providers import (
    GROUPS,
    PROFILE_ATTRIBUTES,
    IdentityProvider,
    sso_providers_setting,
)
from runplane.domain.federation import GROUPS_CLAIM
from runplane.domain.identity import ROLES
from runplane.services.identity import ORGANIZATION_CLAIM

JWKS_FETCHER = Path(__file__).resolve().parents[1] / "custom_resources" / "jwks.py"
SECRET_COPIER = Path(__file__).resolve().parents[1] / "custom_resources" / "client_secret.py"
# The dashboard's routes (runplane.domain.sign_in): the hosted UI returns the browser
# to the callback, and to the sign-in page after logout.
CALLBACK_PATH = "/ui/oauth2/callback"
SIGNED_OUT_PATH = "/ui/sign-in"
ORGANIZATION_ATTRIBUTE = ORGANIZATION_CLAIM.removeprefix("custom:")
GROUPS_ATTRIBUTE = GROUPS_CLAIM.removeprefix("custom:")
# The CLI's loopback callback (runplane.cli_login).
CLI_CALLBACK = "http://127.0.0.1:{port}/callback"
# Cognito's limit for a custom string attribute; room for a few dozen group names.
GROUPS_MAX_LENGTH = 2048
TOKEN_VALIDITY = Duration.hours(1)


class Identity(Construct):
    """``issuer``, ``audience`` and ``jwks`` are what the authorizer verifies against."""

    def __init__(self, scope: Construct, construct_id: str, *, config: RunplaneConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.user_pool: cognito.UserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        self.dashboard_client: cognito.UserPoolClient | None = None
        self.hosted_ui: cognito.UserPoolDomain | None = None
        self.client_secret: secretsmanager.Secret | None = None
        self.providers: list[cognito.IUserPoolIdentityProvider] = []
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
                ORGANIZATION_ATTRIBUTE: cognito.StringAttribute(
                    min_len=1, max_len=64, mutable=True
                ),
                # The external provider's groups, rewritten at each federated sign-in.
                GROUPS_ATTRIBUTE: cognito.StringAttribute(max_len=GROUPS_MAX_LENGTH, mutable=True),
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
        self.user_pool = pool
        self.providers = [self._federated(pool, provider) for provider in config.sso_providers]
        client = pool.add_client(
            "Cli",
            user_pool_client_name=f"{config.prefix}-cli",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=True),
            # runplane login: the code grant with PKCE (a public client) to a loopback
            # listener on one of a few fixed ports (Cognito matches callbacks exactly).
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[
                    cognito.OAuthScope.OPENID,
                    cognito.OAuthScope.EMAIL,
                    cognito.OAuthScope.PROFILE,
                ],
                callback_urls=[CLI_CALLBACK.format(port=port) for port in config.cli_ports],
                logout_urls=[CLI_CALLBACK.format(port=port) for port in config.cli_ports],
            ),
            supported_identity_providers=self._supported_providers(),
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            id_token_validity=TOKEN_VALIDITY,
            access_token_validity=TOKEN_VALIDITY,
            refresh_token_validity=self._refresh_validity,
            read_attributes=self._readable(),
            write_attributes=self._writable(),
        )
        self._after_providers(client)
        self.client = client
        stack = Stack.of(self)
        self.issuer = f"https://cognito-idp.{stack.region}.{stack.url_suffix}/{pool.user_pool_id}"
        self.audience = client.user_pool_client_id
        self.jwks = self._fetched_jwks(config, f"{self.issuer}/.well-known/jwks.json")

    def add_dashboard_sign_in(
        self, dashboard: lambda_.Function, dashboard_role: iam.IRole, url: str
    ) -> None:
        """Hosted-UI sign-in for the dashboard served at ``url`` (no-op with an
        existing issuer: sign-in then stays with login links)."""
        pool = self.user_pool
        if pool is None:
            return
        config = self.config
        stack = Stack.of(self)
        # Hosted-UI prefixes are global per region: the account number keeps ours unique.
        self.hosted_ui = pool.add_domain(
            "HostedUi",
            cognito_domain=cognito.CognitoDomainOptions(
                domain_prefix=f"{config.prefix}-{stack.account}"
            ),
        )
        client = pool.add_client(
            "Dashboard",
            user_pool_client_name=f"{config.prefix}-dashboard",
            generate_secret=True,
            auth_flows=cognito.AuthFlow(user_srp=True),
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[
                    cognito.OAuthScope.OPENID,
                    cognito.OAuthScope.EMAIL,
                    cognito.OAuthScope.PROFILE,
                ],
                callback_urls=[f"{url}{CALLBACK_PATH}"],
                logout_urls=[f"{url}{SIGNED_OUT_PATH}"],
            ),
            supported_identity_providers=self._supported_providers(),
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            id_token_validity=TOKEN_VALIDITY,
            access_token_validity=TOKEN_VALIDITY,
            refresh_token_validity=self._refresh_validity,
            read_attributes=self._readable(),
            write_attributes=self._writable(),
        )
        self._after_providers(client)
        secret = secretsmanager.Secret(
            self,
            "DashboardClientSecret",
            description="Runplane dashboard: the hosted-UI app client's secret (from Cognito)",
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "The value is the Cognito app client's own secret, generated by Cognito and copied "
            "in at deploy time; it changes when the app client is replaced, not by rotation.",
        )
        copier = self._inline_function(
            "ClientSecretCopier",
            SECRET_COPIER,
            "Runplane: copies the dashboard app client's secret into Secrets Manager (deploy time)",
            "Runplane deploy-time client secret copy: reads the dashboard app client, "
            "writes its secret, writes its own logs",
        )
        copier.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadClientSecret",
                actions=["cognito-idp:DescribeUserPoolClient"],
                resources=[pool.user_pool_arn],
            )
        )
        copier.add_to_role_policy(
            iam.PolicyStatement(
                sid="WriteClientSecret",
                actions=["secretsmanager:PutSecretValue"],
                resources=[secret.secret_arn],
            )
        )
        copied = CustomResource(
            self,
            "DashboardClientSecretCopy",
            service_token=copier.function_arn,
            resource_type="Custom::RunplaneClientSecret",
            properties={
                "UserPoolId": pool.user_pool_id,
                "ClientId": client.user_pool_client_id,
                "SecretArn": secret.secret_arn,
            },
        )
        # The dashboard reads the secret on its first sign-in, after the copy.
        dashboard.node.add_dependency(copied)
        dashboard_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="SignInClientSecret",
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret.secret_arn],
            )
        )
        settings = {
            "sign_in_domain": self.hosted_ui.base_url(),
            "sign_in_client_id": client.user_pool_client_id,
            "sign_in_client_secret_arn": secret.secret_arn,
            "sign_in_redirect_uri": f"{url}{CALLBACK_PATH}",
            "jwt_issuer": self.issuer,
            "jwt_jwks": self.jwks,
            "sso_providers": self.sso_providers_setting,
        }
        for name, value in settings.items():
            dashboard.add_environment(f"RUNPLANE_{name.upper()}", value)
        self.dashboard_client, self.client_secret = client, secret

    @property
    def sso_providers_setting(self) -> str:
        """The provider -> organization bindings every function that maps a person reads."""
        return sso_providers_setting(self.config.sso_providers)

    def add_cli_sign_in(self, run_api: lambda_.Function) -> None:
        """What ``GET /api/v1/sign-in/config`` tells the CLI: the hosted UI, the CLI app
        client and its loopback ports (no-op without the user pool's hosted UI)."""
        if self.hosted_ui is None or self.client is None:
            return
        settings = {
            "cli_sign_in_domain": self.hosted_ui.base_url(),
            "cli_sign_in_client_id": self.client.user_pool_client_id,
            "cli_sign_in_ports": ",".join(str(p) for p in self.config.cli_ports),
        }
        for name, value in settings.items():
            run_api.add_environment(f"RUNPLANE_{name.upper()}", value)

    def add_federation(self, *functions: lambda_.Function) -> None:
        """Give the functions that map people (the authorizer) the provider bindings."""
        if not self.providers:
            return
        for function in functions:
            function.add_environment("RUNPLANE_SSO_PROVIDERS", self.sso_providers_setting)

    def _federated(
        self, pool: cognito.UserPool, provider: IdentityProvider
    ) -> cognito.IUserPoolIdentityProvider:
        profile = {
            PROFILE_ATTRIBUTES[key]: cognito.ProviderAttribute.other(name)
            for key, name in provider.attributes.items()
            if key in PROFILE_ATTRIBUTES
        }
        custom = {}
        if GROUPS in provider.attributes:
            custom[GROUPS_CLAIM] = cognito.ProviderAttribute.other(provider.attributes[GROUPS])
        # Only profile attributes and the groups attribute: never the organization.
        mapping = cognito.AttributeMapping(**profile, custom=custom or None)
        construct_id = "Idp" + "".join(c for c in provider.name.title() if c.isalnum())
        if provider.kind == "oidc":
            return cognito.UserPoolIdentityProviderOidc(
                self,
                construct_id,
                user_pool=pool,
                name=provider.name,
                issuer_url=provider.issuer,
                client_id=provider.client_id,
                # A dynamic reference: CloudFormation reads the secret at deploy time,
                # the template holds only its name.
                client_secret=SecretValue.secrets_manager(
                    provider.client_secret_name
                ).unsafe_unwrap(),
                scopes=list(provider.scopes),
                attribute_request_method=cognito.OidcAttributeRequestMethod.GET,
                attribute_mapping=mapping,
            )
        metadata = (
            cognito.UserPoolIdentityProviderSamlMetadata.url(provider.metadata_url)
            if provider.metadata_url
            else cognito.UserPoolIdentityProviderSamlMetadata.file(
                Path(provider.metadata_file).read_text(encoding="utf-8")
            )
        )
        return cognito.UserPoolIdentityProviderSaml(
            self,
            construct_id,
            user_pool=pool,
            name=provider.name,
            metadata=metadata,
            idp_signout=provider.idp_signout,
            attribute_mapping=mapping,
        )

    def _supported_providers(self) -> list[cognito.UserPoolClientIdentityProvider]:
        return [cognito.UserPoolClientIdentityProvider.COGNITO] + [
            cognito.UserPoolClientIdentityProvider.custom(p.provider_name) for p in self.providers
        ]

    def _after_providers(self, client: cognito.UserPoolClient) -> None:
        # A client may list a provider only once it exists.
        for provider in self.providers:
            client.node.add_dependency(provider)

    @property
    def _refresh_validity(self) -> Duration:
        """ID and access tokens live an hour (TOKEN_VALIDITY); refresh tokens as configured."""
        return Duration.minutes(self.config.sign_in_refresh_minutes)

    @staticmethod
    def _readable() -> cognito.ClientAttributes:
        return (
            cognito.ClientAttributes()
            .with_standard_attributes(email=True, preferred_username=True)
            .with_custom_attributes(ORGANIZATION_ATTRIBUTE, GROUPS_ATTRIBUTE)
        )

    def _writable(self) -> cognito.ClientAttributes:
        """Users may edit their e-mail; Cognito writes the attributes a provider maps
        through the client, so those must be writable too. Never the organization."""
        mapped = {
            PROFILE_ATTRIBUTES[key]
            for provider in self.config.sso_providers
            for key in provider.attributes
            if key in PROFILE_ATTRIBUTES
        }
        standard = {name: True for name in mapped | {"email"}}
        writable = cognito.ClientAttributes().with_standard_attributes(**standard)
        if any(GROUPS in p.attributes for p in self.config.sso_providers):
            writable = writable.with_custom_attributes(GROUPS_ATTRIBUTE)
        return writable

    def _inline_function(
        self, name: str, source: Path, description: str, role_description: str
    ) -> lambda_.Function:
        """A deploy-time helper: inline source, its own log group and role (its logs only)."""
        log_group = logs.LogGroup(
            self,
            f"{name}Logs",
            retention=self.config.log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=role_description,
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        return lambda_.Function(
            self,
            name,
            description=description,
            runtime=assets.RUNTIME,
            architecture=assets.ARCHITECTURE,
            handler="index.handler",
            code=lambda_.Code.from_inline(source.read_text(encoding="utf-8")),
            role=role,
            timeout=Duration.seconds(30),
            log_group=log_group,
        )

    def _fetched_jwks(self, config: RunplaneConfig, url: str) -> str:
        fetcher = self._inline_function(
            "JwksFetcher",
            JWKS_FETCHER,
            "Runplane: reads the user pool's JWKS for the authorizer (deploy time)",
            "Runplane deploy-time JWKS fetch: writes its own logs, nothing else",
        )
        fetched = CustomResource(
            self,
            "Jwks",
            service_token=fetcher.function_arn,
            resource_type="Custom::RunplaneJwks",
            properties={"JwksUrl": url},
        )
        return fetched.get_att_string("Jwks")
