"""Every route the applications serve is reachable through the gateway, authenticated
exactly when the applications (and the embedded stack's gateway) say it must be."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from functions.api import routes as api_routes
from functions.api.app import build_app as build_run_api
from functions.cloud_api import routes as cloud_routes
from functions.cloud_api.app import build_app as build_cloud_api
from runplane.domain.identity import ROLES
from runplane.services.identity import ORGANIZATION_CLAIM
from tests.infra.synth import Synthesized, ref

RUN_API = "functions.api.app.handler"
CLOUD_API = "functions.cloud_api.handler.handler"
AUTHORIZER = "functions.authorizer.handler.handler"
DASHBOARD = "functions.dashboard.app.handler"
# /, /ui/{proxy+}, /app/{proxy+} (Terraform's run links) and /favicon.ico.
DASHBOARD_METHODS = 4


def cli_client(stack: Synthesized) -> tuple[str, dict[str, Any]]:
    """The app client the CLI (and API bearer tokens) use: the one without a secret."""
    (found,) = [
        (k, p)
        for k, p in stack.of_type("AWS::Cognito::UserPoolClient").items()
        if not p.get("GenerateSecret")
    ]
    return found


def _app_routes(build: Any) -> list[tuple[str, str]]:
    """(method, path) of every route a Powertools resolver serves."""
    app = build()
    routes = [*app._static_routes, *app._dynamic_routes]
    return sorted({(r.method.upper(), r.path) for r in routes})


APP_ROUTES = [(RUN_API, m, p) for m, p in _app_routes(build_run_api)] + [
    (CLOUD_API, m, p) for m, p in _app_routes(build_cloud_api)
]


def _sample(path: str) -> str:
    return re.sub(r"<[^>]+>", "x1", path)


def _is_public(handler: str, method: str, path: str) -> bool:
    is_public = api_routes.is_public if handler == RUN_API else cloud_routes.is_public
    return is_public(method, path)


@dataclass
class Gateway:
    children: dict[str | None, dict[str, str]]  # parent resource (None: root) -> part -> id
    methods: dict[str | None, dict[str, dict[str, Any]]]  # resource -> HTTP method -> props

    @classmethod
    def of(cls, stack: Synthesized) -> Gateway:
        children: dict[str | None, dict[str, str]] = {}
        for logical_id, props in stack.of_type("AWS::ApiGateway::Resource").items():
            parent = ref(props["ParentId"]) if "Ref" in props["ParentId"] else None
            children.setdefault(parent, {})[props["PathPart"]] = logical_id
        methods: dict[str | None, dict[str, dict[str, Any]]] = {}
        for props in stack.of_type("AWS::ApiGateway::Method").values():
            resource = ref(props["ResourceId"]) if "Ref" in props["ResourceId"] else None
            methods.setdefault(resource, {})[props["HttpMethod"]] = props
        return cls(children, methods)

    def resolve(self, method: str, path: str) -> dict[str, Any] | None:
        """The method serving a request, matching as API Gateway does without ever
        falling back from a static resource to a sibling: static part, then a path
        parameter, then a greedy proxy at the deepest resource reached."""
        node: str | None = None
        for part in [p for p in path.strip("/").split("/") if p]:
            kids = self.children.get(node, {})
            if part in kids:
                node = kids[part]
                continue
            params = [k for k in kids if k.startswith("{") and not k.endswith("+}")]
            if params:
                node = kids[params[0]]
                continue
            if "{proxy+}" in kids:
                node = kids["{proxy+}"]
                break
            return None
        found = self.methods.get(node, {})
        return found.get(method) or found.get("ANY")


def _target(stack: Synthesized, method: dict[str, Any]) -> str:
    uri = json.dumps(method["Integration"]["Uri"])
    (handler,) = [h for h, f in stack.functions().items() if f'"{f["LogicalId"]}"' in uri]
    return handler


@pytest.mark.parametrize(("handler", "method", "path"), APP_ROUTES)
def test_every_application_route_reaches_its_function_with_the_right_authentication(
    stack: Synthesized, handler: str, method: str, path: str
) -> None:
    # Given a route the application serves
    sample = _sample(path)
    served = Gateway.of(stack).resolve(method, sample)
    # Then the gateway has a method for it, integrated with that application's function
    assert served is not None, f"{method} {path} is not reachable"
    assert served["Integration"]["Type"] == "AWS_PROXY"
    assert _target(stack, served) == handler
    # And it runs the authorizer unless the application declares the route public
    (authorizer, _) = stack.one("AWS::ApiGateway::Authorizer")
    if _is_public(handler, method, sample):
        assert served["AuthorizationType"] == "NONE"
    else:
        assert served["AuthorizationType"] == "CUSTOM"
        assert ref(served["AuthorizerId"]) == authorizer


def test_only_discovery_ping_upload_urls_and_runner_bootstrap_are_public(
    stack: Synthesized,
) -> None:
    public = {(m, p) for h, m, p in APP_ROUTES if _is_public(h, m, _sample(p))}
    assert public == {
        ("GET", "/.well-known/terraform.json"),
        ("GET", "/api/v2/ping"),
        ("PUT", "/_archivist/<token>"),
        ("PUT", "/_configuration/<token>"),
        ("GET", "/_logs/<run_id>/<phase>/<expires>/<grant>"),
        ("GET", "/api/v1/openapi.json"),
        ("POST", "/api/v1/runner/sessions"),
        ("POST", "/api/v1/runner/standby/claim"),
        ("POST", "/webhooks/github"),
        ("POST", "/webhooks/gitlab"),
        ("GET", "/.well-known/openid-configuration"),
        ("GET", "/.well-known/jwks.json"),
        # How the CLI signs in (docs/sso.md): endpoints and a public client ID.
        ("GET", "/api/v1/sign-in/config"),
    }
    # And the gateway has no unauthenticated method beyond those
    unauthenticated = [
        p
        for p in stack.of_type("AWS::ApiGateway::Method").values()
        if p["AuthorizationType"] == "NONE"
    ]
    # (and the dashboard's pages, which check their own cookie sessions)
    assert len(unauthenticated) == len(public) + DASHBOARD_METHODS


def test_the_dashboard_is_served_at_the_root_and_under_ui_and_app_with_its_own_sessions(
    stack: Synthesized,
) -> None:
    gateway = Gateway.of(stack)
    # Given the dashboard's pages and forms, and a run link as Terraform prints it
    for method, path in (
        ("GET", "/"),
        ("GET", "/ui/workspaces/ws-x1"),
        ("GET", "/favicon.ico"),
        ("GET", "/ui/login"),
        ("POST", "/ui/runs/run-x1/approve"),
        ("GET", "/app/org-x1/ws-x1/runs/run-x1"),
    ):
        served = gateway.resolve(method, path)
        # Then they reach the dashboard's function, which authenticates the cookie
        assert served is not None, path
        assert _target(stack, served) == DASHBOARD
        assert served["AuthorizationType"] == "NONE"
    # And the APIs beside it keep their authorizer
    for path in ("/api/v1/workspaces", "/api/v2/organizations/x1"):
        served = gateway.resolve("GET", path)
        assert served is not None
        assert served["AuthorizationType"] == "CUSTOM"


def test_uploads_and_the_recovery_form_reach_the_functions_as_binary(stack: Synthesized) -> None:
    # Given the gateway
    _, api = stack.one("AWS::ApiGateway::RestApi")
    # Then state uploads and multipart forms (an emergency state file) arrive byte for byte
    assert set(api["BinaryMediaTypes"]) >= {
        "application/octet-stream",
        "multipart/form-data",
    }


def test_unknown_paths_under_each_api_still_need_credentials(stack: Synthesized) -> None:
    gateway = Gateway.of(stack)
    for path in ("/api/v1/runner/anything", "/api/v1/nope/x", "/api/v2/nope"):
        served = gateway.resolve("GET", path)
        assert served is not None, path
        assert served["AuthorizationType"] == "CUSTOM", path


def test_the_authorizer_is_never_cached_and_reads_the_authorization_header(
    stack: Synthesized,
) -> None:
    _, authorizer = stack.one("AWS::ApiGateway::Authorizer")
    assert authorizer["Type"] == "REQUEST"
    assert authorizer["AuthorizerResultTtlInSeconds"] == 0
    assert authorizer["IdentitySource"] == "method.request.header.Authorization"
    uri = json.dumps(authorizer["AuthorizerUri"])
    assert stack.function(AUTHORIZER)["LogicalId"] in uri


def test_requests_are_validated_throttled_traced_and_access_logged(stack: Synthesized) -> None:
    validator, props = stack.one("AWS::ApiGateway::RequestValidator")
    assert props["ValidateRequestParameters"] is True
    for method in stack.of_type("AWS::ApiGateway::Method").values():
        assert ref(method["RequestValidatorId"]) == validator
        if method["AuthorizationType"] == "CUSTOM":
            assert method["RequestParameters"]["method.request.header.Authorization"] is True
    _, stage = stack.one("AWS::ApiGateway::Stage")
    (settings,) = stage["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == stack.config.api_throttle_rate
    assert settings["ThrottlingBurstLimit"] == stack.config.api_throttle_burst
    # Bodies carry tokens and state: never logged
    assert settings["DataTraceEnabled"] is False
    assert stage["TracingEnabled"] is True
    destination = ref(stage["AccessLogSetting"]["DestinationArn"])
    assert destination in stack.of_type("AWS::Logs::LogGroup")
    assert "$context.requestId" in stage["AccessLogSetting"]["Format"]


def test_gateway_errors_use_the_applications_error_shape(stack: Synthesized) -> None:
    responses = {
        p["ResponseType"]: p for p in stack.of_type("AWS::ApiGateway::GatewayResponse").values()
    }
    body = json.loads(responses["UNAUTHORIZED"]["ResponseTemplates"]["application/json"])
    assert body == {
        "errors": [
            {"status": "401", "title": "unauthorized", "detail": "missing or invalid credentials"}
        ]
    }


def test_the_control_plane_url_is_the_stage_url_without_a_custom_domain(
    stack: Synthesized,
) -> None:
    env = stack.environment("functions.tasks.handlers.start_runner")
    url = env["RUNPLANE_CONTROL_PLANE_URL"]["Fn::Join"][1]
    rest_api, _ = stack.one("AWS::ApiGateway::RestApi")
    assert url[0] == "https://"
    assert ref(url[1]) == rest_api
    assert url[-1] == f"/{stack.config.environment_name}"


def test_a_custom_domain_serves_the_api_at_its_root(custom_stack: Synthesized) -> None:
    _, domain = custom_stack.one("AWS::ApiGateway::DomainName")
    assert domain["DomainName"] == "runplane.example.com"
    assert domain["SecurityPolicy"] == "TLS_1_2"
    _, mapping = custom_stack.one("AWS::ApiGateway::BasePathMapping")
    # Discovery must be at https://<host>/.well-known/terraform.json: no base path
    assert "BasePath" not in mapping or mapping["BasePath"] in ("", None)
    _, record = custom_stack.one("AWS::Route53::RecordSet")
    assert record["Name"] == "runplane.example.com."
    env = custom_stack.environment("functions.tasks.handlers.start_runner")
    assert env["RUNPLANE_CONTROL_PLANE_URL"] == "https://runplane.example.com"


def test_a_web_acl_is_attached_when_given(custom_stack: Synthesized, stack: Synthesized) -> None:
    _, association = custom_stack.one("AWS::WAFv2::WebACLAssociation")
    assert association["WebACLArn"].startswith("arn:aws:wafv2:")
    assert not stack.of_type("AWS::WAFv2::WebACLAssociation")


def test_the_user_pool_carries_the_organization_claim_and_one_group_per_role(
    stack: Synthesized,
) -> None:
    _, pool = stack.one("AWS::Cognito::UserPool")
    attribute = ORGANIZATION_CLAIM.removeprefix("custom:")
    assert attribute in {a["Name"] for a in pool["Schema"]}
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["MfaConfiguration"] == "ON"
    groups = {g["GroupName"] for g in stack.of_type("AWS::Cognito::UserPoolGroup").values()}
    assert groups == set(ROLES)
    # Users can never move themselves to another organization, through either client
    clients = stack.of_type("AWS::Cognito::UserPoolClient")
    assert len(clients) == 2  # the CLI's and the dashboard's
    for client in clients.values():
        assert ORGANIZATION_CLAIM not in client["WriteAttributes"]
    assert not cli_client(stack)[1].get("GenerateSecret")


def test_the_authorizer_verifies_tokens_of_the_user_pool(stack: Synthesized) -> None:
    env = stack.environment(AUTHORIZER)
    pool, _ = stack.one("AWS::Cognito::UserPool")
    client, _ = cli_client(stack)
    jwks, props = stack.one("Custom::RunplaneJwks")
    assert pool in json.dumps(env["RUNPLANE_JWT_ISSUER"])
    assert env["RUNPLANE_JWT_AUDIENCE"] == {"Ref": client}
    assert env["RUNPLANE_JWT_JWKS"] == {"Fn::GetAtt": [jwks, "Jwks"]}
    assert pool in json.dumps(props["JwksUrl"])


def test_an_existing_issuer_replaces_the_user_pool(custom_stack: Synthesized) -> None:
    assert not custom_stack.of_type("AWS::Cognito::UserPool")
    env = custom_stack.environment(AUTHORIZER)
    assert env["RUNPLANE_JWT_ISSUER"] == "https://login.example.com/realms/platform"
    assert env["RUNPLANE_JWT_AUDIENCE"] == "runplane"
    assert env["RUNPLANE_JWT_JWKS"] == '{"keys":[]}'


def test_the_runner_windows_reach_the_steps_that_use_them(custom_stack: Synthesized) -> None:
    # Given a deployment with its own runner windows
    for handler in ("queue_run", "start_runner"):
        env = custom_stack.environment(f"functions.tasks.handlers.{handler}")
        # Then the Queue step (which hands them to the workflow) and the runner start
        # (which sets the runner's heartbeat interval) read them
        assert env["RUNPLANE_RUNNER_PHASE_SECONDS"] == "7200"
        assert env["RUNPLANE_RUNNER_HEARTBEAT_SECONDS"] == "300"
    assert "RUNPLANE_RUNNER_PHASE_SECONDS" not in custom_stack.environment(
        "functions.tasks.handlers.fail_run"
    )


def test_the_approval_window_reaches_the_steps_that_ask_for_approval(stack: Synthesized) -> None:
    # Given the deployment's default approval window
    window = str(stack.config.approval_window_seconds)
    # Then the policy step (which asks for approval) and the retired request step (which
    # executions started before it did still call) read it
    for handler in ("evaluate_policy", "request_approval"):
        env = stack.environment(f"functions.tasks.handlers.{handler}")
        assert env["RUNPLANE_APPROVAL_WINDOW_SECONDS"] == window, handler


def test_runs_may_only_ask_for_the_engine_the_image_pins(stack: Synthesized) -> None:
    env = stack.environment("functions.api.app.handler")
    assert env["RUNPLANE_ENGINE_VERSIONS"] == stack.config.engine_version
