"""Starting a sandbox runner: a local subprocess (embedded stack) or an ECS Fargate task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient


@dataclass(frozen=True)
class LaunchRequest:
    run_id: str
    attempt_id: str
    phase: str
    sandbox_id: str
    control_plane_url: str
    # One-time, sandbox-bound handles: passed in the environment, never in argv.
    bootstrap: str = field(repr=False)
    apply_start: str | None = field(default=None, repr=False)
    heartbeat_seconds: int = 60


class Launcher(Protocol):
    def launch(self, request: LaunchRequest) -> str:
        """Start the runner; returns a reference to the sandbox (process or task)."""
        ...

    def stop(self, reference: str) -> None:
        """Stop a sandbox this launcher started (no error if it already ended)."""
        ...


def runner_environment(request: LaunchRequest) -> dict[str, str]:
    env = {
        "RUNPLANE_RUN_ID": request.run_id,
        "RUNPLANE_ATTEMPT_ID": request.attempt_id,
        "RUNPLANE_PHASE": request.phase,
        "RUNPLANE_SANDBOX_ID": request.sandbox_id,
        "RUNPLANE_CONTROL_PLANE_URL": request.control_plane_url,
        "RUNPLANE_BOOTSTRAP": request.bootstrap,
        "RUNPLANE_HEARTBEAT_SECONDS": str(request.heartbeat_seconds),
    }
    if request.apply_start:
        env["RUNPLANE_APPLY_START"] = request.apply_start
    return env


class LocalProcessLauncher:
    """The embedded stack's sandbox: a subprocess in its own directory with a scrubbed
    environment (nothing of the control plane's credentials or settings)."""

    def __init__(
        self,
        engine: str | None = None,
        work_root: Path | None = None,
        provider_mirror: Path | None = None,
    ) -> None:
        self._engine = engine
        self._work_root = work_root
        self._provider_mirror = provider_mirror
        self.processes: list[subprocess.Popen[bytes]] = []

    def launch(self, request: LaunchRequest) -> str:
        workdir = Path(tempfile.mkdtemp(prefix=f"{request.sandbox_id}-", dir=self._work_root))
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "CHECKPOINT_DISABLE": "1",
            **runner_environment(request),
        }
        if self._engine:
            env["RUNPLANE_ENGINE"] = self._engine
        if self._provider_mirror:
            env["RUNPLANE_PROVIDER_MIRROR"] = str(self._provider_mirror)
        log = (workdir / "runner.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "runplane.runner"],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes.append(process)
        return f"pid:{process.pid}"

    def stop(self, reference: str) -> None:
        pid = int(reference.removeprefix("pid:"))
        for process in self.processes:
            if process.pid == pid and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


class EcsFargateLauncher:
    """Production sandboxes: one Fargate task per runner phase, no public IP."""

    def __init__(
        self,
        client: ECSClient,
        *,
        cluster: str,
        task_definition: str,
        subnets: list[str],
        security_groups: list[str],
        container: str = "runner",
    ) -> None:
        self._ecs = client
        self._cluster = cluster
        self._task_definition = task_definition
        self._subnets = subnets
        self._security_groups = security_groups
        self._container = container

    def launch(self, request: LaunchRequest) -> str:
        env: list[dict[str, str]] = [
            {"name": k, "value": v} for k, v in runner_environment(request).items()
        ]
        overrides: Any = {"containerOverrides": [{"name": self._container, "environment": env}]}
        started = self._ecs.run_task(
            cluster=self._cluster,
            taskDefinition=self._task_definition,
            launchType="FARGATE",
            startedBy=request.sandbox_id[:36],
            networkConfiguration={
                "awsvpcConfiguration": {
                    "subnets": self._subnets,
                    "securityGroups": self._security_groups,
                    "assignPublicIp": "DISABLED",
                }
            },
            overrides=overrides,
            tags=[{"key": "runplane:sandbox", "value": request.sandbox_id}],
        )
        tasks = started.get("tasks") or []
        if not tasks:
            failures = started.get("failures") or []
            raise RuntimeError(f"ECS did not start the sandbox: {failures}")
        return str(tasks[0]["taskArn"])

    def stop(self, reference: str) -> None:
        self._ecs.stop_task(cluster=self._cluster, task=reference, reason="run canceled")
