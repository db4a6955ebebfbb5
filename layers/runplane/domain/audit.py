"""The security audit trail: one typed, append-only record per security-relevant event.

A record says who (actor and display), from where (source address), in which
organization, did what (a closed set of actions) to which object, with which
outcome. Its details are a few non-secret strings: a variable record names the
key and category, never the value; a token record its ID and name, never the
secret; a webhook refusal its reason and delivery ID, never the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from runplane.domain.identity import Principal

# Where a refusal is recorded when no organization can be named (a GitHub delivery
# whose signature does not verify names nothing we can trust).
DEPLOYMENT_TRAIL = "_deployment"

# Details are short notes, not payloads.
MAX_DETAILS = 16
MAX_DETAIL_LENGTH = 256
# Detail keys that would carry a secret: refused outright, whatever the caller meant.
_SECRET_KEYS = frozenset(
    {"value", "secret", "token", "password", "body", "payload", "signature", "private_key"}
)


class AuditAction(StrEnum):
    SIGNED_IN = "session.signed_in"
    TOKEN_CREATED = "token.created"
    TOKEN_REVOKED = "token.revoked"
    RUN_APPROVED = "run.approved"
    RUN_REJECTED = "run.rejected"
    POLICY_OVERRIDDEN = "policy.overridden"
    RUN_RECOVERED = "run.recovered"
    STATE_RECOVERED = "state.recovered"
    VARIABLE_SET = "variable.set"
    VARIABLE_DELETED = "variable.deleted"
    VARIABLE_SET_CHANGED = "variable_set.changed"
    VARIABLE_SET_DELETED = "variable_set.deleted"
    CLOUD_SETTINGS_SET = "cloud_settings.set"
    CLOUD_SETTINGS_CLEARED = "cloud_settings.cleared"
    WEBHOOK_REFUSED = "webhook.refused"
    # Permission changes (teams and workspace settings).
    TEAM_CREATED = "team.created"
    TEAM_UPDATED = "team.updated"
    TEAM_DELETED = "team.deleted"
    TEAM_MEMBER_ADDED = "team.member_added"
    TEAM_MEMBER_REMOVED = "team.member_removed"
    TEAM_ACCESS_SET = "team.access_set"
    TEAM_ACCESS_REMOVED = "team.access_removed"
    TEAM_TOKEN_CREATED = "team.token_created"
    WORKSPACE_SETTINGS_CHANGED = "workspace.settings_changed"


class AuditOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    # Refused by a rule (a bad signature, a wrong password): nothing else was written.
    REFUSED = "refused"
    FAILED = "failed"


class UnsafeAuditDetail(ValueError):
    """A detail that could carry a secret or a payload: a programming error."""


@dataclass(frozen=True)
class AuditRecord:
    id: str
    organization_id: str
    at: datetime
    action: AuditAction
    # The principal's reference (``user:alice``, ``token:tok-...``, ``webhook:github``).
    actor: str
    actor_display: str
    source_address: str | None
    object_kind: str
    object_id: str
    outcome: AuditOutcome
    details: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_details(self.details)

    @classmethod
    def of(
        cls,
        principal: Principal,
        action: AuditAction,
        object_kind: str,
        object_id: str,
        *,
        at: datetime,
        id: str,
        outcome: AuditOutcome = AuditOutcome.SUCCEEDED,
        details: Mapping[str, str] | None = None,
    ) -> AuditRecord:
        """The record of ``principal`` doing ``action`` in its own organization."""
        return cls(
            id=id,
            organization_id=principal.organization_id,
            at=at,
            action=action,
            actor=principal.ref,
            actor_display=principal.display,
            source_address=principal.source_address,
            object_kind=object_kind,
            object_id=object_id,
            outcome=outcome,
            details=dict(details or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as the API answers it and the export writes it (one JSON line)."""
        return {
            "id": self.id,
            "organization_id": self.organization_id,
            "at": self.at.isoformat(),
            "action": self.action.value,
            "actor": self.actor,
            "actor_display": self.actor_display,
            "source_address": self.source_address,
            "object": {"kind": self.object_kind, "id": self.object_id},
            "outcome": self.outcome.value,
            "details": dict(self.details),
        }


def _check_details(details: Mapping[str, str]) -> None:
    if len(details) > MAX_DETAILS:
        raise UnsafeAuditDetail(f"an audit record holds at most {MAX_DETAILS} details")
    for key, value in details.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise UnsafeAuditDetail("audit details are strings")
        if key.lower() in _SECRET_KEYS:
            raise UnsafeAuditDetail(f"audit detail {key!r} could carry a secret")
        if len(value) > MAX_DETAIL_LENGTH:
            raise UnsafeAuditDetail(f"audit detail {key!r} is longer than a note")


def sign_in_record(
    record_id: str,
    organization_id: str,
    user: str,
    method: str,
    at: datetime,
    source_address: str | None,
    *,
    session_id: str,
    outcome: AuditOutcome = AuditOutcome.SUCCEEDED,
    reason: str | None = None,
) -> AuditRecord:
    """A sign-in's record: the person, the method (``hosted_ui``, ``login_link``) and the
    session it opened (by its public ID; never its secret). The actor is the person as
    every later record of the session names them (``user:<name>``), not the session."""
    details = {"method": method, "user": user[:200]}
    if reason:
        details["reason"] = reason
    return AuditRecord(
        id=record_id,
        organization_id=organization_id,
        at=at,
        action=AuditAction.SIGNED_IN,
        actor=f"user:{user[:200]}",
        actor_display=f"User {user[:200]} (dashboard)",
        source_address=source_address,
        object_kind="session",
        object_id=session_id or "-",
        outcome=outcome,
        details=details,
    )


@dataclass(frozen=True)
class AuditQuery:
    """Which records a reader asks for: a half-open time range [since, until), an
    optional action, a page size and the cursor of the page before."""

    since: datetime | None = None
    until: datetime | None = None
    action: AuditAction | None = None
    size: int = 50
    cursor: str | None = None


@dataclass(frozen=True)
class AuditPage:
    records: list[AuditRecord]
    # Opaque: pass it back as ``page[cursor]`` for the next page; None: the last page.
    next_cursor: str | None


# Settings whose new values a record may show: they decide who may do what, and none
# is secret. A description, tags or an engine version are named, not shown.
_SHOWN_SETTINGS = ("approval_window_seconds", "execution_mode")


def settings_change_details(before: Any, changes: Mapping[str, Any]) -> dict[str, str]:
    """What a workspace settings change changed, from the workspace as the caller read
    it (``before``) and the settings given: ``changed`` names them (comma-separated);
    approval rules and the execution mode show their new values. Empty: nothing
    differs."""
    changed = sorted(
        name
        for name, value in changes.items()
        if value is not None and getattr(before, name, None) != value
    )
    if not changed:
        return {}
    details = {"changed": ",".join(changed)}
    for name in changed:
        if name in _SHOWN_SETTINGS:
            details[name] = str(changes[name])
        if name == "second_approval":
            rule = changes[name]
            details["destroy_runs"] = str(rule.destroy_runs).lower()
            details["destroys_over"] = (
                "-" if rule.destroys_over is None else str(rule.destroys_over)
            )
            details["separation_of_duties"] = str(rule.separation_of_duties).lower()
    return details
