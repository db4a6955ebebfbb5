"""Workload identity tokens: the claims Runplane signs as an OpenID Connect issuer.

A token names one runner phase of one run: its organization, workspace, run, attempt
and phase, and, for an apply, the digest of the plan a person approved. A cloud's
federation (an AWS IAM role's trust policy, a GCP workload identity provider, an Azure
federated credential) trusts it by its ``aud`` and ``sub`` (docs/credentials.md).

The subject names the organization by name and the workspace by ID::

    organization:<organization name>:workspace:<workspace ID>:run_phase:<plan|apply>

Organization names are claimed for good (never renamed, never reused), so they read
well in a trust policy. A workspace is named by its ID: a name may be given to another
workspace (after a rename or a delete), and a trust policy written for the first must
not trust the second. The workspace's name is a claim of its own
(``runplane_workspace_name``), for people and logs, not for trust.

Everything here is pure: the service brings the issuer, the clock and the token ID.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from runplane.domain.errors import WorkloadIdentityRefused
from runplane.domain.ids import IdKind, kind_of
from runplane.domain.run import RunKind


class RunPhase(StrEnum):
    PLAN = "plan"
    APPLY = "apply"


# No token outlives this, whatever its phase allows (STS accepts web identity tokens
# far longer; a token is needed only at the start of an engine command).
MAX_LIFETIME: Final = timedelta(hours=1)
# Audiences are URIs or short names: AWS's "sts.amazonaws.com", GCP's
# "//iam.googleapis.com/projects/…/providers/…", Azure's "api://AzureADTokenExchange".
MAX_AUDIENCE_CHARS: Final = 400
_AUDIENCE: Final = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no spaces
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,90}")  # entities.valid_name's
_PLAN_DIGEST: Final = re.compile(r"[0-9a-f]{64}")  # the approved plan's SHA-256
_PRIVATE = "runplane_"

# Every claim a token may carry, in the order the discovery document lists them.
CLAIMS_SUPPORTED: Final = (
    "iss",
    "aud",
    "sub",
    "iat",
    "nbf",
    "exp",
    "jti",
    "runplane_organization_id",
    "runplane_organization_name",
    "runplane_workspace_id",
    "runplane_workspace_name",
    "runplane_run_id",
    "runplane_attempt_id",
    "runplane_run_phase",
    "runplane_run_kind",
    "runplane_plan_digest",
)


def subject(organization_name: str, workspace_id: str, phase: RunPhase) -> str:
    """The ``sub`` claim: ``organization:<name>:workspace:<ws-id>:run_phase:<phase>``."""
    _name("organization", organization_name)
    _public_id(IdKind.WORKSPACE, workspace_id, "workspace")
    return f"organization:{organization_name}:workspace:{workspace_id}:run_phase:{phase.value}"


def lifetime(requested: timedelta, *, now: datetime, phase_deadline: datetime) -> int:
    """A token's lifetime in whole seconds: ``requested``, clipped to what is left of
    the phase and to ``MAX_LIFETIME``. Zero or less asked, or a phase already over, is
    refused."""
    if requested <= timedelta(0):
        raise WorkloadIdentityRefused("a token's lifetime must be positive", "/lifetime")
    asked = int(requested.total_seconds())
    if asked < 1:
        raise WorkloadIdentityRefused("a token lives at least one second", "/lifetime")
    left = int(phase_deadline.timestamp()) - int(now.timestamp())
    if left < 1:
        raise WorkloadIdentityRefused(
            "the phase's time limit has passed: no token is issued for it", "/phase_deadline"
        )
    return min(asked, int(MAX_LIFETIME.total_seconds()), left)


@dataclass(frozen=True)
class TokenRequest:
    """What a token is asked for: the phase it serves and the audience that reads it."""

    organization_id: str
    organization_name: str
    workspace_id: str
    workspace_name: str
    run_id: str
    attempt_id: str
    run_phase: RunPhase
    run_kind: RunKind
    audience: str
    # The approved plan's SHA-256 (lowercase hex): an apply's only.
    plan_digest: str | None = None


@dataclass(frozen=True)
class WorkloadIdentityClaims:
    """A token's claims. Built only valid (``__post_init__``): the subject is the one
    its organization, workspace and phase name, the lifetime is within
    ``MAX_LIFETIME``, and only an apply of a run that may apply carries a plan digest."""

    issuer: str
    audience: str
    subject: str
    issued_at: int  # NumericDate: whole seconds since the epoch
    not_before: int
    expires_at: int
    token_id: str
    organization_id: str
    organization_name: str
    workspace_id: str
    workspace_name: str
    run_id: str
    attempt_id: str
    run_phase: RunPhase
    run_kind: RunKind
    plan_digest: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.issuer, str) or not self.issuer:
            raise WorkloadIdentityRefused("a token needs its issuer", "/iss")
        _audience(self.audience)
        _public_id(IdKind.ORGANIZATION, self.organization_id, "organization")
        _name("workspace", self.workspace_name)
        _public_id(IdKind.RUN, self.run_id, "run")
        _public_id(IdKind.ATTEMPT, self.attempt_id, "attempt")
        phase, kind = _phase(self.run_phase), _kind(self.run_kind)
        if self.subject != subject(self.organization_name, self.workspace_id, phase):
            raise WorkloadIdentityRefused(
                "the subject does not name the token's organization, workspace and phase",
                "/sub",
            )
        if not self.token_id:
            raise WorkloadIdentityRefused("a token needs its ID", "/jti")
        if not self.issued_at <= self.not_before < self.expires_at:
            raise WorkloadIdentityRefused("a token must expire after it becomes valid", "/exp")
        if self.expires_at - self.issued_at > MAX_LIFETIME.total_seconds():
            raise WorkloadIdentityRefused(
                f"a token lives at most {int(MAX_LIFETIME.total_seconds())} seconds", "/exp"
            )
        if phase is RunPhase.APPLY:
            if not kind.may_apply:
                raise WorkloadIdentityRefused(
                    f"a {kind.value} run never applies: no apply token is issued for it",
                    "/runplane_run_kind",
                )
            if self.plan_digest is None or not _PLAN_DIGEST.fullmatch(self.plan_digest):
                raise WorkloadIdentityRefused(
                    "an apply token names the approved plan's SHA-256 (64 lowercase hex)",
                    "/runplane_plan_digest",
                )
        elif self.plan_digest is not None:
            raise WorkloadIdentityRefused(
                "a plan token names no plan digest: only an apply runs an approved plan",
                "/runplane_plan_digest",
            )

    @property
    def lifetime_seconds(self) -> int:
        return self.expires_at - self.issued_at

    def to_jwt(self) -> dict[str, Any]:
        """The JWT claims set (a plan token has no ``runplane_plan_digest``)."""
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": self.subject,
            "iat": self.issued_at,
            "nbf": self.not_before,
            "exp": self.expires_at,
            "jti": self.token_id,
            _PRIVATE + "organization_id": self.organization_id,
            _PRIVATE + "organization_name": self.organization_name,
            _PRIVATE + "workspace_id": self.workspace_id,
            _PRIVATE + "workspace_name": self.workspace_name,
            _PRIVATE + "run_id": self.run_id,
            _PRIVATE + "attempt_id": self.attempt_id,
            _PRIVATE + "run_phase": RunPhase(self.run_phase).value,
            _PRIVATE + "run_kind": RunKind(self.run_kind).value,
        }
        if self.plan_digest is not None:
            claims[_PRIVATE + "plan_digest"] = self.plan_digest
        return claims


def claims_for(
    request: TokenRequest,
    *,
    issuer: str,
    token_id: str,
    now: datetime,
    phase_deadline: datetime,
    requested_lifetime: timedelta = MAX_LIFETIME,
) -> WorkloadIdentityClaims:
    """The claims of a token for ``request``, valid from ``now`` for its clipped
    lifetime (``lifetime``)."""
    seconds = lifetime(requested_lifetime, now=now, phase_deadline=phase_deadline)
    issued = int(now.timestamp())
    return WorkloadIdentityClaims(
        issuer=issuer,
        audience=request.audience,
        subject=subject(request.organization_name, request.workspace_id, request.run_phase),
        issued_at=issued,
        not_before=issued,
        expires_at=issued + seconds,
        token_id=token_id,
        organization_id=request.organization_id,
        organization_name=request.organization_name,
        workspace_id=request.workspace_id,
        workspace_name=request.workspace_name,
        run_id=request.run_id,
        attempt_id=request.attempt_id,
        run_phase=request.run_phase,
        run_kind=request.run_kind,
        plan_digest=request.plan_digest,
    )


def _phase(value: str) -> RunPhase:
    try:
        return RunPhase(value)
    except ValueError:
        raise WorkloadIdentityRefused(
            "a run phase is plan or apply", "/runplane_run_phase"
        ) from None


def _kind(value: str) -> RunKind:
    try:
        return RunKind(value)
    except ValueError:
        raise WorkloadIdentityRefused("not a run kind", "/runplane_run_kind") from None


def _name(kind: str, value: str) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise WorkloadIdentityRefused(
            f"a {kind} name is 1-90 letters, digits, '-' or '_'", f"/runplane_{kind}_name"
        )


def _public_id(kind: IdKind, value: str, what: str) -> None:
    if not isinstance(value, str) or kind_of(value) is not kind:
        raise WorkloadIdentityRefused(f"not a {what} ID", f"/runplane_{what}_id")


def _audience(value: str) -> None:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_AUDIENCE_CHARS
        or not _AUDIENCE.fullmatch(value)
    ):
        raise WorkloadIdentityRefused(
            f"an audience is 1-{MAX_AUDIENCE_CHARS} printable ASCII characters without spaces",
            "/aud",
        )
