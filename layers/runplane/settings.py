"""Runtime settings: one pydantic model, read from the environment once."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, PrivateAttr, SecretStr, model_validator

from runplane.domain.errors import NotConfigured
from runplane.domain.federation import Federation, federation_from_json

_PREFIX = "RUNPLANE_"
# The resources a deployment must name: their defaults are the embedded stack's.
RESOURCES = ("table_name", "artifact_bucket", "kms_key_id", "state_machine_arn")
# The issuer's keys: the signing key and the ones still published after a rotation.
MAX_OIDC_KEYS = 5
# A KMS key ID (a UUID, or a multi-Region key's mrk-…) or a key ARN.
_KMS_KEY = re.compile(
    r"(arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/)?"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})"
)


class Settings(BaseModel):
    # Read from a deployed function's environment (not the embedded stack's, which
    # points at a local endpoint): resource names must be given, not defaulted.
    _deployed: bool = PrivateAttr(default=False)

    table_name: str = "runplane"
    artifact_bucket: str = "runplane-artifacts"
    kms_key_id: str = "alias/runplane"
    region: str = "us-east-1"
    # Endpoints are set only for the embedded stack (moto on loopback).
    aws_endpoint_url: str | None = None
    # Transfer URLs live minutes, not hours: a sandbox fetches right away.
    transfer_url_seconds: int = Field(default=300, ge=30, le=3600)
    # The runner authority window: no session outlives it.
    runner_session_seconds: int = Field(default=4 * 3600, ge=60, le=4 * 3600)
    bootstrap_seconds: int = Field(default=900, ge=30, le=3600)
    # User sign-in: a Cognito user pool (or any RS256 issuer with Cognito claims).
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_jwks: str | None = None  # the issuer's JWKS document, as JSON
    # Dashboard sign-in through the Cognito hosted UI (docs/dashboard.md, "Sign-in").
    # Unset: the dashboard signs in only by one-time login links. The ID token is
    # verified against jwt_issuer and jwt_jwks (fetched from the issuer if unset).
    sign_in_domain: str | None = None  # the hosted UI's base URL
    sign_in_client_id: str | None = None
    sign_in_client_secret_arn: str | None = None  # Secrets Manager secret (deployments)
    sign_in_client_secret: SecretStr | None = None  # the value itself (embedded stack, tests)
    sign_in_redirect_uri: str | None = None  # <dashboard>/ui/oauth2/callback
    # Single sign-on (docs/sso.md): each external identity provider's Cognito name,
    # bound to one organization, with its group -> role map, as JSON
    # ({"<provider>": {"organization": "<id>", "roles": {"<group>": "<role>"}}}).
    sso_providers: str | None = None
    # CLI sign-in (runplane login): the hosted UI, the public app client and the
    # loopback ports its callback URLs name (http://127.0.0.1:<port>/callback),
    # comma-separated. GET /api/v1/sign-in/config tells the CLI these.
    cli_sign_in_domain: str | None = None
    cli_sign_in_client_id: str | None = None
    cli_sign_in_ports: str | None = None
    # Orchestration.
    state_machine_arn: str = "arn:aws:states:us-east-1:000000000000:stateMachine:runplane-run"
    control_plane_url: str = "http://127.0.0.1:8700"
    approval_window_seconds: int = Field(default=7 * 24 * 3600, ge=1, le=30 * 24 * 3600)
    # A runner phase may take this long; it must heartbeat within the shorter window
    # (the backstop for a sandbox that hangs: one that stops is noticed as it stops).
    runner_phase_seconds: int = Field(default=4 * 3600, ge=60, le=4 * 3600)
    runner_heartbeat_seconds: int = Field(default=900, ge=6, le=3600)
    definition_version: str = "unversioned"
    build_sha: str = "unknown"
    # The release identities launch controls check (runner image, policy runtime).
    runner_release: str = "runner@unversioned"
    # The engine versions runs may ask for (comma-separated); unset: any (the
    # runner image's engine is used either way).
    engine_versions: str | None = None
    # The policy runtime's release identity; by default, the installed evaluator's.
    policy_runtime: str | None = None
    # Sandboxes: "ecs" in AWS, "local" for the embedded stack.
    launcher: str = "ecs"
    engine_path: str | None = None
    ecs_cluster: str | None = None
    ecs_task_definition: str | None = None
    ecs_subnets: str | None = None  # comma-separated
    ecs_security_groups: str | None = None  # comma-separated
    # The standby pool (docs/standby.md): runners kept waiting for a phase (0: none),
    # how long each waits for one, and how often it asks.
    runner_standby: int = Field(default=0, ge=0, le=100)
    runner_standby_seconds: int = Field(default=3600, ge=300, le=4 * 3600)
    runner_standby_poll_seconds: int = Field(default=2, ge=1, le=30)
    # GitHub sources: the source workflow, the App (its private key and the webhook
    # secret live in Secrets Manager; only their ARNs are settings) and the limits.
    source_state_machine_arn: str | None = None
    github_api_url: str = "https://api.github.com"
    github_app_id: str | None = None
    github_app_private_key_secret_arn: str | None = None
    github_webhook_secret_arn: str | None = None
    # Connecting installations (docs/github.md): the App's public page, its OAuth client.
    github_web_url: str = "https://github.com"
    github_app_slug: str | None = Field(default=None, pattern=r"^([a-z0-9][a-z0-9-]{0,99})?$")
    github_client_id: str | None = Field(default=None, max_length=100)
    github_client_secret_arn: str | None = None
    github_installations_max: int = Field(default=25, ge=1, le=1000)
    # A delivery whose event is older than this is refused as a replay.
    github_delivery_window_seconds: int = Field(default=3600, ge=60, le=7 * 24 * 3600)
    github_webhook_max_bytes: int = Field(default=1024 * 1024, ge=1024, le=10 * 1024 * 1024)
    github_archive_max_bytes: int = Field(default=100_000_000, ge=1024, le=100_000_000)
    # GitLab sources (docs/gitlab.md): the same limits as GitHub's; http instance URLs
    # only on loopback and only where this is set (the embedded stack's test servers).
    gitlab_delivery_window_seconds: int = Field(default=3600, ge=60, le=7 * 24 * 3600)
    gitlab_webhook_max_bytes: int = Field(default=1024 * 1024, ge=1024, le=10 * 1024 * 1024)
    gitlab_archive_max_bytes: int = Field(default=100_000_000, ge=1024, le=100_000_000)
    gitlab_allow_http: bool = False
    # Where a commit status links to (the run review); unset: the control-plane URL.
    public_url: str | None = None
    # Workspace schedules: the EventBridge Scheduler group, the fire-schedule Lambda
    # it targets, and the role Scheduler assumes to invoke it.
    scheduler_group: str = "runplane-schedules"
    scheduler_target_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:runplane-fire"
    scheduler_role_arn: str = "arn:aws:iam::000000000000:role/runplane-scheduler"

    # The audit export (docs/audit.md, "Export"): records older than the settle margin
    # are written under audit/ of the artifact bucket, or under this directory (the
    # embedded stack's data directory).
    audit_export_directory: str | None = None
    audit_export_settle_seconds: int = Field(default=900, ge=60, le=3600)

    # Run events (docs/notifications.md): the SQS queue in AWS; unset, an in-process
    # queue (the embedded stack). http destinations only where nothing leaves the host.
    event_queue_url: str | None = None
    notification_allow_http: bool = False
    # Destinations on loopback: only an embedded stack under test (its receivers are
    # local). Every other private, link-local or reserved address is always refused.
    notification_allow_loopback: bool = False
    # Ports no destination may name, whatever its host: the embedded stack's gateway
    # and moto (a test delivery to moto's reset endpoint would wipe every organization).
    notification_refused_ports: tuple[int, ...] = ()
    notification_retry_base_seconds: int = Field(default=30, ge=1, le=900)
    # Deliveries in flight at once per organization and per destination, so one
    # organization's slow endpoints cannot hold every worker (docs/notifications.md).
    notification_organization_slots: int = Field(default=2, ge=1, le=50)
    notification_destination_slots: int = Field(default=1, ge=1, le=20)
    approval_expiring_lead_seconds: int = Field(default=24 * 3600, ge=0, le=30 * 24 * 3600)
    # An embedded stack whose sandboxes are not isolated from each other serves one
    # organization (docs/security.md, "The embedded stack").
    single_organization: bool = False
    # Runplane as an OpenID Connect issuer (docs/credentials.md): its URL, the run API's
    # base URL (https; plain http on loopback only, for the embedded stack), and its KMS
    # signing keys by ID or ARN, comma-separated: the first signs new tokens, every one
    # is published in the JWKS. Unset: the issuer's endpoints answer 503.
    oidc_issuer_url: str | None = None
    oidc_signing_key_ids: str | None = None

    @model_validator(mode="after")
    def _heartbeat_within_phase(self) -> Settings:
        if self.runner_heartbeat_seconds >= self.runner_phase_seconds:
            raise ValueError("runner_heartbeat_seconds must be shorter than runner_phase_seconds")
        return self

    def resource(self, name: str) -> str:
        """A resource's name; in a deployment, only one its environment gave."""
        if self._deployed and name not in self.model_fields_set:
            raise NotConfigured(name)
        value: str = getattr(self, name)
        return value

    @property
    def deployed(self) -> bool:
        """Read from a deployed function's environment (not the embedded stack's)."""
        return self._deployed

    @property
    def hosted_ui_sign_in(self) -> bool:
        return self.sign_in_domain is not None

    @model_validator(mode="after")
    def _sign_in_complete(self) -> Settings:
        if not self.hosted_ui_sign_in:
            return self
        missing = [
            name
            for name, value in (
                ("sign_in_client_id", self.sign_in_client_id),
                ("sign_in_redirect_uri", self.sign_in_redirect_uri),
                ("jwt_issuer", self.jwt_issuer),
                (
                    "sign_in_client_secret_arn or sign_in_client_secret",
                    self.sign_in_client_secret_arn or self.sign_in_client_secret,
                ),
            )
            if not value
        ]
        if missing:
            raise ValueError(f"hosted-UI sign-in needs {', '.join(missing)}")
        for name in ("sign_in_domain", "sign_in_redirect_uri", "jwt_issuer"):
            if not _secure_url(getattr(self, name)):
                raise ValueError(f"{name} must be an https URL (http only on loopback)")
        return self

    @property
    def federation(self) -> Federation:
        return federation_from_json(self.sso_providers)

    @property
    def cli_sign_in_port_numbers(self) -> tuple[int, ...]:
        return tuple(int(p) for p in (self.cli_sign_in_ports or "").split(",") if p.strip())

    @model_validator(mode="after")
    def _sso_well_formed(self) -> Settings:
        try:
            self.federation  # noqa: B018 - parsed for its errors
            ports = self.cli_sign_in_port_numbers
        except ValueError as error:
            raise ValueError(f"sso_providers or cli_sign_in_ports: {error}") from None
        if not all(1024 <= p <= 65535 for p in ports):
            raise ValueError("cli_sign_in_ports are ports from 1024 to 65535")
        cli = (self.cli_sign_in_domain, self.cli_sign_in_client_id, ports)
        if any(cli) and not all(cli):
            raise ValueError(
                "cli_sign_in_domain, cli_sign_in_client_id and cli_sign_in_ports go together"
            )
        if self.cli_sign_in_domain and not _secure_url(self.cli_sign_in_domain):
            raise ValueError("cli_sign_in_domain must be an https URL (http only on loopback)")
        return self

    @property
    def oidc_signing_keys(self) -> tuple[str, ...]:
        """The issuer's KMS key IDs or ARNs, the signing key first."""
        return tuple(k.strip() for k in (self.oidc_signing_key_ids or "").split(",") if k.strip())

    @model_validator(mode="after")
    def _oidc_issuer_well_formed(self) -> Settings:
        issuer = self.oidc_issuer_url
        if issuer is not None:
            parts = urlsplit(issuer)
            if (
                not _secure_url(issuer)
                or parts.query
                or parts.fragment
                or parts.username is not None
                or issuer.endswith("/")
                or "?" in issuer
                or "#" in issuer
            ):
                raise ValueError(
                    "oidc_issuer_url must be an https URL (http only on loopback) with no "
                    "query, fragment, credentials or trailing slash"
                )
        keys = self.oidc_signing_keys
        if len(keys) > MAX_OIDC_KEYS:
            raise ValueError(f"oidc_signing_key_ids names at most {MAX_OIDC_KEYS} keys")
        if len(set(keys)) != len(keys):
            raise ValueError("oidc_signing_key_ids names a key twice")
        for key in keys:
            if not _KMS_KEY.fullmatch(key):
                # Aliases are refused: one can be pointed at another key, and a key's
                # public half is read once per process (adapters/token_signer.py).
                raise ValueError(
                    "oidc_signing_key_ids names KMS keys by key ID or key ARN (not by alias)"
                )
        return self

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, str] = {
            name: env[_PREFIX + name.upper()]
            for name in cls.model_fields
            if _PREFIX + name.upper() in env
        }
        if "region" not in values and "AWS_REGION" in env:
            values["region"] = env["AWS_REGION"]
        settings = cls.model_validate(values)
        settings._deployed = settings.aws_endpoint_url is None
        return settings


def _secure_url(url: str) -> bool:
    """The client secret and tokens travel over these URLs: https, or plain http to
    this machine only (the embedded stack and tests)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return bool(parts.hostname)
    return parts.scheme == "http" and parts.hostname in {"127.0.0.1", "localhost", "::1"}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    settings = Settings.from_env()
    # Every function reads the table: one without its name refuses to start.
    settings.resource("table_name")
    return settings
