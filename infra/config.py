"""Deployment options, read from CDK context (``cdk.json`` or ``-c key=value``).

Every option has a default that deploys a working control plane; docs/deploy.md
lists them. Values given on the command line arrive as strings and are parsed
here, so a typo fails the synth instead of deploying something unexpected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from aws_cdk import aws_logs as logs

from infra.identity_providers import (
    IdentityProvider,
    IdentityProviderError,
    parse_identity_providers,
)

# The engine the sandbox image pins: version and the SHA-256 of the release zip per
# architecture, from that release's tofu_<version>_SHA256SUMS.
ENGINE_VERSION = "1.8.5"
ENGINE_SHA256 = {
    "amd64": "e2951ba6be8ae9427aabbd5c6f243855e8b526cb2ae6bc33a05dae22d7e82632",
    "arm64": "2535e8d4979806cbf79a1b704dccf1fae45b4d50ccaee3e54c1771044db4a573",
}

# Fargate's valid CPU units and, for each, the memory sizes (MiB) it accepts.
_FARGATE_MEMORY: dict[int, range] = {
    256: range(512, 2048 + 1, 512),
    512: range(1024, 4096 + 1, 1024),
    1024: range(2048, 8192 + 1, 1024),
    2048: range(4096, 16384 + 1, 1024),
    4096: range(8192, 30720 + 1, 1024),
    8192: range(16384, 61440 + 1, 4096),
    16384: range(32768, 122880 + 1, 8192),
}
# Bounds the control plane itself enforces (runplane.settings.Settings).
_APPROVAL_WINDOW = range(1, 30 * 24 * 3600 + 1)
_NAME = re.compile(r"[a-z][a-z0-9-]{0,19}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_KEY_ARN = re.compile(
    r"arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})"
)
# Besides the signing key (the issuer's settings allow five keys in all).
_MAX_PUBLISHED_KEYS = 4
_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?")
# CloudWatch Logs' retention periods, in days.
_RETENTION_DAYS: dict[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


# A hundred years: beyond it, keep forever (0) says what is meant.
MAX_AUDIT_RETENTION_DAYS = 36500


class ConfigError(ValueError):
    """A context value is missing, malformed or out of range."""


@dataclass(frozen=True)
class RunplaneConfig:
    """One deployment's options. Field ``foo_bar`` is context key ``fooBar``."""

    # Names every resource (``runplane-<name>-...``) and the API stage.
    environment_name: str = "prod"
    # Region to deploy to; empty means the CLI's (AWS_REGION / profile).
    region: str | None = None
    # Default approval deadline for workspaces without their own window.
    approval_window_seconds: int = 7 * 24 * 3600
    # How long a runner phase may take, and how long a runner may go without a
    # heartbeat before the run is treated as lost (plan failed, apply uncertain). A
    # sandbox task that stops is noticed from ECS's event in seconds: the heartbeat is
    # the backstop for one that hangs without stopping (docs/deploy.md says why 900).
    runner_phase_seconds: int = 4 * 3600
    runner_heartbeat_seconds: int = 900
    # The standby pool (docs/standby.md): runner tasks kept waiting for a phase, so a
    # run starts on a task already running (0: none, every phase starts its own task),
    # and how long each waits before it exits and is replaced.
    runner_standby: int = 0
    runner_standby_seconds: int = 3600
    # The Fargate sandbox that runs plans and applies.
    sandbox_cpu: int = 1024
    sandbox_memory_mib: int = 4096
    sandbox_architecture: str = "x86_64"
    # The pinned engine in the sandbox image: version and the release zip's SHA-256.
    engine_version: str = ENGINE_VERSION
    engine_sha256: str = ""
    # CloudWatch Logs retention for every log group, and the access-log bucket's expiry.
    log_retention_days: int = 90
    # How long the audit trail's export (audit/ of the artifact bucket) is kept, in
    # days; 0 keeps it forever (docs/audit.md, "Retention").
    audit_retention_days: int = 0
    # The table refuses DeleteTable while this is on.
    table_deletion_protection: bool = True
    # Keep the table, bucket and key when the stack is deleted.
    retain_data: bool = True
    # NAT gateways for the sandbox subnets' egress (one per AZ for high availability).
    nat_gateways: int = 1
    # API Gateway stage throttling (steady requests per second, burst).
    api_throttle_rate: int = 50
    api_throttle_burst: int = 100
    # Create the account-level role API Gateway needs to write logs (once per region).
    api_gateway_cloud_watch_role: bool = True
    # Optional custom domain: an ACM certificate in the same region covers it.
    domain_name: str | None = None
    certificate_arn: str | None = None
    hosted_zone_id: str | None = None
    hosted_zone_name: str | None = None
    # An existing issuer instead of the Cognito user pool: all three together.
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_jwks: str | None = None
    # An existing AWS WAF web ACL (regional) to associate with the API stage.
    web_acl_arn: str | None = None
    # Subscribe this address to the alarm topic.
    alarm_email: str | None = None
    # The application build recorded on every run (a commit SHA); "unknown" if unset.
    build_sha: str = "unknown"
    # GitHub sources (docs/github.md): the GitHub App's ID and the API it calls.
    github_app_id: str = ""
    github_api_url: str = "https://api.github.com"
    # Connecting installations: GitHub's web address (GHES: its host), the App's slug
    # (github.com/apps/<slug>) and its OAuth client ID. The client secret is a secret.
    github_web_url: str = "https://github.com"
    github_app_slug: str = ""
    github_client_id: str = ""
    # Runplane as an OpenID Connect issuer (docs/credentials.md): raising the generation
    # creates a new signing key; the earlier keys' ARNs stay published until the tokens
    # they signed have expired (comma-separated).
    oidc_signing_key_generation: int = 1
    oidc_published_key_arns: str = ""
    # Single sign-on (docs/sso.md): external OIDC or SAML identity providers, each bound
    # to one organization (a JSON list; infra/identity_providers.py reads it).
    identity_providers: str = ""
    # The loopback ports `runplane login` may listen on: the CLI app client's callback
    # URLs are http://127.0.0.1:<port>/callback for each (comma-separated).
    cli_sign_in_ports: str = "47800,47801,47802"
    # How long a user-pool refresh token lives: Cognito does not ask the external
    # provider again when one is used, so this bounds how long a person removed there
    # keeps refreshing (docs/sso.md, "Deprovisioning").
    sign_in_refresh_minutes: int = 60

    @property
    def sso_providers(self) -> tuple[IdentityProvider, ...]:
        return parse_identity_providers(self.identity_providers)

    @property
    def cli_ports(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.cli_sign_in_ports.split(",") if p.strip())

    @property
    def published_key_arns(self) -> tuple[str, ...]:
        """Earlier signing keys still published in the issuer's JWKS."""
        return tuple(k.strip() for k in self.oidc_published_key_arns.split(",") if k.strip())

    @property
    def prefix(self) -> str:
        return f"runplane-{self.environment_name}"

    @property
    def engine_arch(self) -> str:
        return "arm64" if self.sandbox_architecture == "arm64" else "amd64"

    @property
    def engine_checksum(self) -> str:
        """The engine zip's SHA-256 for the sandbox architecture."""
        return self.engine_sha256 or ENGINE_SHA256[self.engine_arch]

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _RETENTION_DAYS[self.log_retention_days]

    @property
    def uses_cognito(self) -> bool:
        return self.jwt_issuer is None

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> RunplaneConfig:
        """Read every option through ``get`` (``node.try_get_context``)."""
        raw: dict[str, Any] = {}
        for f in fields(cls):
            value = get(_context_key(f.name))
            if value is not None and value != "":
                raw[f.name] = value
        return cls.from_mapping(raw)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> RunplaneConfig:
        defaults = cls()
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in raw:
                continue
            default = getattr(defaults, f.name)
            values[f.name] = _coerce(f.name, raw[f.name], default)
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        self._validate_sign_in()
        _check(
            _NAME.fullmatch(self.environment_name) is not None,
            "environmentName",
            "must be lowercase letters, digits and hyphens, starting with a letter (max 20)",
        )
        _check(
            self.approval_window_seconds in _APPROVAL_WINDOW,
            "approvalWindowSeconds",
            "must be between 1 second and 30 days",
        )
        _check(
            60 <= self.runner_phase_seconds <= 4 * 3600,
            "runnerPhaseSeconds",
            "must be between 60 seconds and 4 hours (the runner authority window)",
        )
        _check(
            6 <= self.runner_heartbeat_seconds < self.runner_phase_seconds,
            "runnerHeartbeatSeconds",
            "must be at least 6 seconds and shorter than runnerPhaseSeconds",
        )
        _check(
            0 <= self.runner_standby <= 100,
            "runnerStandby",
            "must be between 0 (no standby pool) and 100 standby runners",
        )
        _check(
            300 <= self.runner_standby_seconds <= 4 * 3600,
            "runnerStandbySeconds",
            "must be between 300 seconds and 4 hours",
        )
        memory = _FARGATE_MEMORY.get(self.sandbox_cpu)
        _check(memory is not None, "sandboxCpu", f"must be one of {sorted(_FARGATE_MEMORY)}")
        assert memory is not None
        _check(
            self.sandbox_memory_mib in memory,
            "sandboxMemoryMiB",
            f"must be a Fargate size for {self.sandbox_cpu} CPU units "
            f"({memory.start}-{memory.stop - 1} MiB in steps of {memory.step})",
        )
        _check(
            self.sandbox_architecture in {"x86_64", "arm64"},
            "sandboxArchitecture",
            "must be x86_64 or arm64",
        )
        _check(
            _VERSION.fullmatch(self.engine_version) is not None,
            "engineVersion",
            "must be an OpenTofu release version such as 1.8.5",
        )
        _check(
            self.engine_version == ENGINE_VERSION or self.engine_sha256 != "",
            "engineSha256",
            "is required when engineVersion is not the pinned "
            f"{ENGINE_VERSION}: the image is built only from a verified download",
        )
        _check(
            self.engine_sha256 == "" or _SHA256.fullmatch(self.engine_sha256) is not None,
            "engineSha256",
            "must be 64 lowercase hex digits",
        )
        _check(
            self.log_retention_days in _RETENTION_DAYS,
            "logRetentionDays",
            f"must be one of {sorted(_RETENTION_DAYS)}",
        )
        _check(
            0 <= self.audit_retention_days <= MAX_AUDIT_RETENTION_DAYS,
            "auditRetentionDays",
            f"must be 0 (keep forever) or a number of days up to {MAX_AUDIT_RETENTION_DAYS}",
        )
        _check(
            1 <= self.nat_gateways <= 3,
            "natGateways",
            "must be between 1 and 3: sandboxes reach the control plane through NAT",
        )
        _check(
            self.api_throttle_rate > 0 and self.api_throttle_burst > 0,
            "apiThrottleRate",
            "and apiThrottleBurst must be positive",
        )
        _check(
            (self.domain_name is None) == (self.certificate_arn is None),
            "domainName",
            "and certificateArn go together",
        )
        _check(
            (self.hosted_zone_id is None) == (self.hosted_zone_name is None),
            "hostedZoneId",
            "and hostedZoneName go together",
        )
        _check(
            self.hosted_zone_id is None or self.domain_name is not None,
            "hostedZoneId",
            "needs domainName",
        )
        issuer = (self.jwt_issuer, self.jwt_audience, self.jwt_jwks)
        _check(
            all(v is None for v in issuer) or all(v is not None for v in issuer),
            "jwtIssuer",
            "jwtAudience and jwtJwks go together",
        )
        _check(
            self.jwt_issuer is None or self.jwt_issuer.startswith("https://"),
            "jwtIssuer",
            "must be an https URL",
        )
        _check(
            1 <= self.oidc_signing_key_generation <= 999,
            "oidcSigningKeyGeneration",
            "must be a whole number from 1 to 999",
        )
        published = self.published_key_arns
        _check(
            all(_KEY_ARN.fullmatch(arn) for arn in published),
            "oidcPublishedKeyArns",
            "must be KMS key ARNs (arn:aws:kms:<region>:<account>:key/<id>), comma-separated",
        )
        _check(
            len(set(published)) == len(published) and len(published) <= _MAX_PUBLISHED_KEYS,
            "oidcPublishedKeyArns",
            f"names each key once, at most {_MAX_PUBLISHED_KEYS} of them",
        )
        _check(
            self.build_sha == "unknown"
            or re.fullmatch(r"[0-9a-f]{7,40}", self.build_sha) is not None,
            "buildSha",
            "must be a commit SHA",
        )

    def _validate_sign_in(self) -> None:
        try:
            providers = self.sso_providers
        except IdentityProviderError as error:
            raise ConfigError(f"context identityProviders {error}") from None
        _check(
            not providers or self.uses_cognito,
            "identityProviders",
            "need the Cognito user pool (not jwtIssuer)",
        )
        _check(
            re.fullmatch(r"[0-9]{4,5}(,[0-9]{4,5}){0,4}", self.cli_sign_in_ports) is not None
            and all(1024 <= p <= 65535 for p in self.cli_ports)
            and len(set(self.cli_ports)) == len(self.cli_ports),
            "cliSignInPorts",
            "must be one to five distinct ports from 1024 to 65535, comma-separated",
        )
        _check(
            60 <= self.sign_in_refresh_minutes <= 24 * 60,
            "signInRefreshMinutes",
            "must be from 60 (Cognito's minimum) to 1440",
        )


def _context_key(name: str) -> str:
    head, *rest = name.split("_")
    key = head + "".join(part.capitalize() for part in rest)
    return key.replace("Mib", "MiB")


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"context {key} {message}")


def _coerce(name: str, value: Any, default: Any) -> Any:
    key = _context_key(name)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if str(value).lower() in {"true", "1", "yes"}:
            return True
        if str(value).lower() in {"false", "0", "no"}:
            return False
        raise ConfigError(f"context {key} must be true or false, not {value!r}")
    if isinstance(default, int):
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"context {key} must be a whole number, not {value!r}") from None
    if name == "identity_providers" and isinstance(value, list):
        # cdk.json holds the list itself; the command line, its JSON text.
        return json.dumps(value)
    if not isinstance(value, str):
        raise ConfigError(f"context {key} must be a string, not {value!r}")
    return value
