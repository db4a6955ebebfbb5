"""Run API route that tells the CLI how to sign in (``runplane login``, docs/sso.md).

Public: the CLI reads it before it holds any credential. It names the hosted UI's
endpoints, the public CLI app client and the loopback ports its callbacks may use;
nothing in it is secret (the same values are in the hosted UI's own URLs).
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply
from runplane.domain.sign_in import cli_sign_in
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class SignInConfig(oas.Doc):
    authorize_endpoint: str = Field(description="The hosted UI's OAuth 2.0 authorize URL")
    token_endpoint: str = Field(description="The hosted UI's token URL (code and refresh)")
    logout_endpoint: str
    client_id: str = Field(description="The CLI's public app client (no secret; PKCE)")
    redirect_uris: list[str] = Field(
        description="The loopback callbacks the client allows, one per port"
    )
    scopes: list[str]


@router.get("/api/v1/sign-in/config", responses=oas.responses(200, SignInConfig, 404))
def sign_in_config() -> Reply:
    settings = services().settings
    found = cli_sign_in(
        settings.cli_sign_in_domain,
        settings.cli_sign_in_client_id,
        settings.cli_sign_in_port_numbers,
    )
    body = {
        "authorize_endpoint": found.authorize_endpoint,
        "token_endpoint": found.token_endpoint,
        "logout_endpoint": found.logout_endpoint,
        "client_id": found.client_id,
        "redirect_uris": [found.redirect_uri(port) for port in found.ports],
        "scopes": ["openid", "email", "profile"],
    }
    return json_reply(200, SignInConfig.model_validate(body))
