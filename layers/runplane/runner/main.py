"""The sandbox runner: one run phase (plan or apply) with only a one-time bootstrap handle.

It redeems the handle for a session, downloads its inputs through transfer
URLs and decrypts them with keys released to the session, runs the pinned
engine with the workspace's state served by the control plane's Cloud API,
uploads encrypted outputs, and reports the result. It holds no AWS credential.

The runner is the sandbox's trusted principal; the engine, which runs the
configuration's code, is not (see runner/confinement.py). The session stays in the
runner's memory: the engine reaches the Cloud API through the relay with a secret of
its own, gets its variables through a one-read FIFO (the run's environment variables
in its process environment only, runner/engine_env.py), and works in a directory of
its own; the runner reads what the engine wrote only once the engine's processes are gone,
and believes none of it unchecked.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import secrets
import shutil
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from runplane.adapters.envelope import CHUNK_SIZE, Decryption, Encryption
from runplane.domain.env_variables import tf_var_name
from runplane.domain.plan_summary import drifted_resources, summarize
from runplane.domain.run_credentials import IssuedCredentials
from runplane.domain.runner_reports import (
    MAX_REASON,
    Applied,
    CredentialsRequired,
    Failed,
    Interrupted,
    Planned,
    RunnerReport,
)
from runplane.domain.variable_precedence import read_document
from runplane.domain.variables import name_problem
from runplane.runner.archive import ArchiveLimits, extract_configuration
from runplane.runner.bounded_log import BoundedLog
from runplane.runner.cloud_credentials import credentials_environment
from runplane.runner.config_check import check_root_module
from runplane.runner.confinement import (
    Confinement,
    ConfinementError,
    Isolation,
    read_engine_file,
)
from runplane.runner.diagnostics import engine_errors
from runplane.runner.engine import Engine, resolve_engine
from runplane.runner.engine_classify import credentials_missing
from runplane.runner.engine_config import (
    variables_handed_once,
    write_backend_config,
    write_backend_override,
    write_cli_config,
)
from runplane.runner.engine_env import engine_environment
from runplane.runner.engine_errors import EngineError, EngineTimeout
from runplane.runner.logship import LogShipper, SendFailed
from runplane.runner.plan_options import checked_plan, run_options
from runplane.runner.refusal import Refused, shown
from runplane.runner.relay import EngineRelay
from runplane.runner.sensitive_override import write_sensitive_override
from runplane.runner.sts_relay import StsRelay

DEFAULT_HEARTBEAT_SECONDS = 60
_LOGGED_ERROR = 500
# A live log chunk waits at most this long for the control plane before it is retried.
_CHUNK_TIMEOUT = 15
# A grant from the session start is used only while its URL has this long left, so the
# transfer starts before the URL expires; after that the runner asks the routes.
_GRANT_MARGIN = 30
# The largest saved plan the runner reads back from the engine (an artifact's cap).
MAX_PLAN_BYTES = 100 * 1024 * 1024


class CallFailed(RuntimeError):
    """The control plane answered with an error status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ControlPlane:
    """The runner's HTTP client: the run API's runner endpoints, with the session."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.token: str | None = None

    def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        timeout: float = 120,
    ) -> Any:
        data = json.dumps(dict(body)).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the control plane's own URL
            f"{self.url}{path}", data=data, method=method
        )
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            detail = error.read()[:2000].decode("utf-8", "replace")
            raise CallFailed(
                f"{method} {path} failed with {error.code}: {detail}", error.code
            ) from None


def _transfer(method: str, url: str, body: bytes | None = None) -> bytes:
    # Ciphertext is opaque bytes: never let a server try to parse it as a form.
    headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
    request = urllib.request.Request(url, data=body, method=method, headers=headers)  # noqa: S310
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310
        return bytes(response.read())


class Runner:
    def __init__(
        self,
        environ: Mapping[str, str],
        workdir: Path,
        confinement: Confinement | None = None,
    ) -> None:
        self.env = environ
        # The runner's own directory; the engine's is beside it (see ``prepare``).
        self.workdir = workdir
        # A launch asking for a confinement this sandbox cannot give fails its phase
        # (reported, so the run does not wait for a lost sandbox); nothing runs.
        self.unconfinable: str | None = None
        try:
            self.confinement = confinement or Confinement.from_environ(environ)
        except ConfinementError as error:
            self.confinement, self.unconfinable = Confinement(Isolation.NONE, None), str(error)
        # What the engine's CLI configuration carries instead of the session: good
        # for this phase's relay only.
        self.relay_secret = secrets.token_hex(32)
        self.variables: dict[str, str] | None = None
        # The run's env variables (``prepare``), for the engine's environment only.
        self.env_variables: dict[str, str] = {}
        self.sensitive_env: frozenset[str] = frozenset()
        self.api = ControlPlane(environ["RUNPLANE_CONTROL_PLANE_URL"])
        self.run_id = environ["RUNPLANE_RUN_ID"]
        self.attempt_id = environ["RUNPLANE_ATTEMPT_ID"]
        self.phase = environ["RUNPLANE_PHASE"]
        self.sandbox_id = environ["RUNPLANE_SANDBOX_ID"]
        self.manifest: dict[str, Any] = {}
        # Handed over with the session (see ``start``): used once each, while fresh.
        self.grants = Grants()
        # Streams the log's redacted head while the phase runs (see runner/logship.py).
        self.shipper = LogShipper(self._send_chunk)
        self.log = BoundedLog(sink=self.shipper.feed)
        # Wall time spent inside the engine, reported so overhead can be measured.
        self.engine_seconds = 0.0
        # The engine's way to the Cloud API (see runner/relay.py), started by ``prepare``.
        self.relay: EngineRelay | None = None
        # The engine's way to a non-default STS (the embedded stack's), if it was issued one.
        self.sts_relay: StsRelay | None = None
        # The phase's final uploads, stored and registered with its result (``report``).
        self.unregistered: list[tuple[str, bytes, _Staged]] = []

    # -- transfers ------------------------------------------------------------------------

    def download(self, artifact_id: str) -> bytes:
        """An input's plaintext, verified through EOF before it is used."""
        granted = self.grants.download(artifact_id)
        try:
            if granted is None:
                raise _GrantRefused()
            grant, ciphertext = granted, _transfer("GET", granted["url"])
        except (_GrantRefused, urllib.error.HTTPError):  # none, or expired: ask the route
            grant = self.api.call("POST", f"/api/v1/runner/downloads/{artifact_id}")
            ciphertext = _transfer("GET", grant["url"])
        decryption = Decryption(
            base64.b64decode(grant["data_key"]),
            artifact_id,
            expected_sha256=grant["sha256"],
            expected_size=grant["size"],
        )
        return b"".join(decryption.stream(io.BytesIO(ciphertext).read))

    def upload(self, kind: str, plaintext: bytes) -> tuple[str, str]:
        grant = self.grants.upload(kind)
        if grant is not None:
            try:
                return self._upload_with(grant, plaintext)
            except _GrantRefused:  # expired on the way: begin-upload issues a fresh one
                pass
        grant = self.api.call("POST", "/api/v1/runner/uploads", {"kind": kind})
        return self._upload_with(grant, plaintext, refusable=False)

    def upload_all(
        self, uploads: list[tuple[str, bytes]], *, with_result: bool = False
    ) -> list[tuple[str, str]]:
        """``upload`` for each ``(kind, plaintext)``, registered together in one call when
        each went up with its session-start grant (``with_result``: by the result call,
        see ``report``); otherwise, or if that call is refused, each is registered (or
        uploaded afresh) on its own, as ``upload`` does."""
        staged: dict[str, _Staged] = {}
        for kind, plaintext in uploads:
            grant = self.grants.upload(kind)
            if grant is None:
                break
            try:
                staged[kind] = _Staged(grant, *self._put(grant, plaintext))
            except _GrantRefused:
                break
        else:
            if with_result:
                self.unregistered = [(kind, data, staged[kind]) for kind, data in uploads]
                return [staged[kind].stored() for kind, _ in uploads]
            try:
                self.api.call(
                    "POST",
                    "/api/v1/runner/uploads/register",
                    {"uploads": [each.registration() for each in staged.values()]},
                )
                return [staged[kind].stored() for kind, _ in uploads]
            except CallFailed:
                pass  # each on its own below says which one, and why
        return [self._register_or_upload(staged.get(kind), kind, data) for kind, data in uploads]

    def _register_or_upload(
        self, staged: _Staged | None, kind: str, plaintext: bytes
    ) -> tuple[str, str]:
        if staged is not None:
            try:
                return self._register(staged)
            except _GrantRefused:
                pass
        return self.upload(kind, plaintext)

    def _put(
        self, grant: Mapping[str, Any], plaintext: bytes, *, refusable: bool = True
    ) -> tuple[int, str]:
        """Encrypt ``plaintext`` under the grant's key and PUT it to its URL: the
        plaintext's size and SHA-256. A refused URL is ``_GrantRefused`` if ``refusable``."""
        encryption = Encryption(
            base64.b64decode(grant["data_key"]), grant["artifact_id"], limit=grant["max_size"]
        )
        pieces: Iterator[bytes] = (
            plaintext[i : i + CHUNK_SIZE] for i in range(0, len(plaintext), CHUNK_SIZE)
        )
        body = b"".join(encryption.stream(pieces))
        try:
            _transfer("PUT", grant["url"], body)
        except urllib.error.HTTPError:
            if refusable:
                raise _GrantRefused() from None
            raise
        assert encryption.sha256 is not None
        return encryption.size, encryption.sha256

    def _upload_with(
        self, grant: Mapping[str, Any], plaintext: bytes, *, refusable: bool = True
    ) -> tuple[str, str]:
        staged = _Staged(grant, *self._put(grant, plaintext, refusable=refusable))
        return self._register(staged, refusable=refusable)

    def _register(self, staged: _Staged, *, refusable: bool = True) -> tuple[str, str]:
        try:
            self.api.call(
                "POST",
                f"/api/v1/runner/uploads/{staged.grant['artifact_id']}/register",
                {"ticket": staged.grant["ticket"], "size": staged.size, "sha256": staged.sha256},
            )
        except CallFailed as failed:
            # Only a refused ticket is worth a fresh one; a failed check would fail again.
            if refusable and failed.status == _TICKET_REFUSED:
                raise _GrantRefused() from None
            raise
        return staged.stored()

    # -- phases ---------------------------------------------------------------------------

    def start(self) -> None:
        started = self.api.call(
            "POST",
            "/api/v1/runner/sessions",
            {
                "bootstrap": self.env["RUNPLANE_BOOTSTRAP"],
                "run_id": self.run_id,
                "attempt_id": self.attempt_id,
                "phase": self.phase,
                "sandbox_id": self.sandbox_id,
                # Read with the bootstrap: one request for the session and its manifest.
                "inputs": [i for i in self.env.get("RUNPLANE_INPUTS", "").split(",") if i],
                # Read with it too: the session's token then names its state's artifact.
                **(
                    {"state_version": self.env["RUNPLANE_STATE_VERSION"]}
                    if self.env.get("RUNPLANE_STATE_VERSION")
                    else {}
                ),
            },
        )
        self.api.token = started["token"]
        self.manifest = started["manifest"]
        self.grants = Grants(started.get("grants"), received=time.monotonic())
        self.log = self._new_log([])

    @property
    def engine_home(self) -> Path:
        """The engine's own directory: its home, configuration and outputs."""
        return self.workdir.parent / "engine"

    def prepare(self) -> tuple[Engine, Path]:
        """The engine in the extracted, checked configuration, and the
        ``-backend-config`` file to initialise with."""
        if self.unconfinable is not None:
            raise Refused(f"the sandbox cannot confine the engine: {self.unconfinable}")
        limits = ArchiveLimits.from_environ(self.env)
        home = self.confinement.engine_directory(self.engine_home)
        config = home / "config"
        config.mkdir(mode=0o755)
        archive = self.download(self.manifest["configuration_artifact_id"])
        extracted = extract_configuration(io.BytesIO(archive), config, limits)
        del archive
        # Checked before the runner adds its own backend override, which is then the
        # only backend declaration.
        check_root_module(config, replaced_backend=bool(self.manifest.get("remote_operation")))
        if self.manifest.get("variables_artifact_id"):
            raw = self.download(self.manifest["variables_artifact_id"])
            try:
                document = read_document(json.loads(raw))
            except ValueError as error:
                raise Refused(f"the run's variables cannot be used: {error}") from None
            del raw
            sensitive = set(self.manifest.get("sensitive_variables") or [])
            terraform, env = document.terraform, document.env
            # Every value the run gives the engine is redacted from its log; sensitive
            # ones in every spelling the redaction knows (docs/runs.md).
            self.log = self._new_log(
                [v for k, v in terraform.items() if k in sensitive]
                + [v for k, v in env.items() if k in document.sensitive_env],
                plain=[v for k, v in terraform.items() if k not in sensitive]
                + [v for k, v in env.items() if k not in document.sensitive_env],
            )
            self.variables = terraform
            self.env_variables = env
            self.sensitive_env = document.sensitive_env
        if extracted.skipped:
            # The engine's working directory and implied plugin mirror: a provider
            # shipped there would run. Left out, and said so in the run's log.
            self.log.write(
                f"[runner] left out of the configuration ({extracted.skipped_members} "
                f"entries; providers and modules are installed by init): "
                f"{', '.join(extracted.skipped)}\n"
            )
        # The API may sit under a path (an API Gateway stage): the host block names
        # the services by full URL, so only the network location is the hostname.
        host = urllib.parse.urlsplit(self.api.url).netloc
        names = {
            "hostname": host,
            "organization": self.manifest["organization"],
            "workspace": self.manifest["workspace"],
        }
        # The workspace's sensitive variables, declared so to the engine: it then masks
        # what derives from them and refuses to print them as plain outputs.
        # A sensitive TF_VAR_name environment variable sets variable name: it is as
        # sensitive to the engine as a sensitive Terraform variable.
        from_env = [tf_var_name(name) for name in sorted(self.sensitive_env)]
        write_sensitive_override(
            config,
            {
                *(self.manifest.get("sensitive_variables") or []),
                *(name for name in from_env if name and name_problem(name) is None),
            },
        )
        try:
            write_backend_override(config, **names)
            backend_config = write_backend_config(home / "backend.hcl", **names)
        except ValueError:
            raise Refused(
                f"organization {shown(names['organization'])} or workspace "
                f"{shown(names['workspace'])} cannot be named in the engine's remote backend "
                "(letters, digits, '-' and '_' only)"
            ) from None
        mirror = self.env.get("RUNPLANE_PROVIDER_MIRROR")
        network = self.confinement.network
        # An apply's run took the workspace's apply lock before this sandbox started.
        self.relay = EngineRelay(
            self.api.url,
            local_secret=self.relay_secret,
            authorization=lambda: self.api.token or "",
            lock_held=self.phase == "apply",
            first_reads=True,
            bind=network.run if network is not None else None,
        ).start()
        cli_config = write_cli_config(
            home / "cli.tfrc",
            host=host,
            api_url=f"{self.relay.base_url}/api/v2/",
            token=self.relay_secret,
            provider_mirror=Path(mirror) if mirror else None,
        )
        self.confinement.hand_over(home)
        own = {
            "PATH": self.env.get("PATH", os.defpath),
            "HOME": str(home),
            "TMPDIR": str(home),
            "TF_CLI_CONFIG_FILE": str(cli_config),
            "TFE_RUN_ID": self.run_id,
        }
        # The run's env variables reach the engine's process and nothing else.
        env = engine_environment(own, self.env_variables).env
        binary = resolve_engine(self.env.get("RUNPLANE_ENGINE"), self.env)
        self.confinement.allow_reading(binary.parent, *([Path(mirror)] if mirror else []))
        engine = Engine(binary, config, env, self.log, confinement=self.confinement)
        return engine, backend_config

    def _variables_file(self) -> contextlib.AbstractContextManager[Path | None]:
        """The ``-var-file`` the plan reads its variables from, once (None without: a run
        with no variable, or with environment variables only)."""
        if not self.variables:
            return contextlib.nullcontext()
        user = self.confinement.user
        return variables_handed_once(
            self.engine_home / "variables.json",
            self.variables,
            (user.uid, user.gid) if user is not None else None,
        )

    def _read_plan(self) -> bytes:
        """The saved plan the engine wrote (its processes are gone by now)."""
        try:
            user = self.confinement.user
            owner = user.uid if user is not None else None
            return read_engine_file(self.engine_home / "plan.bin", MAX_PLAN_BYTES, owner)
        except ConfinementError as error:
            raise Refused(f"the engine's saved plan is unusable: {error}") from None

    def plan(self) -> RunnerReport:
        # Checked before anything runs: an option the runner cannot carry out ends the phase.
        options = run_options(self.manifest)
        engine, backend_config = self.prepare()
        refused = self._take_credentials(engine)
        if refused is not None:
            return CredentialsRequired(reason=refused, log_artifact_id=self._log_if_stored())
        started = time.perf_counter()
        init = engine.init(lock=False, backend_config=backend_config)
        if not init.succeeded:
            return self._failed("engine init failed")
        saved = self.engine_home / "plan.bin"
        with self._variables_file() as var_file:
            planned = engine.plan(saved, lock=False, var_file=var_file, options=options)
        if not planned.succeeded:
            return self._failed("engine plan failed")
        plan_bytes = self._read_plan()
        plan_json = engine.show_json(saved)
        # Its JSON describes it, and it is in the mode, with the targets and the forced
        # replacements, the run asked for (runner/plan_options.py).
        checked_plan(plan_bytes, plan_json, options)
        version = engine.version()
        self.engine_seconds += time.perf_counter() - started
        summary = summarize(plan_json)
        if options.refresh_only:
            # What drifted is the finding; the engine's exit code says whether it did.
            drifted = drifted_resources(plan_json)
            summary = dataclasses.replace(
                summary,
                drifted=drifted,
                has_changes=bool(planned.has_changes) or summary.has_changes or drifted > 0,
            )
        json_bytes = json.dumps(plan_json, sort_keys=True).encode()
        (plan_id, _), (json_id, json_sha), (log_id, _) = self._upload_with_log(
            [("plan", plan_bytes), ("plan_json", json_bytes)]
        )
        return Planned(
            summary=summary,
            plan_artifact_id=plan_id,
            plan_sha256=hashlib.sha256(plan_bytes).hexdigest(),
            plan_json_artifact_id=json_id,
            plan_json_sha256=json_sha,
            engine_version=version,
            log_artifact_id=log_id,
        )

    def apply(self) -> RunnerReport:
        plan_bytes = self.download(self.manifest["plan_artifact_id"])
        plan_sha = hashlib.sha256(plan_bytes).hexdigest()
        # The configuration is prepared while the control plane redeems the apply start;
        # the engine starts only once it has (a refused start is the error reported).
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as redeeming:
            redeemed = redeeming.submit(
                self.api.call,
                "POST",
                "/api/v1/runner/apply-start",
                {"handle": self.env["RUNPLANE_APPLY_START"], "request": {"plan_sha256": plan_sha}},
            )
            try:
                engine, backend_config = self.prepare()
            finally:
                redeemed.result()
        # Issued only now: the apply role is for the attempt whose start was redeemed.
        refused = self._take_credentials(engine)
        if refused is not None:
            return Failed(reason=refused, log_artifact_id=self._log_if_stored())
        saved = self._give_engine("plan.bin", plan_bytes)
        started = time.perf_counter()
        init = engine.init(backend_config=backend_config)
        try:
            applied = engine.apply(saved) if init.succeeded else None
        except EngineTimeout:
            # Stopped at its time limit mid-apply: as uncertain as a kill.
            self.engine_seconds += time.perf_counter() - started
            return self._interrupted_because(
                "the engine was stopped at its time limit during apply; "
                "the state may be partly applied"
            )
        self.engine_seconds += time.perf_counter() - started
        if applied is None:
            return self._failed("engine init failed")
        killed_by = applied.ended_by_signal
        if killed_by is not None:
            return self._interrupted(killed_by)
        if not applied.succeeded:
            return self._failed("engine apply failed")
        return Applied(log_artifact_id=self._upload_log())

    def _take_credentials(self, engine: Engine) -> str | None:
        """Redeem the phase's credentials capability (if the launch carried one) and hand
        what it yields to the engine's environment, redacted from the log from now on.
        Returns why the control plane refused to issue them (the engine must not run)."""
        handle = self.env.get("RUNPLANE_CREDENTIALS")
        if not handle:
            return None
        try:
            issued = self.api.call("POST", "/api/v1/runner/credentials", {"handle": handle})
        except CallFailed as refused:
            reason = _refusal_message(refused)
            self.log.write(f"[runner] cloud credentials were not issued: {reason}\n")
            return f"cloud credentials were not issued: {reason}"
        credentials = IssuedCredentials.from_wire(issued["credentials"])
        if credentials.aws_endpoint_url:
            # Reached through the runner: the engine's sandbox may have no network.
            network = self.confinement.network
            self.sts_relay = StsRelay(
                credentials.aws_endpoint_url, bind=network.run if network is not None else None
            ).start()
            credentials = dataclasses.replace(credentials, aws_endpoint_url=self.sts_relay.url)
        self.log.also_redact(credentials.secrets())
        given = credentials_environment(credentials, self._give_engine)
        # They win over the run's env variables of the same names, and the log says so.
        overridden = sorted(given.keys() & self.env_variables.keys())
        for name in overridden:
            self.log.write(
                f"[runner] environment variable {name} is set by the workspace's cloud "
                "credentials; the variable's own value is not used\n"
            )
        engine.add_environment(given, replacing=overridden)
        named = ", ".join(issued.get("issued") or [])
        self.log.write(f"[runner] cloud credentials issued for this phase: {named}\n")
        return None

    def _interrupted(self, signum: int) -> Interrupted:
        """A signal ended the engine mid-apply, before its own last word: what it changed
        is unknown, so the log and the report say so (an uncertain outcome, not a failure)
        and name the signal."""
        return self._interrupted_because(
            f"the engine was killed by signal {signum} ({_signal_name(signum)}) during apply; "
            "the state may be partly applied"
        )

    def _interrupted_because(self, reason: str) -> Interrupted:
        self.log.write(f"\n[runner] {reason}\n")
        return Interrupted(reason=reason, log_artifact_id=self._log_if_stored())

    def _give_engine(self, name: str, data: bytes) -> Path:
        """Write ``data`` as a new file of the engine's directory, the engine's to read."""
        path = self.engine_home / name
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        self.confinement.hand_over(path)
        return path

    def _new_log(self, values: list[str], plain: list[str] | None = None) -> BoundedLog:
        """A log redacting ``values`` and the session's own secrets (its token, the
        bootstrap handle, the relay's secret, the grants' URLs, data keys and tickets)
        in every spelling, and ``plain`` values (variables not sensitive) as written: it
        replaces the current one before anything was written to it, so the live stream
        and the final log stay one text."""
        own = [
            self.api.token or "",
            self.env["RUNPLANE_BOOTSTRAP"],
            self.relay_secret,
            *self.grants.secrets(),
        ]
        return BoundedLog(secrets=[*values, *own], sink=self.shipper.feed, values=plain or [])

    def _send_chunk(self, sequence: int, offset: int, data: bytes) -> None:
        body = {"sequence": sequence, "offset": offset, "data": base64.b64encode(data).decode()}
        try:
            self.api.call("POST", "/api/v1/runner/log-chunks", body, timeout=_CHUNK_TIMEOUT)
        except CallFailed as refused:
            raise SendFailed(refused.status) from None
        except Exception as error:  # unreachable, reset, timed out: retried
            raise SendFailed(None, type(error).__name__) from None

    def _failed(self, reason: str) -> Failed:
        text = self.log.text()
        failure = CredentialsRequired if credentials_missing(text) else Failed
        # The engine's own diagnostics say what went wrong (the log is redacted already).
        errors = engine_errors(text, MAX_REASON - len(reason) - 2)
        if errors:
            reason = f"{reason}:\n{errors}"
        return failure(reason=reason[:MAX_REASON], log_artifact_id=self._log_if_stored())

    def _log_if_stored(self) -> str | None:
        """The final log's ID, or None when it could not be stored (a failure is still
        reported, without its log)."""
        try:
            return self._upload_log()
        except Exception as error:  # reported without its log
            print(f"runner: the log could not be uploaded ({type(error).__name__})")
            return None

    def _upload_log(self) -> str:
        return self._upload_with_log([])[-1][0]

    def _upload_with_log(self, others: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
        """Upload ``others`` and then the final log, registered together: the stored IDs
        and digests, the log's last."""
        # The final log (the source of truth once stored) starts with exactly what was
        # streamed, so once it is stored the stream's undelivered rest is dropped rather
        # than sent: a live reader switches to the final log at the phase's end. Only
        # if it cannot be stored is the rest delivered, the stream then being all there is.
        self.log.close()
        try:
            stored = self.upload_all([*others, ("logs", self.log.bytes())], with_result=True)
        except BaseException:
            self._drain_stream()
            raise
        self.shipper.abandon()
        return stored

    def _drain_stream(self) -> None:
        self.shipper.close()
        if self.shipper.stopped_reason:
            print(f"runner: live log streaming stopped: {self.shipper.stopped_reason}")

    def _outcome(self) -> RunnerReport:
        """The phase's result; every failure becomes a reported ``failed`` outcome."""
        try:
            return self.plan() if self.phase == "plan" else self.apply()
        except Refused as refusal:
            self.log.write(f"\n[runner] refused: {refusal.message}\n")
            return self._failed(refusal.message)
        except EngineError as error:
            self.log.write(f"\n{error}\n")
            return self._failed(type(error).__name__)
        except Exception as error:  # any failure must still be reported
            # The reason names only the kind of error: its text could quote anything,
            # so it goes to the log, where secrets are redacted.
            kind = type(error).__name__
            self.log.write(f"\n[runner] {kind}: {str(error)[:_LOGGED_ERROR]}\n")
            return self._failed(f"the runner failed ({kind}); see the run's log")

    def run(self) -> int:
        self.start()
        self.shipper.start()
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(stop,), daemon=True)
        beat.start()
        try:
            result = self.report(
                dataclasses.replace(self._outcome(), engine_seconds=round(self.engine_seconds, 3))
            )
        finally:
            stop.set()
            self.shipper.close()
            if self.relay is not None:
                self.relay.stop()
            if self.sts_relay is not None:
                self.sts_relay.stop()
            self.confinement.close()
        if isinstance(result, Failed):
            print(f"runner: {self.phase} ended {result.OUTCOME}: {result.reason}")
            return 1
        return 0

    def report(self, result: RunnerReport) -> RunnerReport:
        """Send the phase's result with the uploads it names, registered by the same call.
        If an upload is what that call refused, each is registered (or uploaded afresh,
        under a new ID) on its own and the result, naming the IDs stored, is sent alone;
        a refused session or report (the run moved on) is final."""
        pending, self.unregistered = self.unregistered, []
        body = result.to_wire()
        if pending:
            try:
                uploads = [staged.registration() for _, _, staged in pending]
                self.api.call("POST", "/api/v1/runner/result", {**body, "uploads": uploads})
                return result
            except CallFailed as refused:
                if refused.status in _REPORT_REFUSED:
                    raise
            stored = {
                staged.grant["artifact_id"]: self._register_or_upload(staged, kind, data)[0]
                for kind, data, staged in pending
            }
            result = _renamed(result, stored)
            body = result.to_wire()
        self.api.call("POST", "/api/v1/runner/result", body)
        return result

    def _heartbeat(self, stop: threading.Event) -> None:
        interval = int(self.env.get("RUNPLANE_HEARTBEAT_SECONDS", DEFAULT_HEARTBEAT_SECONDS))
        while not stop.wait(max(1, interval)):
            # A refused or failed beat is not fatal: the next one may land, and a
            # run that has ended stops this sandbox anyway.
            with contextlib.suppress(RuntimeError, OSError):
                self.api.call("POST", "/api/v1/runner/heartbeat")


_TICKET_REFUSED = 403
# A result call refused for its session or its report (the run moved on, or the report
# was checked and refused, which ended the run): registering again changes nothing.
_REPORT_REFUSED = {401, 409, 422}


@dataclasses.dataclass(frozen=True)
class _Staged:
    """An upload that went up under ``grant`` and awaits its register."""

    grant: Mapping[str, Any]
    size: int
    sha256: str

    def registration(self) -> dict[str, Any]:
        return {
            "artifact_id": self.grant["artifact_id"],
            "ticket": self.grant["ticket"],
            "size": self.size,
            "sha256": self.sha256,
        }

    def stored(self) -> tuple[str, str]:
        return str(self.grant["artifact_id"]), self.sha256


def _renamed(result: RunnerReport, stored: Mapping[str, str]) -> RunnerReport:
    """``result`` naming each artifact by the ID it was stored under at last."""
    renames = {
        name: stored[value]
        for name, value in vars(result).items()
        if name.endswith("_artifact_id") and isinstance(value, str) and value in stored
    }
    renamed: RunnerReport = dataclasses.replace(result, **renames)  # type: ignore[arg-type]
    return renamed


class _GrantRefused(Exception):
    """A grant from the session start was refused (its URL or ticket expired)."""


class Grants:
    """The download and upload grants the session start handed over, by artifact ID and
    by kind. Each is taken once, and only until ``_GRANT_MARGIN`` seconds before its
    URL expires: a long phase's later uploads ask the routes for fresh ones."""

    def __init__(self, wire: Mapping[str, Any] | None = None, *, received: float = 0.0) -> None:
        wire = wire or {}
        self._downloads: dict[str, Mapping[str, Any]] = dict(wire.get("downloads") or {})
        self._uploads: dict[str, Mapping[str, Any]] = dict(wire.get("uploads") or {})
        self._until = received + float(wire.get("expires_in") or 0) - _GRANT_MARGIN
        grants = [*self._downloads.values(), *self._uploads.values()]
        # Kept after the grants are used: the log redacts them for the whole phase.
        self._secrets = [str(g[k]) for g in grants for k in ("url", "data_key", "ticket") if k in g]

    def download(self, artifact_id: str) -> Mapping[str, Any] | None:
        grant = self._downloads.pop(artifact_id, None)
        return grant if self._fresh() else None

    def upload(self, kind: str) -> Mapping[str, Any] | None:
        grant = self._uploads.pop(kind, None)
        return grant if self._fresh() else None

    def _fresh(self) -> bool:
        return time.monotonic() < self._until

    def secrets(self) -> list[str]:
        return list(self._secrets)


def _refusal_message(refused: CallFailed) -> str:
    """The human sentence of a control plane's refusal (its ``message``), else its text."""
    text = str(refused)
    try:
        body = json.loads(text.split(": ", 1)[1])
        message = body.get("message") if isinstance(body, dict) else None
    except (IndexError, ValueError):
        message = None
    return str(message or text)[:_LOGGED_ERROR]


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:  # a real-time signal has no name of its own
        return "an unnamed signal"


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # Unwinds through the engine driver (which stops the engine) and the cleanup below.
    raise SystemExit(128 + signum)


def main() -> int:
    """Run one phase in ``./runner`` (the engine's directory beside it, ``./engine``);
    remove both however the phase ends."""
    workdir = Path.cwd() / "runner"
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        workdir.mkdir(mode=0o700, exist_ok=True)
        return Runner(os.environ, workdir).run()
    except Exception as error:  # nothing could be reported: say so, fail
        print(f"runner: no result could be reported ({type(error).__name__})")
        return 2
    finally:
        # The configuration, plaintext plan and CLI configuration.
        for directory in (workdir, workdir.parent / "engine"):
            shutil.rmtree(directory, ignore_errors=True)


# What a launch hands over in the environment and no process environment should keep.
_HANDED_OVER = ("RUNPLANE_BOOTSTRAP", "RUNPLANE_APPLY_START", "RUNPLANE_CREDENTIALS")
# A pipe's buffer holds this much without a reader: the environment must fit before exec.
_PIPE_CAPACITY = 60 * 1024


def main_handing_over() -> int:
    """Run a phase launched with its handles in the environment (a Fargate task):
    execute this program again with them on standard input instead, so that no
    process's environment, the one ``/proc/<pid>/environ`` shows, holds them."""
    if not any(name in os.environ for name in _HANDED_OVER):
        return main()
    line = json.dumps(dict(os.environ)).encode() + b"\n"
    if len(line) > _PIPE_CAPACITY:
        return main()
    read, write = os.pipe()
    os.write(write, line)
    os.close(write)
    os.dup2(read, 0)
    os.close(read)
    kept = {k: v for k, v in os.environ.items() if k not in _HANDED_OVER}
    # Our own interpreter and module, no shell.
    os.execve(sys.executable, [sys.executable, "-m", "runplane.runner", "--standby"], kept)  # noqa: S606


def main_on_standby() -> int:
    """Wait, imported and knowing no run, for a launch to hand one over on standard
    input: one JSON line, the whole environment the runner then runs in. Its input
    ending unread: nothing to run."""
    line = sys.stdin.readline()
    if not line:
        return 0
    try:
        handed = json.loads(line)
    except ValueError:
        handed = None
    if not isinstance(handed, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in handed.items()
    ):
        print("runner: the launch handed over no environment")
        return 2
    os.environ.clear()
    os.environ.update(handed)
    return main()


if __name__ == "__main__":
    sys.exit(main())
