"""A run phase's cloud credentials (``RunCredentials.issue``) over the in-memory unit of
work: a launch carries a credentials capability only when the run's decisions give its
phase something; the plan gets the plan role, the apply role goes only to the applying
attempt (with the approved plan's digest in its token); the capability is one-time and
bound to its phase's session; a refusal by the cloud is audited and says what to fix.
Through the table, STS and a real engine: tests/e2e/test_run_credentials.py."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from runplane.domain.capabilities import Phase
from runplane.domain.cloud_settings import CloudSettings, CredentialDecisions, PinnedCredentials
from runplane.domain.errors import (
    CapabilityConsumed,
    CloudCredentialsRefused,
    CredentialsNotIssuable,
    RunplaneError,
    SessionRefused,
    UnknownCapability,
)
from runplane.domain.identity import Principal, PrincipalKind
from runplane.domain.ids import IdKind
from runplane.domain.run import RunStatus
from runplane.domain.run_credentials import AwsSession
from runplane.services.capabilities import Capabilities
from runplane.services.run_credentials import RunCredentials
from runplane.services.workload_identity import WorkloadIdentity
from tests.fake_unit_of_work import InMemoryRecoveries, InMemoryUnitOfWork
from tests.fakes_oidc import InMemorySigner
from tests.service import test_runner_start
from tests.service.test_runner_start import PLAN_SHA, Start

PLAN_ROLE = "arn:aws:iam::123456789012:role/plan"
APPLY_ROLE = "arn:aws:iam::123456789012:role/apply"
ISSUER = "https://runplane.example.com"

# The run workflow's start over the tier's stores (a fixture of its own tests).
start = test_runner_start.start


@dataclass
class FakeRoleSessions:
    """STS as the control plane sees it: records each session asked for."""

    endpoint_url: str | None = None
    asked: list[dict[str, Any]] = field(default_factory=list)
    refuse: bool = False

    def with_web_identity(
        self,
        role_arn: str,
        region: str,
        session_name: str,
        token: str,
        duration: timedelta,
        *,
        explain: str,
    ) -> AwsSession:
        if self.refuse:
            raise CloudCredentialsRefused(f"AWS STS refused {role_arn} (AccessDenied). {explain}")
        self.asked.append({"role": role_arn, "name": session_name, "claims": _claims(token)})
        return AwsSession(role_arn, region, "ASIA" + session_name[-8:], _later(), "secret", "tok")

    def with_external_id(self, *args: Any, **kwargs: Any) -> AwsSession:
        raise AssertionError("no external ID was pinned")


def _later() -> Any:
    from datetime import UTC, datetime

    return datetime(2030, 1, 1, tzinfo=UTC)


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def _pinned(*, apply_role: str | None = APPLY_ROLE) -> dict[str, object]:
    settings = CloudSettings(aws_plan_role_arn=PLAN_ROLE, aws_apply_role_arn=apply_role)
    decisions = CredentialDecisions.decide(
        settings, 1, may_apply=True, deployment_region="us-east-1"
    )
    return {
        **PinnedCredentials(decisions).input_fields(),
        "organization_name": "acme",
        "workspace_name": "network",
    }


@dataclass
class Issuing:
    start: Start
    credentials: RunCredentials
    sessions: FakeRoleSessions
    audit: InMemoryRecoveries

    def run(self, status: RunStatus, *, pinned: bool = True, org: str = "") -> Any:
        """A run of a new workspace (IDs shaped as the table's), its decisions pinned."""
        ids = self.start.tier.ids
        return self.start.run(
            status,
            org=org or ids.new(IdKind.ORGANIZATION),
            run_id=ids.new(IdKind.RUN),
            workspace=ids.new(IdKind.WORKSPACE),
            pinned=_pinned() if pinned else None,
        )

    def session(self, run_id: str, phase: str) -> tuple[Principal, str]:
        """The runner session of ``run_id``'s last ``phase`` launch, and its handle."""
        org = self.start.tier.run_reader.get_run(run_id).organization_id
        launched = next(
            request
            for request in reversed(self.start.tier.launcher.launched)
            if request.run_id == run_id and request.phase == phase
        )
        principal = Principal(
            kind=PrincipalKind.RUNNER,
            id=f"sess-{launched.attempt_id}",
            organization_id=org,
            permissions=frozenset(),
            display="runner",
            run_id=run_id,
            attempt_id=launched.attempt_id,
            sandbox_id=launched.sandbox_id,
            phase=phase,
        )
        return principal, launched.credentials or ""


@pytest.fixture
def issuing(start: Start) -> Issuing:
    tier = start.tier
    sessions = FakeRoleSessions()
    identity = WorkloadIdentity(
        tier.clock, tier.ids, InMemorySigner("key-1"), issuer=ISSUER, key_ids=["key-1"]
    )
    audit = InMemoryRecoveries()

    def units() -> InMemoryUnitOfWork:
        # The start's stores, and an audit trail this test reads.
        return InMemoryUnitOfWork(
            tier.run_reader,
            tier.writer_queue,
            tier.sandboxes,
            directory=tier.directory,
            start=start.records,
            recoveries=audit,
        )

    credentials = RunCredentials(
        tier.clock,
        tier.ids,
        Capabilities(tier.clock, tier.ids, units),
        units,
        identity,
        sessions,
        lambda workspace_id, pinned: None,
        phase_limit=timedelta(hours=4),
    )
    return Issuing(start, credentials, sessions, audit)


def test_a_plan_is_issued_the_plan_role_once(issuing: Issuing) -> None:
    # Given a queued run whose decisions name plan and apply roles, and its plan launched
    run = issuing.run(RunStatus.QUEUED)
    issuing.start.orchestration.start_runner(run.id, "plan", "tok-plan")
    principal, handle = issuing.session(run.id, "plan")
    assert handle.startswith("rpc_")

    # When its runner redeems the launch's credentials capability
    issued = issuing.credentials.issue(principal, handle)

    # Then it holds a session of the plan role, asked for with a plan token
    assert issued.aws is not None
    assert issued.aws.role_arn == PLAN_ROLE
    [asked] = issuing.sessions.asked
    assert asked["role"] == PLAN_ROLE
    assert asked["name"] == f"runplane-plan-{run.id}"
    claims = asked["claims"]
    assert claims["sub"] == f"organization:acme:workspace:{run.workspace_id}:run_phase:plan"
    assert (claims["aud"], claims["iss"]) == ("sts.amazonaws.com", ISSUER)
    assert "runplane_plan_digest" not in claims
    # And a second redemption is refused, issuing nothing more
    with pytest.raises(CapabilityConsumed):
        issuing.credentials.issue(principal, handle)
    assert len(issuing.sessions.asked) == 1


def test_a_run_without_decisions_is_launched_without_a_credentials_capability(
    issuing: Issuing,
) -> None:
    run = issuing.run(RunStatus.QUEUED, pinned=False)
    issuing.start.orchestration.start_runner(run.id, "plan", "tok-plan")
    assert issuing.session(run.id, "plan")[1] == ""


def test_the_apply_role_is_refused_before_the_apply_start_is_accepted(issuing: Issuing) -> None:
    # Given an approved run whose apply sandbox was launched, its start not yet accepted
    run = issuing.run(RunStatus.AWAITING_APPROVAL)
    issuing.start.orchestration.start_runner(run.id, "apply", "tok-apply")
    principal, handle = issuing.session(run.id, "apply")

    # When its runner asks for credentials, it is refused and nothing is issued
    with pytest.raises(CredentialsNotIssuable):
        issuing.credentials.issue(principal, handle)
    assert issuing.sessions.asked == []


def test_the_applying_attempt_gets_the_apply_role_with_the_plans_digest(
    issuing: Issuing,
) -> None:
    # Given an approved run whose apply started
    run = issuing.run(RunStatus.AWAITING_APPROVAL)
    issuing.start.orchestration.start_runner(run.id, "apply", "tok-apply")
    issuing.start.apply_start(run.id)
    assert issuing.start.tier.run_reader.get_run(run.id).status is RunStatus.APPLYING
    principal, handle = issuing.session(run.id, "apply")

    # When its runner redeems its credentials capability
    issued = issuing.credentials.issue(principal, handle)

    # Then it holds the apply role, asked for with an apply token naming the approved plan
    assert issued.aws is not None
    assert issued.aws.role_arn == APPLY_ROLE
    claims = issuing.sessions.asked[-1]["claims"]
    assert claims["sub"].endswith(":run_phase:apply")
    assert claims["runplane_plan_digest"] == PLAN_SHA


def test_a_handle_redeemed_by_another_phases_session_is_refused(issuing: Issuing) -> None:
    # Given two runs of two organizations, each with its plan launched
    mine = issuing.run(RunStatus.QUEUED)
    theirs = issuing.run(RunStatus.QUEUED)
    issuing.start.orchestration.start_runner(mine.id, "plan", "tok-1")
    issuing.start.orchestration.start_runner(theirs.id, "plan", "tok-2")
    _, my_handle = issuing.session(mine.id, "plan")
    their_session, _ = issuing.session(theirs.id, "plan")

    # When the other run's session presents my run's handle, it is refused
    with pytest.raises((UnknownCapability, SessionRefused, RunplaneError)) as refused:
        issuing.credentials.issue(their_session, my_handle)
    assert not isinstance(refused.value, CapabilityConsumed)
    assert issuing.sessions.asked == []


def test_a_cloud_refusal_is_audited_and_says_what_to_fix(issuing: Issuing) -> None:
    run = issuing.run(RunStatus.QUEUED)
    issuing.start.orchestration.start_runner(run.id, "plan", "tok-plan")
    principal, handle = issuing.session(run.id, "plan")
    issuing.sessions.refuse = True

    with pytest.raises(CloudCredentialsRefused) as refused:
        issuing.credentials.issue(principal, handle)

    assert PLAN_ROLE in refused.value.message
    assert f"workspace:{run.workspace_id}:run_phase:plan" in refused.value.message
    events = [e for e in issuing.audit.org_audit if e.subject_id == run.id]
    assert [(e.type, e.details["code"]) for e in events if "credentials" in e.type] == [
        ("run.credentials_refused", "cloud_credentials_refused")
    ]


def test_the_phase_is_the_sessions_never_the_callers_choice(issuing: Issuing) -> None:
    # A plan session is a plan session: nothing it sends can name the apply phase
    run = issuing.run(RunStatus.QUEUED)
    issuing.start.orchestration.start_runner(run.id, "plan", "tok-plan")
    principal, handle = issuing.session(run.id, "plan")
    forged = Principal(**{**principal.__dict__, "phase": Phase.APPLY.value})
    with pytest.raises(RunplaneError):
        issuing.credentials.issue(forged, handle)
    assert issuing.sessions.asked == []
