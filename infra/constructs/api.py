"""One REST API in front of the run API and the TFE-compatible Cloud API.

Both live under one host because OpenTofu discovers the Cloud API at
``https://<host>/.well-known/terraform.json`` and the sandbox reaches the run API
and the Cloud API through one control-plane URL.

Routing: each API is a proxy resource (``/api/v1/{proxy+}`` and
``/api/v2/{proxy+}``) with the REQUEST authorizer; the few routes that take no
``Authorization`` header are explicit resources without it. The applications'
own route tables stay the single list of endpoints (a new endpoint needs no gateway
change), while authentication is decided here, route by route, from the same
public-route lists the embedded stack's gateway uses
(``functions/api/routes.py``, ``functions/cloud_api/routes.py``);
``tests/infra`` checks every application route against both.

The dashboard (``functions/dashboard``) is served at ``/``, ``/ui/{proxy+}`` and
``/app/{proxy+}`` (the run links Terraform prints, which it redirects to its run
pages) without the authorizer: browsers carry its cookie session, not a bearer
token (docs/dashboard.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs.functions import (
    KEY_ACTIONS,
    KEY_UNWRAP,
    OBJECT_READ,
    TABLE_GET,
    TABLE_READ,
    TABLE_WRITE,
    WORKFLOW_CALLBACKS,
    WORKFLOW_RESUME,
    WORKFLOW_START,
    Access,
    Platform,
    RunplaneFunction,
)
from infra.constructs.github import CLIENT_SECRET, CONNECT_SETTINGS
from infra.constructs.identity import Identity
from infra.constructs.nag import acknowledge
from infra.constructs.storage import ARTIFACTS_PREFIX, INBOX_PREFIX

RUN_API = "api"
CLOUD_API = "cloud"
DASHBOARD = "dashboard"
# The dashboard's pages: it signs browsers in with its own cookie sessions (an
# Authorization header is never sent by a browser navigating to a page).
DASHBOARD_REASON = (
    "The dashboard's pages authenticate their own HttpOnly, SameSite=Strict cookie "
    "sessions and check a CSRF token on every POST; browsers send no Authorization "
    "header when they navigate."
)


@dataclass(frozen=True)
class PublicRoute:
    """A route that takes no Authorization header, and why."""

    method: str
    path: str
    target: str
    reason: str


PUBLIC_ROUTES: tuple[PublicRoute, ...] = (
    PublicRoute(
        "GET",
        "/.well-known/terraform.json",
        CLOUD_API,
        "OpenTofu reads service discovery before it presents credentials; the document "
        "names only the API's paths.",
    ),
    PublicRoute(
        "GET",
        "/api/v2/ping",
        CLOUD_API,
        "The TFE API's health check is unauthenticated by contract and returns no data.",
    ),
    PublicRoute(
        "PUT",
        "/_archivist/{token}",
        CLOUD_API,
        "State upload URLs carry their own single-use secret; clients send no "
        "Authorization header to upload URLs.",
    ),
    PublicRoute(
        "PUT",
        "/_configuration/{token}",
        CLOUD_API,
        "Configuration upload URLs (remote operations) carry their own single-use, "
        "short-lived secret; the archive is their only payload.",
    ),
    PublicRoute(
        "GET",
        "/_logs/{run}/{phase}/{expires}/{grant}",
        CLOUD_API,
        "Log-read URLs (remote operations) carry a KMS-bound grant for one phase's log of "
        "one run until they expire; TFE clients poll them with no Authorization header.",
    ),
    PublicRoute(
        "GET",
        "/api/v1/openapi.json",
        RUN_API,
        "The OpenAPI description documents the run API and holds no data of any organization.",
    ),
    PublicRoute(
        "GET",
        "/api/v1/sign-in/config",
        RUN_API,
        "The CLI reads how to sign in before it holds a credential: the hosted UI's URLs, "
        "the public CLI app client's ID and its loopback callbacks; nothing secret.",
    ),
    PublicRoute(
        "POST",
        "/api/v1/runner/sessions",
        RUN_API,
        "A sandbox's first call redeems its one-time bootstrap handle (in the body) for the "
        "session it then presents as a bearer token.",
    ),
    PublicRoute(
        "POST",
        "/api/v1/runner/standby/claim",
        RUN_API,
        "A standby runner (docs/standby.md) presents its single-use ticket in the body; "
        "without a standby pool no ticket exists and every claim is refused.",
    ),
    PublicRoute(
        "POST",
        "/webhooks/github",
        RUN_API,
        "GitHub signs each delivery with the App's webhook secret (X-Hub-Signature-256); "
        "the handler verifies the HMAC of the exact body before recording anything.",
    ),
    PublicRoute(
        "POST",
        "/webhooks/gitlab",
        RUN_API,
        "GitLab sends each bound workspace's webhook secret token (X-Gitlab-Token); the "
        "handler compares its digest in constant time before recording anything.",
    ),
    PublicRoute(
        "GET",
        "/.well-known/openid-configuration",
        RUN_API,
        "The OpenID Connect issuer's discovery document: clouds' workload identity "
        "federation reads it anonymously; it names only the issuer URL and its JWKS URL.",
    ),
    PublicRoute(
        "GET",
        "/.well-known/jwks.json",
        RUN_API,
        "The OpenID Connect issuer's public signing keys: verifiers fetch them "
        "anonymously; they hold no private key material.",
    ),
)
PROXIES = {"/api/v1": RUN_API, "/api/v2": CLOUD_API}

# The gateway's own errors, in the applications' (and the embedded stack's) JSON:API
# error shape.
_UNAUTHORIZED = (
    '{"errors":[{"status":"401","title":"unauthorized","detail":"missing or invalid credentials"}]}'
)
_OTHER = (
    '{"errors":[{"title":"$context.error.responseType","detail":$context.error.messageString}]}'
)
GATEWAY_ERRORS = {
    apigw.ResponseType.UNAUTHORIZED: _UNAUTHORIZED,
    apigw.ResponseType.DEFAULT_4_XX: _OTHER,
    apigw.ResponseType.DEFAULT_5_XX: _OTHER,
}


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        platform: Platform,
        identity: Identity,
    ) -> None:
        super().__init__(scope, construct_id)
        config = platform.config
        self._add_functions(platform)
        self._add_authorizer_function(platform, identity)
        self._add_gateway(config)
        self._add_authorizer()
        self._add_routes()
        self._add_web_acl(config)
        self._add_domain(config)

    def _add_functions(self, platform: Platform) -> None:
        self.functions = {
            RUN_API: RunplaneFunction(
                self,
                "RunApi",
                platform=platform,
                name="api",
                handler="functions.api.app.handler",
                description="Runplane run API and the sandbox's runner endpoints",
                access=Access(
                    table=TABLE_READ + TABLE_WRITE,
                    object_prefixes=(ARTIFACTS_PREFIX, INBOX_PREFIX),
                    key=KEY_ACTIONS,
                    workflow=WORKFLOW_START + WORKFLOW_CALLBACKS,
                    stop_sandbox=True,
                    # The GitHub webhook starts the source workflow (an ingestion)...
                    source_workflow=True,
                    # ...once its signature is checked with this secret.
                    github_secrets=("github_webhook_secret_arn",),
                    settings=(
                        "definition_version",
                        "build_sha",
                        "runner_release",
                        "policy_runtime",
                        "engine_versions",
                    ),
                ),
            ),
            CLOUD_API: RunplaneFunction(
                self,
                "CloudApi",
                platform=platform,
                name="cloud-api",
                handler="functions.cloud_api.handler.handler",
                description="Runplane TFE-compatible Cloud API (state, locking, remote runs)",
                # Remote operations create, decide and cancel managed runs as the run
                # API does (without its inbox: archives arrive in the request body).
                access=Access(
                    table=TABLE_READ + TABLE_WRITE,
                    object_prefixes=(ARTIFACTS_PREFIX,),
                    key=KEY_ACTIONS,
                    workflow=WORKFLOW_START + WORKFLOW_CALLBACKS,
                    stop_sandbox=True,
                    settings=(
                        "definition_version",
                        "build_sha",
                        "runner_release",
                        "policy_runtime",
                        "engine_versions",
                    ),
                ),
            ),
            DASHBOARD: RunplaneFunction(
                self,
                "Dashboard",
                platform=platform,
                name="dashboard",
                handler="functions.dashboard.app.handler",
                description="Runplane dashboard: server-rendered pages and approval forms",
                # Sessions and decisions are table writes; logs are read from artifacts;
                # a decision resumes the run's approval wait.
                access=Access(
                    table=TABLE_READ + TABLE_WRITE,
                    object_prefixes=(ARTIFACTS_PREFIX,),
                    object_actions=OBJECT_READ,
                    key=KEY_UNWRAP,
                    workflow=WORKFLOW_RESUME,
                    # Connecting a GitHub installation redeems a user authorization
                    # with the App's OAuth client (never its private key).
                    github_secrets=(CLIENT_SECRET,),
                    settings=CONNECT_SETTINGS,
                ),
            ),
        }

    def _add_authorizer_function(self, platform: Platform, identity: Identity) -> None:
        platform.settings.update(
            jwt_issuer=identity.issuer, jwt_audience=identity.audience, jwt_jwks=identity.jwks
        )
        self.authorizer_function = RunplaneFunction(
            self,
            "Authorizer",
            platform=platform,
            name="authorizer",
            handler="functions.authorizer.handler.handler",
            description="Runplane API Gateway authorizer: API tokens, user JWTs, runner sessions",
            access=Access(table=TABLE_GET, settings=("jwt_issuer", "jwt_audience", "jwt_jwks")),
            timeout=Duration.seconds(10),
        )

    def _add_gateway(self, config: RunplaneConfig) -> None:
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        self.stage_name = config.environment_name
        self.rest_api = apigw.RestApi(
            self,
            "Gateway",
            rest_api_name=config.prefix,
            description="Runplane run API and Cloud API",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Uploads (state, configuration, the dashboard's recovery form) reach the
            # functions as base64, byte for byte.
            binary_media_types=["application/octet-stream", "multipart/form-data"],
            cloud_watch_role=config.api_gateway_cloud_watch_role,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN,
            deploy_options=apigw.StageOptions(
                stage_name=self.stage_name,
                throttling_rate_limit=config.api_throttle_rate,
                throttling_burst_limit=config.api_throttle_burst,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                # Request and response bodies carry tokens and state: never logged.
                data_trace_enabled=False,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        if config.api_gateway_cloud_watch_role:
            acknowledge(
                self.rest_api,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                "The account-level role API Gateway writes access and execution logs "
                "with; AWS maintains this policy for exactly that purpose.",
            )
        for response_type, body in GATEWAY_ERRORS.items():
            self.rest_api.add_gateway_response(
                response_type.response_type.title().replace("_", ""),
                type=response_type,
                templates={"application/json": body},
            )

    def _add_authorizer(self) -> None:
        self.authorizer = apigw.RequestAuthorizer(
            self,
            "Credentials",
            handler=self.authorizer_function.function,
            identity_sources=[apigw.IdentitySource.header("Authorization")],
            # Revoked tokens and ended runner sessions stop working on the next request.
            results_cache_ttl=Duration.seconds(0),
        )
        # Parameters (the Authorization header, path segments) are checked here; the
        # applications validate bodies themselves so that a malformed body gets their
        # documented error shape (a JSON pointer to the field), and no method declares a
        # body model.
        self.validator = self.rest_api.add_request_validator(
            "Validate", validate_request_parameters=True, validate_request_body=True
        )

    def _add_routes(self) -> None:
        integrations = {
            target: apigw.LambdaIntegration(
                fn.function, allow_test_invoke=False, scope_permission_to_method=False
            )
            for target, fn in self.functions.items()
        }
        self.methods: list[apigw.Method] = []

        def authorized_proxy(resource: apigw.IResource, target: str) -> None:
            method = resource.add_resource("{proxy+}").add_method(
                "ANY",
                integrations[target],
                authorization_type=apigw.AuthorizationType.CUSTOM,
                authorizer=self.authorizer,
                request_validator=self.validator,
                request_parameters={
                    "method.request.header.Authorization": True,
                    "method.request.path.proxy": True,
                },
            )
            self.methods.append(method)
            acknowledge(
                method,
                "AwsSolutions-COG4",
                "Callers present API tokens, Cognito JWTs or runner sessions; one REQUEST "
                "authorizer verifies all three (a Cognito authorizer verifies only JWTs).",
            )

        for prefix, target in PROXIES.items():
            authorized_proxy(self.rest_api.root.resource_for_path(prefix.lstrip("/")), target)
        for route in PUBLIC_ROUTES:
            # A resource created on the way to a public route under an API prefix gets
            # its own authorized proxy: API Gateway does not fall back from a static
            # resource to a greedy sibling, so /api/v1/runner/heartbeat would otherwise
            # match nothing once /api/v1/runner/sessions exists.
            under = next((p for p in PROXIES if route.path.startswith(p + "/")), None)
            if under is not None:
                parts = route.path.removeprefix(under + "/").split("/")[:-1]
                for depth in range(1, len(parts) + 1):
                    between = "/".join([under.lstrip("/"), *parts[:depth]])
                    if self.rest_api.root.resource_for_path(between).get_resource("{proxy+}"):
                        continue
                    authorized_proxy(self.rest_api.root.resource_for_path(between), PROXIES[under])
            resource = self.rest_api.root.resource_for_path(route.path.lstrip("/"))
            parameters = {
                f"method.request.path.{part[1:-1]}": True
                for part in route.path.split("/")
                if part.startswith("{")
            }
            method = resource.add_method(
                route.method,
                integrations[route.target],
                authorization_type=apigw.AuthorizationType.NONE,
                request_validator=self.validator,
                request_parameters=parameters or None,
            )
            self.methods.append(method)
            for rule in ("AwsSolutions-APIG4", "AwsSolutions-COG4"):
                acknowledge(method, rule, route.reason)

        pages: list[tuple[apigw.IResource, str]] = [
            (self.rest_api.root, "GET"),
            (self.rest_api.root.resource_for_path("ui").add_resource("{proxy+}"), "ANY"),
            # Terraform's run links, https://HOST/app/ORG/WORKSPACE/runs/RUN: the
            # dashboard redirects them to its run pages.
            (self.rest_api.root.resource_for_path("app").add_resource("{proxy+}"), "ANY"),
            # Browsers ask for it on every page, whatever the page links.
            (self.rest_api.root.add_resource("favicon.ico"), "GET"),
        ]
        for page, verb in pages:
            method = page.add_method(
                verb,
                integrations[DASHBOARD],
                authorization_type=apigw.AuthorizationType.NONE,
                request_validator=self.validator,
            )
            self.methods.append(method)
            for rule in ("AwsSolutions-APIG4", "AwsSolutions-COG4"):
                acknowledge(method, rule, DASHBOARD_REASON)

    def _add_web_acl(self, config: RunplaneConfig) -> None:
        if config.web_acl_arn:
            wafv2.CfnWebACLAssociation(
                self,
                "WebAcl",
                resource_arn=self.rest_api.deployment_stage.stage_arn,
                web_acl_arn=config.web_acl_arn,
            )
        else:
            acknowledge(
                self.rest_api,
                "AwsSolutions-APIG3",
                "Every route but discovery, ping, upload URLs, runner bootstrap and the "
                "dashboard's cookie-session pages is authenticated by the authorizer and "
                "the stage is throttled; a regional AWS WAF web ACL is attached when the "
                "deployment sets the webAclArn context.",
            )

    def _add_domain(self, config: RunplaneConfig) -> None:
        self.domain: apigw.DomainName | None = None
        stack = Stack.of(self)
        if config.domain_name and config.certificate_arn:
            self.domain = self.rest_api.add_domain_name(
                "Domain",
                domain_name=config.domain_name,
                certificate=acm.Certificate.from_certificate_arn(
                    self, "Certificate", config.certificate_arn
                ),
                endpoint_type=apigw.EndpointType.REGIONAL,
                security_policy=apigw.SecurityPolicy.TLS_1_2,
            )
            self.url = f"https://{config.domain_name}"
            if config.hosted_zone_id and config.hosted_zone_name:
                zone = route53.HostedZone.from_hosted_zone_attributes(
                    self,
                    "Zone",
                    hosted_zone_id=config.hosted_zone_id,
                    zone_name=config.hosted_zone_name,
                )
                route53.ARecord(
                    self,
                    "Alias",
                    zone=zone,
                    record_name=config.domain_name,
                    target=route53.RecordTarget.from_alias(targets.ApiGatewayDomain(self.domain)),
                )
        else:
            # Built from the API's ID rather than its stage, so that functions may carry
            # the URL without depending on the deployment that depends on them.
            self.url = (
                f"https://{self.rest_api.rest_api_id}.execute-api.{stack.region}."
                f"{stack.url_suffix}/{self.stage_name}"
            )
