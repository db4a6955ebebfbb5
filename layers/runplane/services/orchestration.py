"""The run workflow's services behind one name, for callers that want all of them.

The work itself lives in three modules with one purpose each:
services/workflow_steps.py (the workflow's own steps), services/runner_start.py
(launching a runner phase) and services/runner_reports.py (what a runner reports).
Each is imported and built on its first call: a task Lambda's cold start (one
step) pays for its own module, not for the other two and what they import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from runplane.services.workflow_base import ReadsAhead
from runplane.services.workflow_base import Timing as Timing

if TYPE_CHECKING:
    from runplane.adapters.launchers import Launcher
    from runplane.adapters.workflow import Workflow
    from runplane.domain.artifacts import ArtifactRecord
    from runplane.domain.capabilities import Binding, Phase
    from runplane.domain.clock import Clock
    from runplane.domain.ids import IdGenerator
    from runplane.domain.run_scope import RunScope
    from runplane.domain.runner_reports import RunnerReport
    from runplane.services.capabilities import Capabilities
    from runplane.services.launch_controls import LaunchControls
    from runplane.services.lifecycle import RunLifecycle
    from runplane.services.policy import Policies
    from runplane.services.runner_reports import RunnerReports
    from runplane.services.runner_start import RunnerStart
    from runplane.services.unit_of_work import UnitsOfWork
    from runplane.services.workflow_steps import WorkflowSteps


class Orchestration:
    """A facade over the three workflow services, all built from the same collaborators."""

    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        lifecycle: RunLifecycle,
        capabilities: Capabilities,
        workflow: Workflow,
        launcher: Launcher,
        *,
        control_plane_url: str,
        launch_controls: Callable[[], LaunchControls],
        policies: Callable[[], Policies],
        units: UnitsOfWork,
        reads_ahead: ReadsAhead,
        timing: Timing | None = None,
    ) -> None:
        self._launch_controls_of = launch_controls
        self._args = (clock, ids, lifecycle, capabilities, workflow, launcher)
        self._kwargs: dict[str, Any] = {
            "control_plane_url": control_plane_url,
            "launch_controls": launch_controls,
            "policies": policies,
            "units": units,
            "reads_ahead": reads_ahead,
            "timing": timing,
        }

    @property
    def _launch_controls(self) -> LaunchControls:
        return self._launch_controls_of()

    @cached_property
    def steps(self) -> WorkflowSteps:
        from runplane.services.workflow_steps import WorkflowSteps

        return WorkflowSteps(*self._args, **self._kwargs)

    @cached_property
    def start(self) -> RunnerStart:
        from runplane.services.runner_start import RunnerStart

        return RunnerStart(*self._args, **self._kwargs)

    @cached_property
    def reports(self) -> RunnerReports:
        from runplane.services.runner_reports import RunnerReports

        return RunnerReports(*self._args, **self._kwargs)

    # -- workflow steps ----------------------------------------------------------------------

    def queue(self, run_id: str, scope: RunScope | None = None) -> dict[str, Any]:
        return self.steps.queue(run_id, scope)

    def wait_for_writer(
        self, run_id: str, token: str, scope: RunScope | None = None
    ) -> dict[str, Any]:
        return self.steps.wait_for_writer(run_id, token, scope)

    def start_runner(
        self, run_id: str, phase: str, token: str, scope: RunScope | None = None
    ) -> dict[str, Any]:
        return self.start.start_runner(run_id, phase, token, scope)

    def evaluate_policy(
        self,
        run_id: str,
        scope: RunScope | None = None,
        *,
        plan_json_artifact_id: str | None = None,
    ) -> dict[str, Any]:
        return self.steps.evaluate_policy(
            run_id, scope, plan_json_artifact_id=plan_json_artifact_id
        )

    def finish_plan(self, run_id: str) -> dict[str, Any]:
        return self.steps.finish_plan(run_id)

    def request_approval(self, run_id: str, scope: RunScope | None = None) -> dict[str, Any]:
        return self.steps.request_approval(run_id, scope)

    def wait_for_approval(self, run_id: str, token: str) -> dict[str, Any]:
        return self.steps.wait_for_approval(run_id, token)

    def arbitrate_expiry(self, run_id: str) -> dict[str, Any]:
        return self.steps.arbitrate_expiry(run_id)

    def fail(self, run_id: str, phase: str, error: str) -> dict[str, Any]:
        return self.steps.fail(run_id, phase, error)

    # -- runner reports ----------------------------------------------------------------------

    def heartbeat(self, run_id: str, phase: Phase, attempt_id: str) -> bool:
        return self.reports.heartbeat(run_id, phase, attempt_id)

    def report_plan(
        self,
        run_id: str,
        attempt_id: str,
        report: RunnerReport,
        uploads: Sequence[ArtifactRecord] = (),
    ) -> str:
        return self.reports.report_plan(run_id, attempt_id, report, uploads)

    def apply_start(
        self, handle: str, binding: Binding, request: Mapping[str, str]
    ) -> dict[str, str]:
        return self.reports.apply_start(handle, binding, request)

    def report_apply(
        self,
        run_id: str,
        attempt_id: str,
        report: RunnerReport,
        uploads: Sequence[ArtifactRecord] = (),
    ) -> str:
        return self.reports.report_apply(run_id, attempt_id, report, uploads)
