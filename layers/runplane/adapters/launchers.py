"""Starting a sandbox runner: a local subprocess (embedded stack) or an ECS Fargate task."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from runplane.domain.capabilities import Phase
from runplane.domain.sandbox_exits import SandboxExit, process_exit, process_reported

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient

logger = logging.getLogger("runplane.sandboxes")

# Told of every sandbox that ends (services/sandbox_exits.py decides whether it matters).
ExitWatcher = Callable[[SandboxExit], None]


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
    # Redeemed once, with the session, for the phase's cloud credentials (if the run has any).
    credentials: str | None = field(default=None, repr=False)
    heartbeat_seconds: int = 60
    # The artifacts the phase reads (IDs, not secrets): its session start reads their
    # records with the bootstrap.
    inputs: tuple[str, ...] = ()
    # The state version the run pinned (an ID, not a secret): its session start reads it
    # with the bootstrap, for the session's token to name its artifact.
    state_version: str | None = None


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
    if request.credentials:
        env["RUNPLANE_CREDENTIALS"] = request.credentials
    if request.inputs:
        env["RUNPLANE_INPUTS"] = ",".join(request.inputs)
    if request.state_version:
        env["RUNPLANE_STATE_VERSION"] = request.state_version
    return env


# The embedded stack's engine users: one UID (and GID) per live sandbox, from here up.
ENGINE_UID_BASE = 720000
ENGINE_UID_COUNT = 4096


def sandbox_isolation() -> str:
    """The strongest isolation this process can give its sandboxes' engines (see
    runplane/runner/confinement.py): ``namespaces`` as root with bubblewrap and
    setpriv, ``user`` as root without them, ``none`` otherwise."""
    if os.geteuid() != 0:
        return "none"
    if shutil.which("bwrap") and shutil.which("setpriv"):
        return "namespaces"
    return "user"


class LocalProcessLauncher:
    """The embedded stack's sandbox: a subprocess in its own directory with a scrubbed
    environment (nothing of the control plane's credentials or settings).

    The runner runs as the stack's user; with ``isolation`` above ``none`` (the stack
    run as root) each sandbox's engine runs as a user of its own, which is killed
    whole when its sandbox ends, and with ``namespaces`` it also sees only its own
    directory, the system's and the engine's read-only files, and a network holding
    only the runner's relay. Every launch hands the run's environment over on the
    runner's standard input, so no process environment holds its handles.

    The sandbox directory holds the decrypted configuration, the plaintext plan and the
    session's CLI configuration, so it is removed as soon as the runner ends or is
    stopped. The runner's own output (never engine output, which goes to the run's
    redacted log) is kept beside it as ``<directory>.log`` for diagnostics.

    After its first launch the launcher keeps one runner on standby: started in its
    own fresh directory, its modules imported, knowing nothing of any run until a
    launch hands it the run's environment on its standard input (a pipe, as private
    as the environment). An interpreter's start-up and imports, about 0.15 s, then
    precede no run but the first; a standby serves one run only, like any sandbox.

    Each launched runner has a thread of its own that waits for its process to end
    (blocked in ``wait``, using no CPU) and then tells ``on_exit`` which sandbox ended
    and how, naming it by the run, phase, attempt and sandbox the control plane
    launched it for: a sandbox killed or crashed before its final report is noticed
    at once, not a heartbeat window later. Nothing is told once the launcher stops
    (the stack is going away), and each thread ends with its process.

    It can also run the AWS-style pool of standby runners (``services/standby.py``,
    docs/standby.md) when the embedded stack is asked to: ``start_standby`` starts a
    runner with only the pool's variables (its ticket, where to claim, how long to
    wait) and its engine confined as any sandbox's; it claims its phase over HTTP
    like a Fargate task. ``assigned`` tells it which attempt the pool gave one, so
    its exit is told as a launched runner's is.
    """

    def __init__(
        self,
        engine: str | None = None,
        work_root: Path | None = None,
        provider_mirror: Path | None = None,
        isolation: str | None = None,
        host_network: bool = False,
        on_exit: ExitWatcher | None = None,
    ) -> None:
        self._engine = engine
        self.on_exit = on_exit
        # Sandboxes with namespaces share this machine's network (by default: only
        # the loopback holding their relay).
        self._host_network = host_network
        self._work_root = work_root
        self._provider_mirror = provider_mirror
        self.isolation = isolation or sandbox_isolation()
        # Engine UIDs of the live sandboxes, by reference.
        self._engine_uids: dict[str, int] = {}
        self.processes: list[subprocess.Popen[bytes]] = []
        self.sandboxes: dict[str, Path] = {}
        """Each sandbox's directory by reference (it no longer exists once the runner ended)."""
        self._reapers: list[threading.Thread] = []
        self._standby: _Standby | None = None
        self._guard = threading.Lock()
        # The engine UIDs this launcher holds, with the descriptor of each one's lock.
        self._reserved: dict[int, int] = {}
        self._stopped = False
        # What each runner was launched for (run, phase, attempt, sandbox), by
        # reference: a pool standby's only once the pool assigned it.
        self._launched: dict[str, tuple[str, str, str, str]] = {}
        self.pool_standbys: list[str] = []
        """The references of the pool standbys started, in order (``start_standby``)."""

    def launch(self, request: LaunchRequest) -> str:
        reference, process, workdir, uid = self._confined(
            runner_environment(request), lambda env: self._started(request.sandbox_id, env)
        )
        self.assigned(reference, request)
        self._watch(process, workdir, reference, uid)
        self._refill()
        return reference

    def _confined(
        self,
        environment: Mapping[str, str],
        start: Callable[[dict[str, str]], tuple[subprocess.Popen[bytes], Path]],
    ) -> tuple[str, subprocess.Popen[bytes], Path, int | None]:
        """A runner process started by ``start`` with ``environment`` and its engine's
        confinement (an engine user of its own, when there is one), and recorded."""
        uid = self._engine_uid()
        try:
            process, workdir = start({**environment, **self._confinement_environment(uid)})
        except BaseException:
            self._free_uid(uid)
            raise
        reference = f"pid:{process.pid}"
        self.processes.append(process)
        self.sandboxes[reference] = workdir
        return reference, process, workdir, uid

    def start_standby(self, standby_id: str, environment: Mapping[str, str]) -> str:
        """A runner of the standby pool: started with ``environment`` (the pool's
        variables, nothing of any run) and its engine confined as any sandbox's; it
        claims its phase from the control plane over HTTP."""
        reference, process, workdir, uid = self._confined(
            environment, lambda env: self._start(f"{standby_id}-", env, standby=False)
        )
        self.pool_standbys.append(reference)
        self._watch(process, workdir, reference, uid)
        return reference

    def assigned(self, reference: str, request: LaunchRequest) -> None:
        """What the notice of ``reference``'s end names: what the control plane
        launched it for, never anything the sandbox writes (its handles stay out)."""
        with self._guard:
            self._launched[reference] = (
                request.run_id,
                request.phase,
                request.attempt_id,
                request.sandbox_id,
            )

    def ended(self, references: Sequence[str]) -> set[str]:
        """Which of ``references`` have exited, or were never this launcher's."""
        running = {f"pid:{p.pid}" for p in self.processes if p.poll() is None}
        return {reference for reference in references if reference not in running}

    def _watch(
        self,
        process: subprocess.Popen[bytes],
        workdir: Path,
        reference: str,
        uid: int | None,
    ) -> None:
        """Its engine user held while it runs; a thread waits for its end."""
        if uid is not None:
            with self._guard:
                self._engine_uids[reference] = uid
        reaper = threading.Thread(
            target=self._remove_when_done,
            args=(process, workdir, reference),
            name=f"reap-{reference}",
            daemon=True,
        )
        reaper.start()
        self._reapers.append(reaper)

    def _started(
        self, sandbox_id: str, run_env: dict[str, str]
    ) -> tuple[subprocess.Popen[bytes], Path]:
        """A runner given ``run_env`` on its standard input: the standby if there is
        one, else one started now and handed it at once."""
        standby = self._take_standby()
        started = self._hand_over(standby, sandbox_id, run_env) if standby else None
        if started is not None:
            return started
        process, workdir = self._start("standby-", {}, standby=True)
        started = self._hand_over(_Standby(process, workdir), sandbox_id, run_env)
        if started is None:
            raise OSError("the sandbox's runner ended before its run was handed over")
        return started

    def _confinement_environment(self, uid: int | None) -> dict[str, str]:
        env = {"RUNPLANE_ENGINE_ISOLATION": self.isolation}
        if uid is not None:
            env["RUNPLANE_ENGINE_USER"] = f"{uid}:{uid}"
        if self.isolation == "namespaces" and self._host_network:
            env["RUNPLANE_ENGINE_NETWORK"] = "host"
        if self.isolation == "namespaces":
            # What the engine may read besides the system: the Python the test provider
            # runs on (the stack's own), and the mirror it is installed in.
            readable = {sys.prefix, sys.base_prefix, os.path.realpath(sys.executable)}
            if self._provider_mirror:
                readable.add(str(self._provider_mirror))
            env["RUNPLANE_ENGINE_READABLE"] = os.pathsep.join(sorted(readable))
        return env

    def _engine_uid(self) -> int | None:
        """A UID no other live sandbox on this machine uses, this stack's or another's:
        each is held by a lock on a file of its own, which ends with the process."""
        if self.isolation == "none":
            return None
        with self._guard:
            for uid in range(ENGINE_UID_BASE, ENGINE_UID_BASE + ENGINE_UID_COUNT):
                if uid in self._reserved:
                    continue
                held = hold_engine_uid(uid)
                if held is not None:
                    self._reserved[uid] = held
                    return uid
        raise RuntimeError("no engine user is free: too many sandboxes at once")

    def _free_uid(self, uid: int | None, reference: str | None = None) -> None:
        with self._guard:
            if reference is not None:
                self._engine_uids.pop(reference, None)
            held = self._reserved.pop(uid, None) if uid is not None else None
        if held is not None:
            os.close(held)

    def _remove_when_done(
        self,
        process: subprocess.Popen[bytes],
        workdir: Path,
        reference: str,
    ) -> None:
        returncode = process.wait()
        uid = self._engine_uids.get(reference)
        if uid is not None:
            # Whatever the engine left running (a runner killed mid-command) ends here,
            # before the run is told its sandbox stopped.
            kill_user_processes(uid)
        with self._guard:
            launched = self._launched.pop(reference, None)
        if launched is not None:  # a pool standby never assigned ran nothing
            self._tell_exit(launched, reference, returncode)
        shutil.rmtree(workdir, ignore_errors=True)
        self._free_uid(uid, reference)

    def _tell_exit(
        self, launched: tuple[str, str, str, str], reference: str, returncode: int
    ) -> None:
        watcher = self.on_exit
        if watcher is None or self._stopped:
            return
        run_id, phase, attempt_id, sandbox_id = launched
        try:
            watcher(
                SandboxExit(
                    run_id=run_id,
                    phase=Phase(phase),
                    attempt_id=attempt_id,
                    sandbox_id=sandbox_id,
                    reference=reference,
                    detail=process_exit(returncode),
                    reported=process_reported(returncode),
                )
            )
        except Exception as error:
            # The heartbeat window still ends the run's wait: a failed notice costs time.
            logger.warning(
                "sandbox exit notice failed",
                extra={"run_id": run_id, "error": type(error).__name__},
            )

    def stop(self, reference: str) -> None:
        pid = int(reference.removeprefix("pid:"))
        for process in self.processes:
            if process.pid == pid and process.poll() is None:
                _kill_sandbox(process)
                process.wait(timeout=10)
        uid = self._engine_uids.get(reference)
        if uid is not None:
            kill_user_processes(uid)

    def stop_all(self) -> None:
        with self._guard:
            self._stopped = True
            standby, self._standby = self._standby, None
        if standby is not None:
            standby.release()
        for process in self.processes:
            if process.poll() is None:
                _kill_sandbox(process)
                process.wait(timeout=10)
        for uid in list(self._engine_uids.values()):
            kill_user_processes(uid)
        for reaper in self._reapers:
            reaper.join(timeout=10)

    def _base_environment(self, workdir: Path) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "CHECKPOINT_DISABLE": "1",
            # The runner is the stack's own code, wherever the interpreter's installed
            # copy of the package points (a second checkout runs its own runner).
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        if self._engine:
            env["RUNPLANE_ENGINE"] = self._engine
        if self._provider_mirror:
            env["RUNPLANE_PROVIDER_MIRROR"] = str(self._provider_mirror)
        return env

    def _start(
        self, prefix: str, env: dict[str, str], standby: bool
    ) -> tuple[subprocess.Popen[bytes], Path]:
        workdir = Path(tempfile.mkdtemp(prefix=prefix, dir=self._work_root))
        try:
            # The runner's own output: for the stack's operator only.
            descriptor = os.open(
                _log_of(workdir), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600
            )
            with os.fdopen(descriptor, "wb") as log:
                process = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
                    [sys.executable, "-m", "runplane.runner", *(["--standby"] if standby else [])],
                    cwd=workdir,
                    env={**self._base_environment(workdir), **env},
                    stdin=subprocess.PIPE if standby else subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except BaseException:
            _remove_with_log(workdir)
            raise
        return process, workdir

    def _take_standby(self) -> _Standby | None:
        with self._guard:
            standby, self._standby = self._standby, None
        return standby

    def _refill(self) -> None:
        with self._guard:
            if self._standby is not None or self._stopped:
                return
            try:
                process, workdir = self._start("standby-", {}, standby=True)
            except OSError:  # no standby this time: the next launch starts cold
                return
            self._standby = _Standby(process, workdir)

    def _hand_over(
        self, standby: _Standby, sandbox_id: str, run_env: dict[str, str]
    ) -> tuple[subprocess.Popen[bytes], Path] | None:
        """The standby as this sandbox, renamed for it; ``None`` if it is gone."""
        workdir = standby.workdir.with_name(
            f"{sandbox_id}-{standby.workdir.name.removeprefix('standby-')}"
        )
        try:
            standby.workdir.rename(workdir)
            _log_of(standby.workdir).rename(_log_of(workdir))
            # The whole environment a cold start would get now (the launcher's engine
            # or PATH may have changed since the standby started), nothing else.
            line = {**self._base_environment(workdir), **run_env}
            assert standby.process.stdin is not None
            standby.process.stdin.write(json.dumps(line).encode() + b"\n")
            standby.process.stdin.close()
        except OSError:  # it ended meanwhile (a broken pipe): start cold instead
            _kill_sandbox(standby.process)
            standby.process.wait(timeout=10)
            _remove_with_log(standby.workdir)
            _remove_with_log(workdir)
            return None
        return standby.process, workdir


@dataclass
class _Standby:
    process: subprocess.Popen[bytes]
    workdir: Path

    def release(self) -> None:
        """Let it go unused: its input ends, it exits, its directory and log go."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_sandbox(self.process)
            self.process.wait(timeout=10)
        _remove_with_log(self.workdir)


def _log_of(workdir: Path) -> Path:
    """Where the runner's own output is kept: beside its directory."""
    return workdir.with_name(f"{workdir.name}.log")


def _remove_with_log(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
    _log_of(workdir).unlink(missing_ok=True)


def _engine_uid_locks() -> Path:
    """Where engine UIDs are claimed: a directory of root's alone."""
    directory = Path(tempfile.gettempdir()) / "runplane-engine-users"
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    status = directory.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o077:
        raise RuntimeError(f"{directory} is not a private directory of this user's")
    return directory


def hold_engine_uid(uid: int) -> int | None:
    """A descriptor holding ``uid`` for this process's sandbox, or None if another
    process holds it."""
    descriptor = os.open(
        _engine_uid_locks() / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def kill_user_processes(uid: int) -> None:
    """SIGKILL every process of ``uid`` (a sandbox's engine user): kill(-1) sent as
    that user, by the system's ``kill``, reaches exactly its processes, wherever they
    were reparented."""
    program = shutil.which("kill", path="/usr/bin:/bin")
    if program is None:
        return  # the runner's own sweep after each engine command still ran
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(  # noqa: S603 - the system's kill, fixed arguments
            [program, "-9", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={},
            timeout=10,
            check=False,
        )


def _kill_sandbox(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the runner's process group and the engine groups it started.

    The engine runs in its own session (so a timeout can kill it without the runner), so
    killing the runner's group alone would orphan it. The runner is frozen first, so it
    starts nothing new while its descendants are listed.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGSTOP)
    for pid in _descendants(process.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _descendants(root: int) -> list[int]:
    """The process IDs below ``root`` (Linux /proc; none where it is not available)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    queue = [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


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
        return self._run_task(runner_environment(request), request.sandbox_id)

    def start_standby(self, standby_id: str, environment: Mapping[str, str]) -> str:
        """A standby runner's task (services/standby.py): the same task definition,
        started with its ticket and nothing of any run."""
        return self._run_task(environment, standby_id)

    def assigned(self, reference: str, request: LaunchRequest) -> None:
        """Nothing to note: ECS names a stopped task by its ARN, which the launch
        records for the attempt (services/sandbox_exits.py)."""

    def ended(self, references: Sequence[str]) -> set[str]:
        """Which of these tasks stopped, or are unknown to ECS (DescribeTasks, 100 a call)."""
        ended: set[str] = set()
        for first in range(0, len(references), 100):
            batch = list(references[first : first + 100])
            described = self._ecs.describe_tasks(cluster=self._cluster, tasks=batch)
            running = {
                str(task["taskArn"])
                for task in described.get("tasks") or []
                if task.get("lastStatus") != "STOPPED"
            }
            ended.update(reference for reference in batch if reference not in running)
        return ended

    def _run_task(self, environment: Mapping[str, str], sandbox_id: str) -> str:
        env: list[dict[str, str]] = [{"name": k, "value": v} for k, v in environment.items()]
        overrides: Any = {"containerOverrides": [{"name": self._container, "environment": env}]}
        started = self._ecs.run_task(
            cluster=self._cluster,
            taskDefinition=self._task_definition,
            launchType="FARGATE",
            startedBy=sandbox_id[:36],
            networkConfiguration={
                "awsvpcConfiguration": {
                    "subnets": self._subnets,
                    "securityGroups": self._security_groups,
                    "assignPublicIp": "DISABLED",
                }
            },
            overrides=overrides,
            tags=[{"key": "runplane:sandbox", "value": sandbox_id}],
        )
        tasks = started.get("tasks") or []
        if not tasks:
            failures = started.get("failures") or []
            raise RuntimeError(f"ECS did not start the sandbox: {failures}")
        return str(tasks[0]["taskArn"])

    def stop(self, reference: str) -> None:
        self._ecs.stop_task(cluster=self._cluster, task=reference, reason="run canceled")
