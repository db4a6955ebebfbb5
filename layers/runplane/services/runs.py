"""Runs as people and CI see them: configuration uploads, creation, reviews, decisions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from runplane.adapters.launchers import Launcher
from runplane.adapters.workflow import Workflow
from runplane.domain.approval_decisions import approval_after
from runplane.domain.artifacts import Artifact, ArtifactKind
from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.cloud_settings import CredentialDecisions, PinnedCredentials
from runplane.domain.creation import FIRST_VERSION, CallerRecord, ConfigurationVersion
from runplane.domain.entities import Run
from runplane.domain.errors import (
    AlreadyDecided,
    ApprovalExpired,
    ConcurrentChange,
    Conflict,
    InvalidInput,
    NotFound,
    PartTokenChanged,
    PolicyOverrideRequired,
    SeparationOfDuties,
    TransitionRejected,
)
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.paging import Page
from runplane.domain.parts import (
    OPEN_ATTEMPT,
    UNDECIDED,
    ApplyRecord,
    ApprovalBody,
    ApprovalState,
    AttemptBody,
    AttemptState,
    PlanEvidence,
    RunInput,
    RunPart,
    optional_text,
)
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus, dashboard_label
from runplane.domain.run_options import NO_OPTIONS, RunOptions
from runplane.domain.tfe_runs import REMOTE_OPERATION
from runplane.domain.variable_precedence import check_resolved, resolve
from runplane.domain.variables import (
    PinnedVariables,
    VariableCategory,
    VariableSource,
    check_variables,
)
from runplane.services.artifacts import ArtifactStore
from runplane.services.launch_controls import LaunchControls
from runplane.services.lifecycle import RunLifecycle
from runplane.services.policy import SOFT_FAILED
from runplane.services.recovery import recovery_panel
from runplane.services.source_provenance import source_provenance
from runplane.services.unit_of_work import UnitOfWork, UnitsOfWork
from runplane.services.variable_sets import VariableSets
from runplane.services.variables import WorkspaceVariables
from runplane.services.workspaces import Workspaces
from runplane.services.writer import hand_off

if TYPE_CHECKING:
    from runplane.services.cloud_settings import WorkspaceCloudSettings
    from runplane.services.repositories import ArtifactRecords, RunReader, StateVersionReader
    from runplane.services.repositories.creation import (
        ConfigurationVersions,
        RunCreations,
        TriggerClaims,
    )
    from runplane.services.repositories.operations import SourceRecords

# A cancellation retries when the run moves under it, until the run has ended.
CANCEL_ATTEMPTS = 3
# A run listing shows a workspace's newest runs, this many unless asked for fewer.
LISTED_RUNS = 100


@dataclass(frozen=True)
class ConfigurationUpload:
    id: str
    upload_url: str
    expires_at: datetime


@dataclass(frozen=True)
class ReviewReads:
    """Where a run's review reads what it shows besides the run's own records."""

    runs: RunReader
    claims: TriggerClaims
    """The runs a run's apply triggered in its dependents (or why not)."""
    state_versions: StateVersionReader
    sources: SourceRecords
    artifacts: ArtifactRecords
    """With ``sources``: where the run's configuration came from."""


@dataclass(frozen=True)
class Decision:
    run: Run
    """The run as the decision left it (a rejection moved it; an approval did not)."""
    decision: str
    token: str | None

    @property
    def run_id(self) -> str:
        return self.run.id


# A decision is written again when the workflow's wait stored its token between its read
# and its write (once per wait; one more try to spare).
_DECIDE_TRIES = 3


class Runs:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        lifecycle: RunLifecycle,
        workspaces: Workspaces,
        artifacts: ArtifactStore,
        workflow: Workflow,
        *,
        definition_version: str,
        build_sha: str,
        launch_controls: LaunchControls,
        runner_release: str,
        engine_versions: frozenset[str] = frozenset(),
        units: UnitsOfWork,
        creations: RunCreations[Any],
        configurations: ConfigurationVersions[Any],
        review_reads: ReviewReads,
        workspace_variables: WorkspaceVariables | None = None,
        cloud_settings: WorkspaceCloudSettings | None = None,
        variable_sets: VariableSets | None = None,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._lifecycle = lifecycle
        self._workspaces = workspaces
        self._artifacts = artifacts
        self._workflow = workflow
        self._definition_version = definition_version
        self._build_sha = build_sha
        self._launch_controls = launch_controls
        self._runner_release = runner_release
        # The engine versions the runner image provides; empty: whatever it runs.
        self._engine_versions = engine_versions
        self._workspace_variables = workspace_variables
        # The workspace's cloud settings a new run pins as its credential decisions.
        self._cloud_settings = cloud_settings
        self._variable_sets = variable_sets
        self._reads = review_reads
        self._reader = review_reads.runs
        # A run is created with its input and its caller's records in one write.
        self._creations = creations
        self._configurations = configurations
        # A unit of work per decision or cancellation: its reads, and its writes
        # committed together.
        self._units = units

    # -- configuration versions ----------------------------------------------------------

    def new_configuration_upload(
        self, principal: Principal, workspace_id: str
    ) -> ConfigurationUpload:
        workspace = self._workspaces.by_id(principal, workspace_id)
        require_run_creation(principal, workspace.id, may_apply=False)
        upload = self._artifacts.new_inbox_upload(workspace.organization_id)
        cv_id = self._ids.new(IdKind.CONFIGURATION_VERSION)
        self._configurations.create(
            ConfigurationVersion(
                id=cv_id,
                organization_id=workspace.organization_id,
                workspace_id=workspace.id,
                status="pending",
                upload_id=upload.upload_id,
                created_at=self._clock.now(),
                expires_at=upload.expires_at + timedelta(days=1),
            )
        )
        return ConfigurationUpload(cv_id, upload.url, upload.expires_at)

    def finalize_configuration(self, principal: Principal, cv_id: str) -> dict[str, Any]:
        """Stream the uploaded archive into an encrypted artifact (413 past 100 MB)."""
        version = self.configuration_version(principal, cv_id)
        require_run_creation(principal, version.workspace_id, may_apply=False)
        if version.status != "pending":
            raise Conflict(f"configuration version {cv_id} was already uploaded")
        # The artifact and the version naming it are one write: if another finalize won,
        # neither is stored.
        artifact = self._artifacts.ingest(
            version.organization_id,
            ArtifactKind.CONFIGURATION,
            version.upload_id,
            together=lambda stored: self._configurations.record_upload(
                cv_id, version.workspace_id, stored, self._clock.now()
            ),
        )
        # As the version now reads (``configuration``), from what was written.
        return _configuration_reply(
            cv_id,
            version.workspace_id,
            "uploaded",
            artifact.sha256 or "",
            artifact.size or 0,
            artifact.id,
        )

    def store_configuration(self, version: ConfigurationVersion, archive: bytes) -> None:
        """Encrypt an archive received whole (the TFE upload URL) into the configuration
        version's artifact; as a finalize does, only while the version is pending."""
        if version.status != "pending":
            raise Conflict(f"configuration version {version.id} was already uploaded")
        self._artifacts.put(
            version.organization_id,
            ArtifactKind.CONFIGURATION,
            [archive],
            together=lambda stored: self._configurations.record_upload(
                version.id, version.workspace_id, stored, self._clock.now()
            ),
        )

    def configuration(self, principal: Principal, cv_id: str) -> dict[str, Any]:
        version = self.configuration_version(principal, cv_id)
        return _configuration_reply(
            version.id,
            version.workspace_id,
            version.status,
            version.sha256,
            version.size,
            version.artifact_id,
        )

    def configuration_version(self, principal: Principal, cv_id: str) -> ConfigurationVersion:
        """The version, if ``principal`` may see its workspace (else not found)."""
        version = self._configurations.get(cv_id)
        if version is None:
            raise NotFound("configuration version", cv_id)
        if not principal.can_see_workspace(version.organization_id, version.workspace_id):
            raise NotFound("configuration version", cv_id)
        return version

    # -- runs -----------------------------------------------------------------------------

    def create(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        kind: RunKind,
        configuration_version_id: str,
        engine_version: str | None,
        variables: Mapping[str, str],
        message: str | None = None,
        remote_operation: bool = False,
        extra_input: Mapping[str, Any] | None = None,
        records: Sequence[CallerRecord] = (),
        run_id: str | None = None,
        options: RunOptions = NO_OPTIONS,
    ) -> Run:
        """Create the durable run (``dispatch_pending``) and start its workflow.

        ``extra_input`` joins the input snapshot (where the run came from); the
        caller's ``records`` (a schedule's fire, a trigger's claim) are written with the
        run, or nothing is, and each refusal is raised as its record's typed error;
        ``run_id`` is the ID the caller generated for the run, if it did; ``options``
        (destroy, refresh-only, targets, replacements) are pinned with the inputs."""
        options = options.for_kind(kind)
        # The workspace, the configuration and the launch controls, in one read.
        with self._creations.reading_ahead(
            workspace_id,
            configuration_version_id,
            self._launch_controls.scopes(principal.organization_id),
            principal.organization_id,
        ):
            workspace = self._workspaces.by_id(principal, workspace_id)
            require_run_creation(principal, workspace.id, may_apply=kind.may_apply)
            # Checked before anything is written: a denied launch leaves no trace.
            self._launch_controls.check(workspace.organization_id, self._runner_release)
            configuration = self.configuration(principal, configuration_version_id)
            if configuration["workspace_id"] != workspace.id:
                raise NotFound("configuration version", configuration_version_id)
            if configuration["status"] != "uploaded":
                raise InvalidInput(
                    f"configuration version {configuration_version_id} has not been uploaded",
                    "/configuration_version_id",
                )
            check_variables(variables)
            # The workspace's variables and its variable sets as they are now, under the
            # run's own: plan and apply read this one pinned set, and the approval binds
            # to it (docs/runs.md, "Variable precedence").
            pinned = (
                self._workspace_variables.pinned(workspace)
                if self._workspace_variables
                else PinnedVariables({})
            )
            # Its cloud settings as they are now: which identities each phase may get,
            # shown in the review; a later change of the settings changes no run.
            credentials = (
                self._cloud_settings.pinned(workspace, may_apply=kind.may_apply)
                if self._cloud_settings
                else PinnedCredentials(CredentialDecisions())
            )
            sets = self._variable_sets.pinned_for(workspace) if self._variable_sets else []
        resolved = resolve(variables, pinned, sets)
        check_resolved(resolved)
        if engine_version and self._engine_versions and engine_version not in self._engine_versions:
            raise InvalidInput(
                f"engine version {engine_version} is not available here; this deployment "
                f"runs {', '.join(sorted(self._engine_versions))}",
                "/engine_version",
            )
        now = self._clock.now()
        run = Run(
            id=run_id or self._ids.new(IdKind.RUN),
            organization_id=workspace.organization_id,
            workspace_id=workspace.id,
            kind=kind,
            status=RunStatus.DISPATCH_PENDING,
            version=FIRST_VERSION,
            created_at=now,
            updated_at=now,
            created_by=principal.ref,
            definition_version=self._definition_version,
            build_sha=self._build_sha,
            runner_release=self._runner_release,
        )
        snapshot = {
            # Who created it, as a person reads it (the review names the creator by
            # this, beside the reference): the principal's own words, bounded.
            "created_by_display": principal.display[:200],
            "configuration_version_id": configuration_version_id,
            "configuration_artifact_id": configuration["artifact_id"],
            "configuration_sha256": configuration["sha256"],
            "variables_artifact_id": None,
            "variable_names": sorted(resolved.terraform),
            "workspace_variable_names": resolved.workspace_names,
            # What the runner tells the engine is sensitive (docs/runs.md).
            "sensitive_variable_names": resolved.sensitive_names,
            # Every variable's category, source and sensitivity, never a value: what the
            # review shows.
            "variables": resolved.entries(),
            "engine_version": engine_version or workspace.terraform_version or "",
            "workspace_name": workspace.name,
            "organization_name": self._workspaces.organization_name(workspace.organization_id),
        }
        if message:
            snapshot["message"] = message
        if remote_operation:
            snapshot["source"] = REMOTE_OPERATION
        snapshot.update(extra_input or {})
        snapshot.update(credentials.input_fields())
        if not options.default:
            snapshot["options"] = options.to_body()

        def pinning(variables: Artifact) -> Any:
            body = {**snapshot, "variables_artifact_id": variables.id}
            return self._creations.writes(run, actor=principal.ref, input=body, records=records)

        document = resolved.document()
        if document is not None:
            # The variables and the run that pins them are one write: refused, neither
            # is stored.
            self._artifacts.put(
                workspace.organization_id,
                ArtifactKind.VARIABLES,
                [document],
                together=pinning,
            )
        else:
            self._creations.create(run, actor=principal.ref, input=snapshot, records=records)
        self.start_workflow(run)
        return run

    def start_workflow(self, run: Run) -> None:
        """Start the run's execution. A failed dispatch leaves the run dispatch_pending;
        starting again is safe: the execution is named by the run ID, and Step Functions
        answers a second start of that name with the first execution (or
        ExecutionAlreadyExists once it closed, which the adapter treats as started)."""
        self._workflow.start(run)

    def get(self, principal: Principal, run_id: str) -> Run:
        try:
            run = self._reader.get_run(run_id)
        except NotFound:
            raise NotFound("run", run_id) from None
        return _seen_by(principal, run)

    @staticmethod
    def _visible(principal: Principal, run_id: str, uow: UnitOfWork) -> Run:
        """``get``, read through ``uow``."""
        try:
            run = uow.runs.get(run_id)
        except NotFound:
            raise NotFound("run", run_id) from None
        return _seen_by(principal, run)

    @staticmethod
    def _visible_with(
        principal: Principal, run_id: str, names: list[str], uow: UnitOfWork
    ) -> tuple[Run, dict[str, RunPart | None]]:
        """``get``, with the named parts of the run read in the same request."""
        try:
            run, parts = uow.runs.with_parts(run_id, names)
        except NotFound:
            raise NotFound("run", run_id) from None
        return _seen_by(principal, run), parts

    def list(self, principal: Principal, workspace_id: str, limit: int = LISTED_RUNS) -> list[Run]:
        """The workspace's newest ``limit`` runs, newest first: a workspace's history
        grows without bound, and a listing reads only what it returns."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.RUN_READ, workspace.id)
        return self._reader.runs_of_workspace(workspace.id, limit=limit)

    def page(
        self, principal: Principal, workspace_id: str, number: int = 1, size: int = 20
    ) -> Page[Run]:
        """Page ``number`` of the workspace's runs, newest first (``InvalidInput`` for a
        page number below 1 or a size outside 1 to 100). The runs up to this page and
        one more are read, not the workspace's whole history: ``total`` counts those, so
        a page with runs after it says there is at least one more page."""
        Page.of([], number, size)  # refuses a bad page before anything is read
        return Page.of(self.list(principal, workspace_id, number * size + 1), number, size)

    def review(self, principal: Principal, run_id: str) -> dict[str, Any]:
        return self.review_of(self.get(principal, run_id))

    def review_of(self, run: Run) -> dict[str, Any]:
        """The review of ``run`` as the caller already holds it, read or just written
        (a reply to a write names the run as that write left it)."""
        with self._units() as uow:
            return build_review(run, self._reads, self._clock.now(), uow)

    # -- decisions ---------------------------------------------------------------------------

    def decide(
        self,
        principal: Principal,
        run_id: str,
        decision: str,
        comment: str | None,
        binding: Mapping[str, object] | None = None,
    ) -> Decision:
        """Record an approval or rejection before the deadline and resume the workflow's
        wait for it (if the wait already ended, the workflow reads the decision itself).

        The decision is one unit of work: the approval's change from waiting and, for
        an approval, the policy evidence unchanged, or, for a rejection, the run's move
        (with the writer reservation's release), written together or not at all."""
        if decision not in {"approve", "reject"}:
            raise InvalidInput("decision must be approve or reject", "/decision")
        with self._units() as uow:
            # The run, its approval and the policy evidence an approval binds, in one read.
            run, parts = self._visible_with(principal, run_id, ["approval", "policy"], uow)
            principal.require(Permission.RUN_APPROVE, run.workspace_id)
            now = self._clock.now()
            approval = _decidable(run, parts["approval"], now, binding)
            policy = parts["policy"] if decision == "approve" else None
            if decision == "approve":
                _check_separation(principal, run, approval)
                if policy is not None and policy.state == SOFT_FAILED:
                    raise PolicyOverrideRequired(run.id)
            state, body = approval_after(
                run.id, approval.state, approval.body, decision, principal.ref, now, comment
            )
            record = AuditRecord.of(
                principal,
                AuditAction.RUN_APPROVED if decision == "approve" else AuditAction.RUN_REJECTED,
                "run",
                run.id,
                at=now,
                id=self._ids.new(IdKind.AUDIT_EVENT),
                details={"workspace_id": run.workspace_id, "approval": state.value},
            )
            token = approval.token
            for _ in range(_DECIDE_TRIES):
                uow.parts.change(
                    run.id,
                    "approval",
                    # Conditioned on the state read: a concurrent first approval that
                    # committed first makes this one lose, never overwrite it. And on the
                    # wait's token as known: the decision then knows whether it has a
                    # wait to resume without reading the approval again.
                    expected_state=approval.state,
                    expected_token=token,
                    state=state,
                    body=body,
                    now=now,
                    on_refused=lambda held: AlreadyDecided(run.id, run.status, held),
                )
                if policy is not None and state is ApprovalState.APPROVED:
                    # The approval holds only for the policy evidence the reviewer saw.
                    uow.parts.change(run.id, "policy", expected_state=policy.state, now=now)
                if decision == "reject":
                    uow.runs.move(run, RunStatus.REJECTED, actor=principal.ref, reason="rejected")
                uow.audit.security(record)
                try:
                    moved = uow.commit()
                    break
                except PartTokenChanged as changed:
                    # The workflow stored its wait's token after the read (the refused
                    # commit wrote nothing): write again, naming that token.
                    token = changed.token
                except (AlreadyDecided, ConcurrentChange, TransitionRejected):
                    raise self._decided_meanwhile(run.id) from None
            else:
                raise self._decided_meanwhile(run.id)
        if state is ApprovalState.WAITING_SECOND:
            # The workflow's wait goes on: nothing is resumed until the last approval.
            return Decision(run, "approve_first", None)
        decided = run
        if moved is not None:
            hand_off(self._workflow, moved.handoff)
            decided = moved.run
        # Exactly the token the write was conditioned on: a wait that stores its token after
        # the decision finds it decided and resumes itself.
        if token:
            self._workflow.resume(token, {"decision": decision})
        return Decision(decided, decision, token)

    def _decided_meanwhile(self, run_id: str, *, deciding: bool = True) -> Conflict:
        """Why a decision or cancellation lost its race, as the database holds it now."""
        with self._units() as uow:
            current = uow.runs.get(run_id)
            approval = uow.parts.get(run_id, "approval")
        if deciding and current.status is RunStatus.EXPIRED:
            return ApprovalExpired(run_id)
        return AlreadyDecided(run_id, current.status, approval.state if approval else None)

    # -- cancellation ------------------------------------------------------------------------

    def cancel(self, principal: Principal, run_id: str, launcher: Launcher) -> Run:
        """Cancel a run that has not ended, as a durable signal decided by one write.

        Before apply the run ends ``canceled`` (its reservation or queue place is
        released in the same write). During apply a cancellation that wins the
        race with the apply result ends it ``apply_interrupted`` and the writer
        authority stays held until recovery; one that loses is refused with the
        run's real outcome. Sandboxes are stopped and the workflow's waits ended.

        Each try is one unit of work: the run, its parts and its wait in the writer
        queue read through it, and the cancel signal, the waiting approval's change,
        the open attempts' closes and the run's move written together or not at all.
        """
        for _ in range(CANCEL_ATTEMPTS):
            with self._units() as uow:
                run = self._visible(principal, run_id, uow)
                principal.require(Permission.RUN_CANCEL, run.workspace_id)
                if run.status.is_terminal:
                    break
                try:
                    return self._cancel(principal, run, launcher, uow)
                except (AlreadyDecided, TransitionRejected, ConcurrentChange):
                    # The run moved (or was decided) meanwhile: look at it again.
                    continue
        raise self._decided_meanwhile(run_id, deciding=False)

    def _cancel(self, principal: Principal, run: Run, launcher: Launcher, uow: UnitOfWork) -> Run:
        target = (
            RunStatus.APPLY_INTERRUPTED if run.status is RunStatus.APPLYING else RunStatus.CANCELED
        )
        parts = uow.parts.all_of(run.id)
        tokens = [part.token for part in parts.values() if part.token]
        waiter = uow.writer.waiter_token(run)
        now = self._clock.now()
        uow.parts.put(
            run.id,
            "signal#cancel",
            state="accepted",
            body={"requested_by": principal.ref, "requested_at": now.isoformat()},
            now=now,
        )
        approval = parts.get("approval")
        if approval is not None and approval.state in UNDECIDED:
            uow.parts.change(
                run.id,
                "approval",
                expected_state=UNDECIDED,
                state=ApprovalState.CANCELED,
                token=None,
                now=now,
                on_refused=lambda held: AlreadyDecided(run.id, run.status, held),
            )
        attempts = [
            part
            for name, part in parts.items()
            if name.startswith("attempt#") and part.state in OPEN_ATTEMPT
        ]
        for attempt in attempts:
            uow.attempts.close(attempt, AttemptState.STOPPED, now=now)
        uow.runs.move(run, target, actor=principal.ref, reason=f"canceled by {principal.display}")
        moved = uow.commit()
        if moved is None:
            raise ConcurrentChange(f"run {run.id}: the cancellation's move was not committed")
        hand_off(self._workflow, moved.handoff)
        for attempt in attempts:
            reference = AttemptBody.from_body(attempt.body).sandbox_ref
            if reference:
                launcher.stop(reference)
        for token in [*tokens, *([waiter] if waiter else [])]:
            self._workflow.fail(token, "RunEnded", f"run {run.id} was canceled")
        return moved.run


def _decidable(
    run: Run, approval: RunPart | None, now: datetime, binding: Mapping[str, object] | None
) -> RunPart:
    """The run's approval, if a decision on ``binding`` may be recorded on it now."""
    if run.status is RunStatus.EXPIRED or (approval and approval.state == ApprovalState.EXPIRED):
        raise ApprovalExpired(run.id)
    if approval is not None and (approval.state not in UNDECIDED or run.status.is_terminal):
        raise AlreadyDecided(run.id, run.status, approval.state)
    if run.status is not RunStatus.AWAITING_APPROVAL or approval is None:
        raise Conflict(f"run {run.id} is {run.status}, not awaiting approval")
    if run.approval_expires_at is not None and now >= run.approval_expires_at:
        raise ApprovalExpired(run.id)
    different = ApprovalBody.from_body(approval.body).binding.differs(binding or {})
    if different is not None:
        raise Conflict(
            f"run {run.id} awaits a decision on a different {different}: "
            "review the run again before deciding"
        )
    return approval


def build_review(run: Run, reads: ReviewReads, now: datetime, uow: UnitOfWork) -> dict[str, Any]:
    """The run review: every fact from the database, nothing inferred from the deployment."""
    stages = reads.runs.stages(run.id)
    parts = reads.runs.parts(run.id)
    snapshot = RunInput.from_body(parts["input"].body if "input" in parts else {})
    applied = Stage.APPLY in stages and stages[Stage.APPLY].status is StageStatus.COMPLETED
    review: dict[str, Any] = {
        "id": run.id,
        "workspace_id": run.workspace_id,
        "kind": run.kind.value,
        "status": run.status.value,
        "label": dashboard_label(run.status, applied=applied),
        "status_reason": run.status_reason,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "created_by": run.created_by,
        "created_by_display": optional_text(snapshot.extra.get("created_by_display")),
        "workflow": {
            "execution_name": run.id,
            "definition_version": run.definition_version,
            "build_sha": run.build_sha,
        },
        "stages": [
            {
                "stage": stage.value,
                "status": stages[stage].status.value if stage in stages else "pending",
                "started_at": _iso(stages[stage].started_at) if stage in stages else None,
                "finished_at": _iso(stages[stage].finished_at) if stage in stages else None,
            }
            for stage in Stage
        ],
        "input": {
            "configuration_version_id": snapshot.configuration_version_id,
            "configuration_sha256": snapshot.configuration_sha256,
            "engine_version": snapshot.engine_version,
            "variable_names": list(snapshot.variable_names),
            # Names and where each came from; values never leave the encrypted artifact.
            "variables": variable_sources(snapshot),
            "predecessor_state_version_id": run.predecessor_sv_id,
            # Which identities each phase may get (never a credential, nor the external
            # ID): pinned at creation from the workspace's cloud settings.
            "credentials": snapshot.credentials.decisions.to_body(),
            # Destroy, refresh-only, targets and replacements: what the plan was asked.
            "options": snapshot.options.to_body(),
        },
        # Followed through persisted records; None for a run not created from a source.
        "source": source_provenance(
            run, snapshot.configuration_version_id, reads.sources, reads.artifacts
        ),
        "trigger": snapshot.trigger,
        # The drift this run was created to resolve, and how (docs/schedules.md).
        "remediation": snapshot.extra.get("remediation"),
        # The auto-destroy that created this destroy run (docs/auto-destroy.md).
        "auto_destroy": snapshot.extra.get("auto_destroy"),
        "triggered_runs": [
            {"workspace_id": t.dependent_workspace_id, "run_id": t.run_id, "skipped": t.skipped}
            for t in reads.claims.of_source(run.id)
        ],
        "plan": None,
        "policy": None,
        "approval": None,
        "apply": None,
    }
    plan = PlanEvidence.from_body(parts["plan"].body) if "plan" in parts else None
    if plan is not None:
        review["plan"] = {
            "has_changes": plan.has_changes,
            "summary": dict(plan.summary),
            "plan_sha256": plan.plan_sha256,
            "engine_version": plan.engine_version,
        }
    if "policy" in parts:
        policy = parts["policy"]
        review["policy"] = {"status": policy.state, **policy.body}
    if "approval" in parts:
        approval = parts["approval"]
        # The binding is what a decision applies to: plan, predecessor and policy digests.
        review["approval"] = {
            "status": approval.state,
            **ApprovalBody.from_body(approval.body).to_body(),
        }
    if "apply" in parts:
        review["apply"] = _apply_record(parts["apply"], reads.state_versions)
    if snapshot.schedule:
        # Created by a workspace schedule: a plan with changes there is drift.
        review["schedule"] = dict(snapshot.schedule)
        if plan is not None:
            review["drift"] = {"detected": plan.has_changes}
    review["failure"] = _failure(parts)
    review["recovery"] = recovery_panel(uow, run, now)
    return review


def variable_sources(snapshot: RunInput) -> list[dict[str, Any]]:
    """Each of the run's variables with its category, source (and variable set) and
    sensitivity, never its value. A run created before categories recorded its
    Terraform variables' names and the workspace's among them only."""
    recorded = snapshot.variable_entries
    if recorded:
        return [
            {
                "name": entry["name"],
                "category": entry.get("category", VariableCategory.TERRAFORM.value),
                "source": entry["source"],
                "sensitive": bool(entry.get("sensitive")),
                "variable_set": (
                    {"id": entry["variable_set_id"], "name": entry.get("variable_set_name")}
                    if entry.get("variable_set_id")
                    else None
                ),
            }
            for entry in recorded
        ]
    from_workspace = set(snapshot.workspace_variable_names)
    sensitive = set(snapshot.sensitive_variable_names)
    return [
        {
            "name": name,
            "category": VariableCategory.TERRAFORM.value,
            "source": (
                VariableSource.WORKSPACE if name in from_workspace else VariableSource.RUN
            ).value,
            "sensitive": name in sensitive,
            "variable_set": None,
        }
        for name in snapshot.variable_names
    ]


def _seen_by(principal: Principal, run: Run) -> Run:
    """``run`` if ``principal`` may see its workspace (otherwise it is not found) and read
    its runs."""
    if not principal.can_see_workspace(run.organization_id, run.workspace_id):
        raise NotFound("run", run.id)
    principal.require(Permission.RUN_READ, run.workspace_id)
    return run


def _check_separation(principal: Principal, run: Run, approval: RunPart) -> None:
    """With separation of duties (fixed when the approval was created, as the two-person
    rule), the run's creator may not approve it; anyone may reject it."""
    if ApprovalBody.from_body(approval.body).separation_of_duties and (
        run.created_by == principal.ref
    ):
        raise SeparationOfDuties(run.id)


def require_run_creation(principal: Principal, workspace_id: str, *, may_apply: bool) -> None:
    """Queueing a run that may change infrastructure needs ``run:create``; a
    speculative plan also ``run:plan`` (the plan level)."""
    if not may_apply and principal.may(Permission.RUN_PLAN, workspace_id):
        return
    principal.require(Permission.RUN_CREATE, workspace_id)


def _failure(parts: Mapping[str, RunPart]) -> dict[str, str] | None:
    """What the runner said about the phase that failed: the engine's error lines
    (redacted and bounded by the runner), where the status reason is one short line."""
    for phase in ("apply", "plan"):
        attempt = parts.get(f"attempt#{phase}")
        if attempt is None or attempt.state != AttemptState.FAILED:
            continue
        reason = AttemptBody.from_body(attempt.body).reason
        if reason:
            return {"phase": phase, "reason": reason}
    return None


def _apply_record(part: RunPart, state_versions: StateVersionReader) -> dict[str, Any]:
    """The apply record, reported independently from state publication."""
    body = ApplyRecord.from_body(part.body)
    pointer = body.resulting_state_version_id
    record: dict[str, Any] = {"status": part.state, "reason": body.reason}
    if pointer is None:
        record["resulting_state_version"] = {"status": "not_recorded"}
        return record
    try:
        version = state_versions.get(pointer)
    except NotFound:
        record["resulting_state_version"] = {"status": "unavailable", "id": pointer}
        return record
    record["resulting_state_version"] = {
        "status": "recorded",
        "id": version.id,
        "sha256": version.sha256,
        "md5": version.md5,
        "serial": version.serial,
        "created_at": version.created_at.isoformat(),
    }
    return record


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _configuration_reply(
    cv_id: str,
    workspace_id: str,
    status: str,
    sha256: str | None,
    size: int | None,
    artifact_id: str | None,
) -> dict[str, Any]:
    """A configuration version as the API shows it."""
    return {
        "id": cv_id,
        "workspace_id": workspace_id,
        "status": status,
        "sha256": sha256,
        "size": size,
        "artifact_id": artifact_id,
    }
