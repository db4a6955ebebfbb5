"""Cloud credentials issued to one phase of one run attempt, and how they travel.

The control plane issues them when the runner redeems its credentials capability: AWS
temporary credentials for the role the phase may use, and workload identity tokens for
GCP and Azure. They travel once, from the control plane to the runner, which hands them
to the engine's environment only. Nothing here is ever stored, logged or shown: the
secrets are left out of every ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from runplane.domain.capabilities import Phase
from runplane.domain.cloud_settings import CredentialDecisions

# STS: a role session lasts at least 15 minutes and at most 12 hours (the role's own
# maximum session duration may be lower; STS refuses a longer request).
MIN_SESSION: Final = timedelta(minutes=15)
MAX_SESSION: Final = timedelta(hours=12)
# STS: RoleSessionName is 2..64 characters of [\w+=,.@-].
_SESSION_NAME_REFUSED = re.compile(r"[^\w+=,.@-]")
_MAX_SESSION_NAME = 64


def needs_credentials(decisions: CredentialDecisions, phase: Phase) -> bool:
    """Whether ``phase`` of a run with ``decisions`` is issued anything: its launch then
    carries a credentials capability."""
    return (
        decisions.aws_role_for(phase.value) is not None
        or decisions.gcp_audience is not None
        or decisions.azure is not None
    )


def role_session_name(run_id: str, phase: str) -> str:
    """The role session name AWS records in CloudTrail for a phase's calls: the run and
    the phase, so every call the engine makes names the run that made it."""
    return _SESSION_NAME_REFUSED.sub("-", f"runplane-{phase}-{run_id}")[:_MAX_SESSION_NAME]


def session_duration(wanted: timedelta, phase_left: timedelta) -> timedelta:
    """How long an AWS role session may last: what the workspace wants, no longer than
    the phase has left, within STS's bounds (a phase with less than STS's minimum left
    still gets the minimum: STS has no shorter session)."""
    return max(MIN_SESSION, min(wanted, phase_left, MAX_SESSION))


@dataclass(frozen=True)
class AwsSession:
    """Temporary AWS credentials of one role session."""

    role_arn: str
    region: str
    access_key_id: str
    expiration: datetime
    secret_access_key: str = field(repr=False)
    session_token: str = field(repr=False)

    def to_wire(self) -> dict[str, str]:
        return {
            "role_arn": self.role_arn,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "session_token": self.session_token,
            "expiration": self.expiration.isoformat(),
        }


@dataclass(frozen=True)
class WorkloadToken:
    """A workload identity token for one audience (GCP or Azure exchange it themselves)."""

    audience: str
    token: str = field(repr=False)
    # Azure needs the application (client) and the tenant the token is exchanged in.
    client_id: str | None = None
    tenant_id: str | None = None

    def to_wire(self) -> dict[str, str]:
        wire = {"audience": self.audience, "token": self.token}
        if self.client_id:
            wire["client_id"] = self.client_id
        if self.tenant_id:
            wire["tenant_id"] = self.tenant_id
        return wire


@dataclass(frozen=True)
class IssuedCredentials:
    """What one phase was issued. ``aws_endpoint_url`` names a non-default STS (the
    embedded stack's); in AWS it is None."""

    aws: AwsSession | None = None
    gcp: WorkloadToken | None = None
    azure: WorkloadToken | None = None
    aws_endpoint_url: str | None = None

    @property
    def empty(self) -> bool:
        return self.aws is None and self.gcp is None and self.azure is None

    def secrets(self) -> list[str]:
        """Every secret value here: what a log must never show."""
        found: list[str] = []
        if self.aws is not None:
            found += [self.aws.secret_access_key, self.aws.session_token]
        found += [token.token for token in (self.gcp, self.azure) if token is not None]
        return found

    def identities(self) -> list[str]:
        """What was issued, by identity: never a credential."""
        named = [f"aws role {self.aws.role_arn}"] if self.aws is not None else []
        if self.gcp is not None:
            named.append(f"gcp token for {self.gcp.audience}")
        if self.azure is not None:
            named.append(f"azure token for {self.azure.audience}")
        return named

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {}
        if self.aws is not None:
            wire["aws"] = self.aws.to_wire()
            if self.aws_endpoint_url:
                wire["aws"]["endpoint_url"] = self.aws_endpoint_url
        if self.gcp is not None:
            wire["gcp"] = self.gcp.to_wire()
        if self.azure is not None:
            wire["azure"] = self.azure.to_wire()
        return wire

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> IssuedCredentials:
        """The credentials a reply carries; ``ValueError`` naming the field if malformed."""
        aws = _section(wire, "aws")
        gcp = _section(wire, "gcp")
        azure = _section(wire, "azure")
        return cls(
            aws=None
            if aws is None
            else AwsSession(
                role_arn=_text(aws, "aws", "role_arn"),
                region=_text(aws, "aws", "region"),
                access_key_id=_text(aws, "aws", "access_key_id"),
                secret_access_key=_text(aws, "aws", "secret_access_key"),
                session_token=_text(aws, "aws", "session_token"),
                expiration=datetime.fromisoformat(_text(aws, "aws", "expiration")),
            ),
            gcp=None if gcp is None else _token(gcp, "gcp"),
            azure=None if azure is None else _token(azure, "azure"),
            aws_endpoint_url=None if aws is None else _optional(aws, "aws", "endpoint_url"),
        )


def _section(wire: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    section = wire.get(name)
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise ValueError(f"credentials: {name} is not an object")
    return section


def _text(section: Mapping[str, Any], name: str, key: str) -> str:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"credentials: {name}.{key} is missing")
    return value


def _optional(section: Mapping[str, Any], name: str, key: str) -> str | None:
    return _text(section, name, key) if section.get(key) is not None else None


def _token(section: Mapping[str, Any], name: str) -> WorkloadToken:
    return WorkloadToken(
        audience=_text(section, name, "audience"),
        token=_text(section, name, "token"),
        client_id=_optional(section, name, "client_id"),
        tenant_id=_optional(section, name, "tenant_id"),
    )
