"""Remote operations: the TFE runs API mapped onto managed runs.

A stock ``remote`` backend's ``plan``/``apply`` against a workspace in remote
execution mode creates a configuration version, uploads the archive, creates a
run, follows its logs and policy check, and confirms, discards or cancels it.
Every one of those steps is a managed-run operation (``Runs``, ``RunLogs``): the
same sandbox, policy stage, approval binding, fenced apply and deadline. Nothing
here runs an engine or moves a run by itself.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from runplane.adapters.keys import DataKeys, KeyUnavailable
from runplane.adapters.launchers import Launcher
from runplane.domain.capabilities import Phase, handle_hash
from runplane.domain.clock import Clock
from runplane.domain.creation import ConfigurationVersion
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    UploadUrlExpired,
    UploadUrlUsed,
)
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.logs import END_OF_TEXT, MIN_READ_BYTES
from runplane.domain.parts import ApprovalBody, PlanEvidence, RunInput
from runplane.domain.run import RunKind, Stage, StageStatus
from runplane.domain.run_options import NO_OPTIONS, RunOptions, check_run_options
from runplane.domain.tfe_runs import ExecutionMode, RunFacts, may_wait, waits_behind
from runplane.services.logs import RunLogs
from runplane.services.runs import Runs, require_run_creation
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.services.repositories import RunReader
    from runplane.services.repositories.creation import ConfigurationVersions

START_OF_TEXT = b"\x02"
MAX_MESSAGE = 1000
NEW_VERSION = "create a new configuration version"
# The Cloud API's names of the run options, for errors that point into its requests.
TFE_OPTION_NAMES: Final = {
    "destroy": "is-destroy",
    "refresh_only": "refresh-only",
    "targets": "target-addrs",
    "replacements": "replace-addrs",
}
# A log-read URL follows one phase for as long as a client may watch it.
LOG_URL_SECONDS = 24 * 3600


@dataclass(frozen=True)
class RunRequest:
    """What a client asked for in ``POST /api/v2/runs``, beyond workspace and version."""

    message: str | None = None
    is_destroy: bool = False
    refresh: bool = True
    refresh_only: bool = False
    plan_only: bool = False
    auto_apply: bool = False
    target_addrs: tuple[str, ...] = ()
    replace_addrs: tuple[str, ...] = ()
    variables: int = 0

    def check(self) -> RunOptions:
        """The plan options asked for; refused, before anything is written, what
        managed runs do not do, each with what to do instead."""
        refused = (
            (
                not self.refresh,
                "refresh",
                "plans always refresh; refresh=false is not supported: drop -refresh=false",
            ),
            (
                self.auto_apply,
                "auto-apply",
                "every apply needs an approval; auto-apply is refused: drop -auto-approve and "
                "confirm, or approve the run with `runplane run approve`",
            ),
            (
                self.variables > 0,
                "variables",
                "run variables are not supported here: set them on the workspace "
                "(`runplane var set`) or pass them with `runplane run create --var`",
            ),
        )
        for bad, field, why in refused:
            if bad:
                raise InvalidInput(why, f"/data/attributes/{field}")
        if self.message is not None and len(self.message) > MAX_MESSAGE:
            raise InvalidInput(
                f"a run message has at most {MAX_MESSAGE} characters", "/data/attributes/message"
            )
        return check_run_options(
            destroy=self.is_destroy,
            refresh_only=self.refresh_only,
            targets=self.target_addrs,
            replacements=self.replace_addrs,
            pointer="/data/attributes",
            names=TFE_OPTION_NAMES,
        )


@dataclass(frozen=True)
class ConfigurationView:
    id: str
    workspace_id: str
    status: str
    speculative: bool
    created_at: datetime
    uploaded_at: datetime | None
    upload_token: str | None = None
    """Only when just created: the secret part of the single-purpose upload URL."""


@dataclass(frozen=True)
class RemoteRun:
    """A managed run and the durable facts its TFE view is derived from."""

    run: Run
    facts: RunFacts
    configuration_version_id: str | None
    message: str | None
    summary: Mapping[str, Any]
    policy: Mapping[str, Any] | None
    options: RunOptions = NO_OPTIONS

    @property
    def has_changes(self) -> bool:
        return self.run.plan_has_changes is True


@dataclass(frozen=True)
class LogSlice:
    """Bytes of a phase's log framed as TFE streams it: STX first, ETX once complete."""

    data: bytes


class RemoteRuns:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        runs: Runs,
        workspaces: Workspaces,
        logs: RunLogs,
        keys: DataKeys,
        *,
        upload_seconds: int,
        configurations: ConfigurationVersions[Any],
        reader: RunReader,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._runs = runs
        self._workspaces = workspaces
        self._logs = logs
        self._upload_seconds = upload_seconds
        self._keys = keys
        self._configurations = configurations
        # A run's stages and parts, as its TFE view shows them.
        self._reader = reader

    # -- configuration versions -----------------------------------------------------------

    def new_configuration_version(
        self, principal: Principal, workspace_id: str, *, speculative: bool, auto_queue: bool
    ) -> ConfigurationView:
        workspace = self._workspaces.by_id(principal, workspace_id)
        # The permission first: a caller who may not run here learns nothing more.
        require_run_creation(principal, workspace.id, may_apply=not speculative)
        self._remote_only(workspace)
        if auto_queue:
            raise InvalidInput(
                "runs are not queued on upload: create the run with POST /api/v2/runs",
                "/data/attributes/auto-queue-runs",
            )
        cv_id = self._ids.new(IdKind.CONFIGURATION_VERSION)
        token = f"{cv_id}.{secrets.token_urlsafe(32)}"
        now = self._clock.now()
        self._configurations.create(
            ConfigurationVersion(
                id=cv_id,
                organization_id=workspace.organization_id,
                workspace_id=workspace.id,
                status="pending",
                # The archive arrives through the upload URL, never through the inbox.
                upload_id=cv_id,
                created_at=now,
                expires_at=now + timedelta(seconds=self._upload_seconds, days=1),
                speculative=speculative,
                upload_token_hash=handle_hash(token),
            )
        )
        return ConfigurationView(cv_id, workspace.id, "pending", speculative, now, None, token)

    def configuration_version(self, principal: Principal, cv_id: str) -> ConfigurationView:
        version = self._runs.configuration_version(principal, cv_id)
        principal.require(Permission.RUN_READ, version.workspace_id)
        return _configuration_view(version)

    def upload(self, token: str, archive: bytes) -> None:
        """The archive PUT to a configuration version's upload URL: once, while it is
        fresh. The URL is the only credential (clients send no usable Authorization)."""
        version = self._configurations.get(token.split(".", 1)[0])
        stored = version.upload_token_hash if version is not None else None
        if version is None or not stored or not hmac.compare_digest(stored, handle_hash(token)):
            raise NotFound("upload", "this URL")
        if version.status != "pending":
            raise UploadUrlUsed(NEW_VERSION)
        if self._clock.now() >= version.created_at + timedelta(seconds=self._upload_seconds):
            raise UploadUrlExpired(NEW_VERSION)
        self._runs.store_configuration(version, archive)

    # -- runs -------------------------------------------------------------------------------

    def create(
        self, principal: Principal, workspace_id: str, cv_id: str, asked: RunRequest
    ) -> RemoteRun:
        """A managed run of an uploaded configuration version: speculative if the
        version is, else plan-and-apply (or plan-only if asked). A denied launch is
        refused by ``Runs.create`` before anything is written."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        configuration = self.configuration_version(principal, cv_id)
        if configuration.workspace_id != workspace.id:
            raise NotFound("configuration version", cv_id)
        if configuration.speculative:
            kind = RunKind.SPECULATIVE
        else:
            kind = RunKind.PLAN_ONLY if asked.plan_only else RunKind.PLAN_AND_APPLY
        # The permission before the workspace's mode and the run's options are judged.
        require_run_creation(principal, workspace.id, may_apply=kind.may_apply)
        self._remote_only(workspace)
        options = asked.check()
        run = self._runs.create(
            principal,
            workspace_id,
            kind=kind,
            configuration_version_id=cv_id,
            engine_version=None,
            variables={},
            message=asked.message,
            remote_operation=True,
            options=options,
        )
        return self.read(principal, run.id)

    def read(self, principal: Principal, run_id: str) -> RemoteRun:
        return self.views([self._runs.get(principal, run_id)])[0]

    def views(self, runs: Sequence[Run]) -> list[RemoteRun]:
        """The runs as a TFE client reads them (runs already authorized). A run that may
        still have to wait is seen with its workspace's writer, read once per workspace
        and only then."""
        writers: dict[str, str | None] = {}
        found: list[RemoteRun] = []
        for run in runs:
            waiting_for = None
            if may_wait(run.kind, run.status):
                if run.workspace_id not in writers:
                    writers[run.workspace_id] = self._workspaces.writer_of(run.workspace_id)
                holder = writers[run.workspace_id]
                waiting_for = waits_behind(run.id, run.kind, run.status, holder)
            found.append(self.view(run, waiting_for))
        return found

    def view(self, run: Run, waiting_for: str | None = None) -> RemoteRun:
        """The run and the facts of it a TFE client reads (run already authorized);
        ``waiting_for`` is the run it waits behind (see ``tfe_runs.waits_behind``)."""
        parts = self._reader.parts(run.id)
        stages = self._reader.stages(run.id)
        snapshot = RunInput.from_body(parts["input"].body if "input" in parts else {})
        plan = PlanEvidence.from_body(parts["plan"].body) if "plan" in parts else None
        approval = parts.get("approval")
        policy = parts.get("policy")

        def stage(name: Stage) -> StageStatus | None:
            return stages[name].status if name in stages else None

        facts = RunFacts(
            status=run.status,
            kind=run.kind,
            applied=stage(Stage.APPLY) is StageStatus.COMPLETED,
            approval=approval.state if approval else None,
            policy=policy.state if policy else None,
            plan_stage=stage(Stage.PLAN),
            apply_stage=stage(Stage.APPLY),
            waiting_for=waiting_for,
        )
        return RemoteRun(
            run=run,
            facts=facts,
            configuration_version_id=snapshot.configuration_version_id,
            message=snapshot.message,
            summary=dict(plan.summary) if plan is not None else {},
            policy=None if policy is None else {"state": policy.state, **policy.body},
            options=snapshot.options.for_kind(run.kind),
        )

    # -- actions ----------------------------------------------------------------------------

    def apply(self, principal: Principal, run_id: str, comment: str | None) -> None:
        """``yes`` at the prompt: approve exactly the plan, predecessor and policy
        evidence this run recorded and the client showed (the binding is re-checked
        in the decision's conditional write), then resume the run's workflow."""
        run = self._runs.get(principal, run_id)
        approval = self._reader.parts(run.id).get("approval")
        binding = (
            ApprovalBody.from_body(approval.body).binding.to_body() if approval is not None else {}
        )
        self._decide(principal, run.id, "approve", comment, binding)

    def discard(self, principal: Principal, run_id: str, comment: str | None) -> None:
        self._decide(principal, run_id, "reject", comment, None)

    def cancel(self, principal: Principal, run_id: str, launcher: Launcher) -> None:
        self._runs.cancel(principal, run_id, launcher)

    def _decide(
        self,
        principal: Principal,
        run_id: str,
        decision: str,
        comment: str | None,
        binding: Mapping[str, object] | None,
    ) -> None:
        self._runs.decide(principal, run_id, decision, comment, binding)

    # -- logs -------------------------------------------------------------------------------

    def log_url_path(self, run: Run, phase: Phase) -> str:
        """A self-authenticating path to read one phase's log of one run (the client's log
        reader sends no Authorization): a KMS-wrapped key whose encryption context names
        run, phase, organization and expiry, so KMS refuses any other use of it."""
        expires = int(self._clock.now().timestamp()) + LOG_URL_SECONDS
        wrapped = self._keys.generate(_log_context(run, phase, expires)).wrapped
        grant = base64.urlsafe_b64encode(wrapped).decode("ascii").rstrip("=")
        return f"/_logs/{run.id}/{phase.value}/{expires}/{grant}"

    def log_by_grant(
        self, run_id: str, phase: Phase, expires: int, grant: str, offset: int, limit: int
    ) -> LogSlice:
        """Read a log through its log-read URL: the grant is the only credential."""
        unknown = NotFound("log", "this URL")
        try:
            run = self._reader.get_run(run_id)
            wrapped = base64.urlsafe_b64decode(grant + "=" * (-len(grant) % 4))
        except (NotFound, ValueError):
            raise unknown from None
        if expires <= self._clock.now().timestamp():
            raise unknown
        try:
            self._keys.unwrap(wrapped, _log_context(run, phase, expires))
        except KeyUnavailable:
            raise unknown from None
        # The grant reads this run's logs and nothing else.
        reader = Principal(
            kind=PrincipalKind.API_TOKEN,
            id=f"log-url-{run.id}",
            organization_id=run.organization_id,
            permissions=frozenset({Permission.RUN_READ}),
            display="log-read URL",
            workspace_id=run.workspace_id,
        )
        return self.log(reader, run.id, phase, offset, limit)

    def log(
        self, principal: Principal, run_id: str, phase: Phase, offset: int, limit: int
    ) -> LogSlice:
        """The phase's log as TFE's log reader polls it.

        Offset 0 is the STX byte, so log byte ``n`` is at offset ``n + 1``; the ETX
        byte follows the last byte once the log is complete. A phase that has not
        started yet reads as nothing (the client polls again), not as 404.
        """
        if offset < 0:
            raise InvalidInput("offset is a byte position (0 or more)", "/offset")
        run = self._runs.get(principal, run_id)
        if f"attempt#{phase.value}" not in self._reader.parts(run.id):
            return LogSlice(b"")
        head = START_OF_TEXT if offset == 0 else b""
        # Leave room for STX and ETX so a read never exceeds the client's limit.
        size = max(MIN_READ_BYTES, limit - len(head) - 1)
        read = self._logs.read(principal, run.id, phase, offset=max(offset - 1, 0), limit=size)
        tail = END_OF_TEXT.encode() if read.at_end else b""
        return LogSlice(head + read.data + tail)

    # -- internals ----------------------------------------------------------------------------

    @staticmethod
    def _remote_only(workspace: Workspace) -> None:
        if workspace.execution_mode != ExecutionMode.REMOTE:
            raise Conflict(
                f"workspace {workspace.name} runs plans and applies on the client (execution "
                "mode 'local'); set its execution-mode to 'remote' to run them here"
            )


def _log_context(run: Run, phase: Phase, expires: int) -> dict[str, str]:
    return {
        "runplane:log-read": f"{run.id}/{phase.value}/{expires}",
        "runplane:organization": run.organization_id,
    }


def _configuration_view(version: ConfigurationVersion) -> ConfigurationView:
    return ConfigurationView(
        id=version.id,
        workspace_id=version.workspace_id,
        status=version.status,
        speculative=bool(version.speculative),
        created_at=version.created_at,
        uploaded_at=version.uploaded_at,
    )
