"""Policy as code: publishing policy sets, attaching them, and the run's policy check.

A run's policy check is the row its plan commit reserved (state ``running``,
no digest). Evaluation binds it to the digest of the exact sanitized plan input
(``running -> bound``), evaluates the attached sets, and records the results
(``bound -> passed | soft_failed | failed``) in the transaction that moves the
run on. Every step is conditioned on the row's state, so binding twice,
completing a row with no digest, or recording results before binding is
refused and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from runplane.domain.artifacts import Artifact, ArtifactKind
from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    ArtifactCorrupt,
    Conflict,
    InvalidInput,
    NotFound,
    PolicyBindingRefused,
)
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdKind, derived_id
from runplane.domain.parts import (
    ApprovalBody,
    ApprovalState,
    PlanEvidence,
    PlanEvidenceState,
    PolicyCheck,
    RunInput,
    RunPart,
    required_part,
)
from runplane.domain.plan_secrets import without_secrets
from runplane.domain.policy import PolicySetContent, policy_set_from_document
from runplane.domain.policy_input import PolicyInputs, check_input_roots
from runplane.domain.policy_results import PolicyResult, overall
from runplane.domain.policy_run import RunMetadata, RunOrigin, VcsOrigin
from runplane.domain.policy_sanitize import canonical_json
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.domain.rego_v0 import compiled_source
from runplane.domain.run import RunStatus
from runplane.domain.run_options import NO_OPTIONS
from runplane.services.run_secrets import sensitive_values
from runplane.services.source_provenance import source_provenance

if TYPE_CHECKING:
    from runplane.services.repositories import (
        ArtifactRecords,
        PolicySetStore,
        WorkspaceDirectory,
    )
    from runplane.services.repositories.operations import SourceRecords
    from runplane.services.unit_of_work import RunPartIntents, UnitOfWork, UnitsOfWork

# The policy check row's states, in order.
RESERVED, BOUND = "running", "bound"
PASSED, SOFT_FAILED, FAILED, OVERRIDDEN = "passed", "soft_failed", "failed", "overridden"
MAX_ATTACHMENTS = 500


class Evaluator(Protocol):
    @property
    def runtime_identity(self) -> str: ...

    def validate(self, content: PolicySetContent) -> None: ...

    def evaluate(
        self, sets: Sequence[PolicySetContent], policy_input: Mapping[str, Any] | PolicyInputs
    ) -> list[PolicyResult]: ...


class PolicyArtifacts(Protocol):
    """What policy sets keep in the artifact store (``services.artifacts.ArtifactStore``):
    each published version's content, encrypted, read back whole."""

    def put(
        self, organization_id: str, kind: ArtifactKind, plaintext: Iterable[bytes]
    ) -> Artifact: ...

    def read(self, organization_id: str, artifact_id: str) -> bytes: ...

    def discard(self, artifact_id: str) -> None: ...


@dataclass(frozen=True)
class PublishedSet:
    name: str
    digest: str
    version: int
    policies: list[dict[str, Any]]
    attached_workspaces: tuple[str, ...]
    all_workspaces: bool
    created: bool
    warnings: tuple[str, ...] = ()
    """Publication warnings (``"unknown_input_roots": "warn"``); none on reads."""
    input_shape: str = "runplane"
    """The ``input`` document the set's policies see."""
    rego_v0_modules: tuple[str, ...] = ()
    """Modules written in Rego v0, which the evaluator upgrades each time it compiles."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "digest": self.digest,
            "version": self.version,
            "input_shape": self.input_shape,
            "rego_v0_modules": list(self.rego_v0_modules),
            "policies": self.policies,
            "attached_workspaces": list(self.attached_workspaces),
            "all_workspaces": self.all_workspaces,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Evaluation:
    input_digest: str
    outcome: str  # passed | soft_failed | hard_failed
    results: list[PolicyResult]
    policy_sets: list[dict[str, str]]
    runtime: str

    def body(self, check: PolicyCheck) -> PolicyCheck:
        """``check`` with this evaluation's evidence and its digest recorded."""
        evidence = {
            "input_digest": self.input_digest,
            "outcome": self.outcome,
            "policy_sets": self.policy_sets,
            "runtime": self.runtime,
            "results": [result.to_dict() for result in self.results],
        }
        return replace(
            check,
            input_digest=self.input_digest,
            outcome=self.outcome,
            policy_sets=tuple(self.policy_sets),
            runtime=self.runtime,
            results=tuple(result.to_dict() for result in self.results),
            result_digest="sha256:" + hashlib.sha256(canonical_json(evidence)).hexdigest(),
        )


@dataclass(frozen=True)
class _Summary:
    """What listings say about a version's content (derived from it, immutable)."""

    input_shape: str
    rego_v0_modules: tuple[str, ...]

    @classmethod
    def of(cls, content: PolicySetContent) -> _Summary:
        return cls(
            content.input_shape,
            tuple(m.name for m in content.modules if compiled_source(m.name, m.source).v0),
        )


def _published(
    head: PolicySetHead,
    created: bool,
    summary: _Summary,
    warnings: Sequence[str] = (),
) -> PublishedSet:
    return PublishedSet(
        head.name,
        head.current_digest,
        head.versions,
        head.policies,
        head.attached_workspaces,
        head.all_workspaces,
        created,
        tuple(warnings),
        summary.input_shape,
        summary.rego_v0_modules,
    )


class Policies:
    def __init__(
        self,
        clock: Clock,
        artifacts: PolicyArtifacts,
        evaluator: Callable[[], Evaluator],
        sets: PolicySetStore,
        directory: WorkspaceDirectory,
        *,
        units: UnitsOfWork,
        sources: SourceRecords,
        records: ArtifactRecords,
    ) -> None:
        self._clock = clock
        # A run's parts (its plan, input, policy check and approval) are read and
        # written through a unit of work; its source provenance through the seams.
        self._units = units
        self._sources = sources
        self._records = records
        self._artifacts = artifacts
        self._sets = sets
        self._directory = directory
        # Built on first use: the Rego engine is loaded only where policies run.
        self._evaluator = evaluator
        # By digest: a published version's content never changes.
        self._summaries: dict[str, _Summary] = {}

    @property
    def runtime_identity(self) -> str:
        return self._evaluator().runtime_identity

    # -- publishing and attaching ------------------------------------------------------------

    def publish(self, principal: Principal, document: Mapping[str, Any]) -> PublishedSet:
        """Validate and publish a version; publishing the current content again is a no-op."""
        principal.require(Permission.POLICY_MANAGE)
        content = policy_set_from_document(dict(document))
        warnings = check_input_roots(content)
        self._evaluator().validate(content)
        org, digest = principal.organization_id, content.digest()
        head = self._sets.find(org, content.name)
        summary = self._summaries.setdefault(digest, _Summary.of(content))
        if head is not None and head.current_digest == digest:
            return _published(head, created=False, summary=summary, warnings=warnings)
        policies = [
            {"name": p.name, "enforcement": p.enforcement.value, "description": p.description}
            for p in content.policies
        ]
        now = self._clock.now()
        earlier = self._sets.version_artifact_id(org, content.name, digest)
        if earlier is not None:
            # The same content was published before: it becomes current again.
            artifact_id = earlier
        else:
            stored = self._artifacts.put(
                org, ArtifactKind.POLICY_SET, [canonical_json(content.to_document())]
            )
            artifact_id = stored.id
        try:
            self._sets.publish(
                org,
                content.name,
                digest,
                artifact_id,
                policies,
                previous=head,
                by=principal.ref,
                now=now,
                version_exists=earlier is not None,
            )
        except Exception:
            if earlier is None:
                self._artifacts.discard(artifact_id)
            raise
        return _published(
            self._sets.get(org, content.name), created=True, summary=summary, warnings=warnings
        )

    def attach(
        self,
        principal: Principal,
        name: str,
        workspace_ids: Sequence[str],
        all_workspaces: bool,
    ) -> PublishedSet:
        """Set where a policy set applies: named workspaces, or every workspace."""
        principal.require(Permission.POLICY_MANAGE)
        head = self._sets.get(principal.organization_id, name)
        unique = sorted(set(workspace_ids))
        if len(unique) > MAX_ATTACHMENTS:
            raise InvalidInput(f"at most {MAX_ATTACHMENTS} workspaces", "/workspaces")
        for index, workspace_id in enumerate(unique):
            try:
                workspace = self._directory.get_workspace(workspace_id)
            except NotFound:
                workspace = None
            # Another organization's workspace is as absent as a missing one.
            if workspace is None or workspace.organization_id != principal.organization_id:
                raise NotFound("workspace", workspace_id, f"/workspaces/{index}")
        self._sets.attach(head, unique, all_workspaces, by=principal.ref, now=self._clock.now())
        return self._read(self._sets.get(principal.organization_id, name))

    def list(self, principal: Principal) -> list[PublishedSet]:
        # Policy sets belong to the organization, not to a workspace: a runner
        # session, confined to its run's workspace, cannot read them.
        principal.require(Permission.ORGANIZATION_READ)
        return [self._read(h) for h in self._sets.all_of(principal.organization_id)]

    def get(self, principal: Principal, name: str) -> PublishedSet:
        principal.require(Permission.ORGANIZATION_READ)
        return self._read(self._sets.get(principal.organization_id, name))

    def _read(self, head: PolicySetHead) -> PublishedSet:
        summary = self._summaries.get(head.current_digest)
        if summary is None:
            summary = _Summary.of(self._content(head.org_id, head))
            self._summaries[head.current_digest] = summary
        return _published(head, created=False, summary=summary)

    # -- a run's policy check ---------------------------------------------------------------

    def policy_inputs(
        self,
        run: Run,
        plan_part: RunPart | None = None,
        input_part: RunPart | None = None,
        *,
        workspace: Workspace | None = None,
    ) -> PolicyInputs:
        """Every input shape of the run's plan, sanitized: all the evaluator ever sees.
        The check binds the ``runplane`` document's digest; each set's results record
        the digest of the document of its own shape. ``plan_part``, ``input_part`` and
        ``workspace`` are the run's plan and input parts and its workspace if the caller
        has read them already."""
        if plan_part is None or input_part is None:
            with self._units() as uow:
                parts = uow.parts.several(run.id, ["plan", "input"])
            plan_part = required_part(parts, run.id, "plan")
            input_part = parts.get("input")
        plan = PlanEvidence.from_body(plan_part.body)
        options = RunInput.from_body(input_part.body).options if input_part else NO_OPTIONS
        plan_json = self._artifacts.read(run.organization_id, plan.plan_json_artifact_id)
        if workspace is None:
            workspace = self._directory.get_workspace(run.workspace_id)
        meta = RunMetadata(
            workspace=workspace.name,
            kind=run.kind.value,
            engine_version=plan.engine_version or "",
            run_id=run.id,
            created_at=run.created_at.isoformat(),
            workspace_id=workspace.id,
            tags=workspace.tag_names,
            options=options.for_kind(run.kind),
            origin=lambda: self.run_origin(run, input_part),
        )
        governing = (workspace.id, *filter(None, [workspace.preview_of]))
        # A value the configuration unmarked (nonsensitive()) is still the run's secret:
        # policies never see it, so no result or message can repeat it.
        secrets = sensitive_values(
            self._artifacts.read, run.organization_id, input_part.body if input_part else {}
        )
        inputs = PolicyInputs(without_secrets(json.loads(plan_json), secrets), meta, governing)
        # Asked here, among the run's first reads: the organization's tally is served
        # only where it was read ahead with the run, before the step's first write.
        inputs.no_policy_sets = self._sets.counted_none(run.organization_id)
        return inputs

    def run_origin(self, run: Run, snapshot: RunPart | None = None) -> RunOrigin:
        """The run's message, whether a drift schedule created it, and the commit it came
        from: read only when a set's shape says something about them (``snapshot``: the
        run's input part, if the caller read it already)."""
        if snapshot is None:
            with self._units() as uow:
                snapshot = uow.parts.get(run.id, "input")
        if snapshot is None:
            return RunOrigin()
        inputs = RunInput.from_body(snapshot.body)
        return RunOrigin(
            message=inputs.message,
            drift_detection=inputs.schedule is not None,
            vcs=VcsOrigin.from_provenance(
                source_provenance(
                    run, inputs.configuration_version_id, self._sources, self._records
                )
            ),
        )

    def policy_input(self, run: Run) -> dict[str, Any]:
        """The ``runplane``-shaped sanitized derivative of the run's plan."""
        return self.policy_inputs(run).document("runplane")

    @staticmethod
    def bind(
        parts: RunPartIntents,
        run: Run,
        check: RunPart,
        digest: str,
        now: datetime,
        plan: RunPart | None,
    ) -> RunPart:
        """Intend to bind the reserved row to the exact input digest: only the row this
        run's plan commit reserved (``plan`` is the run's plan part), only once. Returns
        the row as it will read once that commits."""
        if plan is None or plan.state != PlanEvidenceState.COMMITTED or check.state != RESERVED:
            raise PolicyBindingRefused(
                f"run {run.id}: the policy check is {check.state}; only the row reserved "
                "by the run's committed plan can be bound, once"
            )
        body = replace(PolicyCheck.from_body(check.body), input_digest=digest).to_body()
        parts.change(
            run.id,
            "policy",
            expected_state=RESERVED,
            state=BOUND,
            body=body,
            now=now,
            on_refused=lambda current: PolicyBindingRefused(
                f"run {run.id}: the policy check was bound meanwhile"
            ),
        )
        return replace(check, state=BOUND, body=body, updated_at=now)

    def evaluate(
        self, run: Run, policy_input: PolicyInputs | dict[str, Any], digest: str | None = None
    ) -> Evaluation:
        """Evaluate every policy set attached to the run's workspace, as published now
        (or, for an organization that had none, when the step read its run), each against
        the document of its input shape. ``digest`` is the ``runplane``
        document's digest if the caller has it already; a plain document stands for the
        ``runplane`` shape (the others are derived from the run's plan)."""
        if isinstance(policy_input, PolicyInputs):
            inputs = policy_input
        else:
            inputs = self.policy_inputs(run)
            inputs.preset("runplane", policy_input)
        # A pull request's preview is governed by its bound workspace's sets too (of the
        # same organization, which had none when the step read its run: no query).
        published = [] if inputs.no_policy_sets else self._sets.all_of(run.organization_id)
        heads = [
            h
            for h in published
            if any(h.applies_to(w) for w in inputs.governing or (run.workspace_id,))
        ]
        evaluator = self._evaluator()
        sets = [self._content(run.organization_id, head) for head in heads]
        results = evaluator.evaluate(sets, inputs) if sets else []
        return Evaluation(
            input_digest=digest or inputs.digest("runplane"),
            outcome=overall(results),
            results=results,
            policy_sets=[
                {
                    "name": head.name,
                    "digest": head.current_digest,
                    "input_shape": content.input_shape,
                    "input_digest": inputs.digest(content.input_shape),
                }
                for head, content in zip(heads, sets, strict=True)
            ],
            runtime=evaluator.runtime_identity,
        )

    @staticmethod
    def record(
        parts: RunPartIntents, run: Run, check: RunPart, evaluation: Evaluation, now: datetime
    ) -> RunPart:
        """Intend the results, written only onto a row bound to exactly this input
        digest. The check as it reads once they are written."""
        bound = PolicyCheck.from_body(check.body)
        if check.state != BOUND or bound.input_digest != evaluation.input_digest:
            raise PolicyBindingRefused(
                f"run {run.id}: policy results can only be recorded on a check bound to "
                "their exact input digest"
            )
        state = {"passed": PASSED, "soft_failed": SOFT_FAILED}.get(evaluation.outcome, FAILED)
        body = evaluation.body(bound).to_body()
        parts.change(
            run.id,
            "policy",
            expected_state=BOUND,
            state=state,
            body=body,
            now=now,
            on_refused=lambda current: PolicyBindingRefused(
                f"run {run.id}: the policy check changed meanwhile"
            ),
        )
        return replace(check, state=state, body=body)

    def override(self, principal: Principal, run: Run, reason: str) -> None:
        """Override a soft-mandatory failure, with a reason, bound into the approval."""
        principal.require(Permission.POLICY_OVERRIDE, run.workspace_id)
        reason = reason.strip()
        if not reason:
            raise InvalidInput("an override needs a reason", "/reason")
        with self._units() as uow:
            found = uow.parts.several(run.id, ["policy", "approval"])
            self._override(uow, principal, run, reason, found["policy"], found["approval"])

    def _override(
        self,
        uow: UnitOfWork,
        principal: Principal,
        run: Run,
        reason: str,
        check: RunPart | None,
        approval: RunPart | None,
    ) -> None:
        if (
            run.status is not RunStatus.AWAITING_APPROVAL
            or check is None
            or check.state != SOFT_FAILED
            or approval is None
            or approval.state != ApprovalState.WAITING
        ):
            state = check.state if check else "missing"
            raise Conflict(
                f"run {run.id} is {run.status} with its policy check {state}: only a "
                "soft-mandatory failure awaiting approval can be overridden"
            )
        now = self._clock.now()
        override = {
            "by": principal.ref,
            "display": principal.display,
            "at": now.isoformat(),
            "reason": reason[:1000],
            "result_digest": PolicyCheck.from_body(check.body).result_digest,
        }
        waiting = ApprovalBody.from_body(approval.body)
        bound = replace(waiting, binding=replace(waiting.binding, policy_override=override))
        stale = Conflict(f"run {run.id} changed meanwhile; review it again")
        uow.parts.change(
            run.id,
            "policy",
            expected_state=SOFT_FAILED,
            state=OVERRIDDEN,
            body=replace(PolicyCheck.from_body(check.body), override=override).to_body(),
            now=now,
            on_refused=lambda current: stale,
        )
        uow.parts.change(
            run.id,
            "approval",
            expected_state=ApprovalState.WAITING,
            body=bound.to_body(),
            now=now,
            on_refused=lambda current: stale,
        )
        # One override per run (the check leaves soft-failed once): its record's ID is
        # derived, so a retried commit cannot record it twice.
        uow.audit.security(
            AuditRecord.of(
                principal,
                AuditAction.POLICY_OVERRIDDEN,
                "run",
                run.id,
                at=now,
                id=derived_id(IdKind.AUDIT_EVENT, run.id, AuditAction.POLICY_OVERRIDDEN),
                details={"workspace_id": run.workspace_id, "reason": reason[:200]},
            )
        )
        uow.commit()

    # -- helpers ------------------------------------------------------------------------------

    def _content(self, org_id: str, head: PolicySetHead) -> PolicySetContent:
        document = json.loads(self._artifacts.read(org_id, head.current_artifact_id))
        content = policy_set_from_document(document)
        if content.digest() != head.current_digest:
            raise ArtifactCorrupt(
                head.current_artifact_id,
                "digest",
                "the policy set differs from its published digest",
            )
        return content
