"""Issuing a run phase its cloud credentials, once, to its runner.

A phase whose run pinned credential decisions is launched with a credentials capability
(bound to its attempt, phase and sandbox, expiring with the phase, one-time). Its
runner redeems it with its session, and the control plane issues what the decisions
name for that phase only:

- AWS: a role session of the plan role to a plan, of the apply role only to the apply
  attempt whose start was redeemed (the run is ``applying`` under that attempt's lock),
  by ``AssumeRoleWithWebIdentity`` with a workload identity token, or by ``AssumeRole``
  with the pinned external ID, session tags and a source identity naming the run;
- GCP and Azure: a workload identity token for their audience.

The redemption is written before anything is issued, so a second redemption is refused
whatever happens next. Every outcome is audited (which identities, never the
credentials); a refusal says what to fix (``CloudCredentialsRefused``), and the runner
ends the phase without running the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.clock import Clock
from runplane.domain.cloud_settings import CredentialDecisions, PinnedCredentials
from runplane.domain.entities import Run
from runplane.domain.errors import CredentialsNotIssuable, RunplaneError, SessionRefused
from runplane.domain.identity import Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.parts import AttemptBody, PlanEvidence, RunInput, required_part
from runplane.domain.run import RunStatus
from runplane.domain.run_credentials import (
    AwsSession,
    IssuedCredentials,
    WorkloadToken,
    needs_credentials,
    role_session_name,
    session_duration,
)
from runplane.domain.workload_identity import RunPhase, TokenRequest, subject
from runplane.services.attempts import attempt_part, open_or_none
from runplane.services.capabilities import Capabilities
from runplane.services.runner_api import session_of
from runplane.services.unit_of_work import UnitsOfWork
from runplane.services.workload_identity import WorkloadIdentity

logger = logging.getLogger(__name__)

# The audience of tokens exchanged with AWS STS (the IAM OIDC provider's client ID).
AWS_AUDIENCE = "sts.amazonaws.com"


class RoleSessions(Protocol):
    """AWS role sessions (``adapters.role_sessions``)."""

    endpoint_url: str | None

    def with_web_identity(
        self,
        role_arn: str,
        region: str,
        session_name: str,
        token: str,
        duration: timedelta,
        *,
        explain: str,
    ) -> AwsSession: ...

    def with_external_id(
        self,
        role_arn: str,
        region: str,
        session_name: str,
        external_id: str,
        duration: timedelta,
        *,
        tags: Mapping[str, str],
        source_identity: str,
        explain: str,
    ) -> AwsSession: ...


# Opens the external ID a run pinned (``CloudSettingsService.external_id``).
ExternalIds = Callable[[str, PinnedCredentials], "str | None"]


@dataclass(frozen=True)
class _Phase:
    """What a phase's credentials are issued from, as read."""

    run: Run
    snapshot: RunInput
    pinned: PinnedCredentials
    deadline: datetime
    plan_digest: str | None

    @property
    def organization_name(self) -> str:
        return str(self.snapshot.extra.get("organization_name", ""))

    @property
    def workspace_name(self) -> str:
        return str(self.snapshot.extra.get("workspace_name", ""))


class RunCredentials:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        capabilities: Capabilities,
        units: UnitsOfWork,
        identity: WorkloadIdentity,
        sessions: RoleSessions,
        external_ids: ExternalIds,
        *,
        phase_limit: timedelta,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._capabilities = capabilities
        self._units = units
        self._identity = identity
        self._sessions = sessions
        self._external_ids = external_ids
        self._phase_limit = phase_limit

    def issue(self, principal: Principal, handle: str) -> IssuedCredentials:
        """Redeem ``handle`` for the calling runner session's phase; what its run's
        decisions name for it."""
        binding = session_of(principal).binding
        # Refused if it is not this phase's, has expired, or was redeemed before.
        self._capabilities.redeem_once(handle, CapabilityKind.CREDENTIALS, binding)
        phase = self._read(binding)
        try:
            issued = self._issue(binding, phase)
        except RunplaneError as refused:
            self._audit(binding, phase, "run.credentials_refused", {"code": refused.code})
            raise
        self._audit(binding, phase, "run.credentials_issued", _named(issued))
        return issued

    # -- what the phase may have --------------------------------------------------------

    def _read(self, binding: Binding) -> _Phase:
        apply = binding.phase is Phase.APPLY
        needed = ["input", attempt_part(binding.phase), *(["plan", "apply"] if apply else [])]
        with self._units() as uow:
            run, parts = uow.runs.with_parts(binding.run_id, needed)
        attempt = open_or_none(binding, parts[attempt_part(binding.phase)])
        if attempt is None:
            raise SessionRefused("its attempt has ended")
        snapshot = RunInput.from_body(required_part(parts, run.id, "input").body)
        launched = datetime.fromisoformat(AttemptBody.from_body(attempt.body).launched_at)
        plan_digest = None
        if apply:
            record = required_part(parts, run.id, "apply").body
            if run.status is not RunStatus.APPLYING or record.get("attempt_id") != (
                binding.attempt_id
            ):
                raise CredentialsNotIssuable(
                    f"run {run.id}: the apply role is issued only to the apply attempt whose "
                    "start was accepted, once the run is applying"
                )
            plan = PlanEvidence.from_body(required_part(parts, run.id, "plan").body)
            plan_digest = plan.plan_sha256
        return _Phase(
            run, snapshot, snapshot.credentials, launched + self._phase_limit, plan_digest
        )

    def _issue(self, binding: Binding, phase: _Phase) -> IssuedCredentials:
        decisions = phase.pinned.decisions
        if not needs_credentials(decisions, binding.phase):
            raise CredentialsNotIssuable(
                f"run {phase.run.id}: its credential decisions name nothing for its "
                f"{binding.phase.value} phase"
            )
        aws = None
        role = decisions.aws_role_for(binding.phase.value)
        if role is not None and decisions.aws is not None:
            aws = self._aws(binding, phase, role, decisions)
        gcp = None
        if decisions.gcp_audience is not None:
            gcp = WorkloadToken(
                decisions.gcp_audience, self._token(binding, phase, decisions.gcp_audience)
            )
        azure = None
        if decisions.azure is not None:
            azure = WorkloadToken(
                decisions.azure.audience,
                self._token(binding, phase, decisions.azure.audience),
                client_id=decisions.azure.client_id,
                tenant_id=decisions.azure.tenant_id,
            )
        endpoint = self._sessions.endpoint_url if aws is not None else None
        return IssuedCredentials(aws=aws, gcp=gcp, azure=azure, aws_endpoint_url=endpoint)

    def _aws(
        self, binding: Binding, phase: _Phase, role: str, decisions: CredentialDecisions
    ) -> AwsSession:
        assert decisions.aws is not None
        aws = decisions.aws
        now = self._clock.now()
        duration = session_duration(timedelta(seconds=aws.session_duration), phase.deadline - now)
        name = role_session_name(binding.run_id, binding.phase.value)
        run = phase.run
        external_id = self._external_ids(run.workspace_id, phase.pinned)
        if external_id is not None:
            return self._sessions.with_external_id(
                role,
                aws.region,
                name,
                external_id,
                duration,
                tags={
                    "runplane:organization": run.organization_id,
                    "runplane:workspace": run.workspace_id,
                    "runplane:run": run.id,
                    "runplane:phase": binding.phase.value,
                },
                source_identity=run.id,
                explain=(
                    "The role's trust policy must allow this deployment's role to assume it "
                    "with the workspace's external ID."
                ),
            )
        token = self._token(binding, phase, AWS_AUDIENCE)
        named = subject(phase.organization_name, run.workspace_id, RunPhase(binding.phase.value))
        return self._sessions.with_web_identity(
            role,
            aws.region,
            name,
            token,
            duration,
            explain=(
                f"The role's trust policy must trust the IAM OIDC provider of "
                f"{self._identity.issuer} with aud {AWS_AUDIENCE} and sub {named}."
            ),
        )

    def _token(self, binding: Binding, phase: _Phase, audience: str) -> str:
        run = phase.run
        request = TokenRequest(
            organization_id=run.organization_id,
            organization_name=phase.organization_name,
            workspace_id=run.workspace_id,
            workspace_name=phase.workspace_name,
            run_id=run.id,
            attempt_id=binding.attempt_id,
            run_phase=RunPhase(binding.phase.value),
            run_kind=run.kind,
            audience=audience,
            plan_digest=phase.plan_digest,
        )
        return self._identity.issue(request, phase_deadline=phase.deadline)

    def _audit(
        self, binding: Binding, phase: _Phase, kind: str, details: Mapping[str, str]
    ) -> None:
        run = phase.run
        with self._units() as uow:
            uow.audit.record(
                organization_id=run.organization_id,
                subject_id=run.id,
                event_id=self._ids.new(IdKind.AUDIT_EVENT),
                type=kind,
                actor=f"runner:{binding.attempt_id}",
                at=self._clock.now(),
                details={"phase": binding.phase.value, "attempt_id": binding.attempt_id, **details},
            )
            uow.commit()
        logger.info(kind, extra={"run_id": run.id, "phase": binding.phase.value, **details})


def _named(issued: IssuedCredentials) -> dict[str, str]:
    """What was issued, by identity: never a credential."""
    named: dict[str, str] = {}
    if issued.aws is not None:
        named["aws_role_arn"] = issued.aws.role_arn
    if issued.gcp is not None:
        named["gcp_audience"] = issued.gcp.audience
    if issued.azure is not None:
        named["azure_audience"] = issued.azure.audience
    return named
