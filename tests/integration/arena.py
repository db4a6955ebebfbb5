"""A run arena: the real services on moto, with fake workflow and launcher edges.

Drives a run through its workflow steps by calling the task services directly,
so tests can stop it in any status and interleave actors at will.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import requests

from runplane.adapters.envelope import Encryption
from runplane.adapters.workflow import Workflow
from runplane.domain.capabilities import Binding, Phase
from runplane.domain.entities import Organization, Run
from runplane.domain.identity import Permission, Principal
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.run import RunKind
from runplane.domain.run_scope import RunScope
from runplane.domain.runner_reports import Planned, UploadReport
from runplane.services.orchestration import Orchestration
from runplane.services.policy import Policies
from runplane.services.runner_api import RunnerApi
from runplane.services.runs import Runs
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap

if TYPE_CHECKING:
    from tests.integration.conftest import Stack


@dataclass
class FakeWorkflow(Workflow):
    """Records what would resume or end workflow waits (no Step Functions here)."""

    resumed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    # Each started execution's input, by run ID.
    started: dict[str, dict[str, str]] = field(default_factory=dict)

    def start(self, run: Run) -> None:
        self.started[run.id] = {
            "run_id": run.id,
            "organization_id": run.organization_id,
            "workspace_id": run.workspace_id,
        }

    def resume(self, token: str, output: Any) -> bool:
        self.resumed.append(token)
        return True

    def fail(self, token: str, error: str, cause: str) -> bool:
        self.failed.append(token)
        return True

    def heartbeat(self, token: str) -> bool:
        return True


@dataclass
class FakeLauncher:
    launched: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    # What each sandbox would have been started with, by sandbox ID (handles included).
    requests: dict[str, Any] = field(default_factory=dict)

    def launch(self, request: Any) -> str:
        self.launched.append(request.sandbox_id)
        self.requests[request.sandbox_id] = request
        return f"fake:{request.sandbox_id}"

    def stop(self, reference: str) -> None:
        self.stopped.append(reference)


@dataclass
class Arena:
    stack: Stack
    org: Organization
    admin: Principal
    runs: Runs
    orchestration: Orchestration
    launcher: FakeLauncher
    policies: Policies
    runner_api: RunnerApi
    workflow: FakeWorkflow = field(default_factory=FakeWorkflow)

    def session_start(self, run_id: str, phase: str) -> dict[str, Any]:
        """What the sandbox of the run's ``phase`` attempt gets by redeeming the bootstrap
        handle it was launched with, as the real runner does: its token and grants."""
        attempt = run_parts.require(run_id, f"attempt#{phase}").body
        request = self.launcher.requests[attempt["sandbox_id"]]
        return self.runner_api.start(
            request.bootstrap,
            run_id=run_id,
            attempt_id=attempt["attempt_id"],
            phase=phase,
            sandbox_id=attempt["sandbox_id"],
            inputs=request.inputs,
            state_version=request.state_version,
        )

    def apply_start_request(self, run_id: str) -> tuple[str, Binding, dict[str, str]]:
        """What the run's apply sandbox presents to start its apply: the apply-start
        handle it was launched with, its binding and the approved plan's digest."""
        attempt = run_parts.require(run_id, "attempt#apply").body
        handle = self.launcher.requests[attempt["sandbox_id"]].apply_start
        binding = Binding(run_id, attempt["attempt_id"], Phase.APPLY, attempt["sandbox_id"])
        plan = run_parts.require(run_id, "plan").body
        return handle, binding, {"plan_sha256": plan["plan_sha256"]}

    def apply_start(self, run_id: str) -> dict[str, str]:
        """The run's apply sandbox proving its start: the run moves to applying."""
        return self.orchestration.apply_start(*self.apply_start_request(run_id))

    def runner_token(self, run_id: str, phase: str) -> str:
        """The session secret the sandbox of the run's ``phase`` attempt gets."""
        return str(self.session_start(run_id, phase)["token"])

    def scope_of(self, run_id: str) -> RunScope | None:
        """The run's scope as its execution's input names it (as the workflow's steps
        are given it)."""
        return RunScope.of(self.workflow.started.get(run_id, {}))

    def runner(self, run_id: str, phase: str) -> Principal:
        """The principal that sandbox's calls carry."""
        token = self.runner_token(run_id, phase)
        return self.stack.identity.authenticate(f"Bearer {token}")


def show_json(*changes: tuple[str, list[str]]) -> bytes:
    """A minimal ``show -json`` plan: one ``test_thing`` per (name, actions)."""
    return json.dumps(
        {
            "format_version": "0.2",
            "terraform_version": "1.0.3",
            "resource_changes": [
                {
                    "address": f"test_thing.{name}",
                    "mode": "managed",
                    "type": "test_thing",
                    "name": name,
                    "provider_name": "registry.terraform.io/runplane/test",
                    "change": {
                        "actions": actions,
                        "before": None if actions == ["create"] else {"name": name},
                        "after": None if actions == ["delete"] else {"name": name},
                        "after_unknown": {},
                        "before_sensitive": False,
                        "after_sensitive": False,
                    },
                }
                for name, actions in changes
            ],
            "output_changes": {},
        }
    ).encode()


def build_arena(stack: Stack, org: Organization) -> Arena:
    services = stack.services
    launcher, workflow = services.launcher, services.workflow
    assert isinstance(launcher, FakeLauncher)
    assert isinstance(workflow, FakeWorkflow)
    token = stack.identity.issue_token(org.id, "admin", list(Permission), created_by="t").token
    admin = stack.identity.authenticate(f"Bearer {token}")
    return Arena(
        stack,
        org,
        admin,
        services.runs,
        services.orchestration,
        launcher,
        services.policies,
        services.runner_api,
        workflow,
    )


def created(
    arena: Arena,
    name: str,
    workspace_id: str | None = None,
    kind: RunKind = RunKind.PLAN_AND_APPLY,
) -> tuple[str, str]:
    """A run (plan_and_apply unless ``kind`` says otherwise) created (dispatch_pending)
    in a fresh workspace, or in ``workspace_id``."""
    stack = arena.stack
    ws = (
        workspace_store.get_workspace(workspace_id, reads=IdentityMap())
        if workspace_id
        else stack.tenancy.create_workspace(arena.org.id, name)
    )
    upload = arena.runs.new_configuration_upload(arena.admin, ws.id)
    requests.put(upload.upload_url, data=b"terraform config", timeout=30).raise_for_status()
    arena.runs.finalize_configuration(arena.admin, upload.id)
    run = arena.runs.create(
        arena.admin,
        ws.id,
        kind=kind,
        configuration_version_id=upload.id,
        engine_version="1.0.3",
        variables={},
    )
    return ws.id, run.id


def planning(
    arena: Arena,
    name: str,
    workspace_id: str | None = None,
    kind: RunKind = RunKind.PLAN_AND_APPLY,
) -> tuple[str, str]:
    """A run whose plan sandbox was started (planning)."""
    ws, run_id = created(arena, name, workspace_id, kind)
    o = arena.orchestration
    o.queue(run_id)
    if kind.needs_writer_reservation:
        o.wait_for_writer(run_id, "token-writer", arena.scope_of(run_id))
    o.start_runner(run_id, "plan", "token-plan", arena.scope_of(run_id))
    return ws, run_id


def report_planned(arena: Arena, run_id: str, plan: bytes | None = None) -> None:
    """The plan sandbox reports a plan with changes (plan_complete)."""
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]
    summary = PlanSummary(adds=1, has_changes=True)
    arena.orchestration.report_plan(run_id, attempt, planned(arena, run_id, summary, plan))


def planned(
    arena: Arena,
    run_id: str,
    summary: PlanSummary,
    plan_json: bytes | None = None,
    plan: bytes = b"the saved plan",
) -> Planned:
    """A plan runner's report of the saved ``plan`` whose JSON is ``plan_json``, both and
    its log uploaded and registered by the run's plan attempt, as its runner does."""
    stored = uploaded(
        arena,
        run_id,
        "plan",
        {
            "plan": plan,
            "plan_json": plan_json or show_json(("one", ["create"])),
            "logs": b"the phase's log\n",
        },
    )
    return Planned(
        summary=summary,
        plan_artifact_id=stored["plan"].artifact_id,
        plan_sha256=stored["plan"].sha256,
        plan_json_artifact_id=stored["plan_json"].artifact_id,
        plan_json_sha256=stored["plan_json"].sha256,
        log_artifact_id=stored["logs"].artifact_id,
    )


def log_artifact(
    arena: Arena, run_id: str, phase: str = "apply", text: bytes = b"the phase's log\n"
) -> str:
    """A final log the run's ``phase`` attempt uploaded and registered before reporting."""
    return uploaded(arena, run_id, phase, {"logs": text})["logs"].artifact_id


def uploaded(
    arena: Arena, run_id: str, phase: str, bodies: dict[str, bytes]
) -> dict[str, UploadReport]:
    """What the run's ``phase`` attempt uploads (``bodies`` by artifact kind) with the
    grants of its session start, registered together: what its runner reports of each."""
    started = arena.session_start(run_id, phase)
    grants = started["grants"]["uploads"]
    reports = {kind: put_through(grants[kind], body) for kind, body in bodies.items()}
    principal = arena.stack.identity.authenticate(f"Bearer {started['token']}")
    arena.runner_api.register_all(principal, list(reports.values()))
    return reports


def put_through(grant: dict[str, Any], plaintext: bytes) -> UploadReport:
    """Encrypt ``plaintext`` under an upload grant (its wire form) and put it to its URL,
    as the runner does: what the runner then reports of it."""
    key = base64.b64decode(grant["data_key"])
    encryption = Encryption(key, grant["artifact_id"], limit=grant["max_size"])
    body = b"".join(encryption.stream([plaintext]))
    requests.put(grant["url"], data=body, timeout=30).raise_for_status()
    assert encryption.sha256 is not None
    return UploadReport(grant["artifact_id"], grant["ticket"], encryption.size, encryption.sha256)


def plan_complete(
    arena: Arena, name: str, plan: bytes | None = None, workspace_id: str | None = None
) -> tuple[str, str]:
    """A run whose plan (with changes) was reported (plan_complete)."""
    ws, run_id = planning(arena, name, workspace_id)
    report_planned(arena, run_id, plan)
    return ws, run_id


def to_approval(arena: Arena, run_id: str) -> None:
    """From plan_complete: policy passes and the run awaits approval."""
    o = arena.orchestration
    o.evaluate_policy(run_id)
    o.wait_for_approval(run_id, "token-approval")


def to_apply_sandbox(arena: Arena, run_id: str) -> dict[str, Any]:
    """From awaiting_approval: approved and its apply sandbox started; its attempt."""
    arena.runs.decide(arena.admin, run_id, "approve", None)
    arena.orchestration.start_runner(run_id, "apply", "token-apply", arena.scope_of(run_id))
    return run_parts.require(run_id, "attempt#apply").body


def to_applying(arena: Arena, run_id: str) -> None:
    """From awaiting_approval: approved, its apply sandbox started and its start proven."""
    to_apply_sandbox(arena, run_id)
    arena.apply_start(run_id)


def awaiting_approval(arena: Arena, name: str, workspace_id: str | None = None) -> tuple[str, str]:
    """A plan_and_apply run awaiting approval, in a fresh workspace or ``workspace_id``."""
    ws, run_id = plan_complete(arena, name, workspace_id=workspace_id)
    to_approval(arena, run_id)
    return ws, run_id


def applying(arena: Arena, name: str, workspace_id: str | None = None) -> tuple[str, str]:
    ws, run_id = awaiting_approval(arena, name, workspace_id)
    to_applying(arena, run_id)
    return ws, run_id
