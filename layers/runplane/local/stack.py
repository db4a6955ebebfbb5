"""The embedded stack: Runplane on one machine with no AWS account.

moto serves DynamoDB, S3 and KMS on loopback; the table, bucket and key are
created from the same definitions a deployment uses (and the signing key of the
stack's OpenID Connect issuer, docs/credentials.md); the Cloud API handlers
and the authorizer run in this process behind a loopback HTTP gateway. It is
ephemeral: moto keeps everything in memory, so a restart starts empty (the
data directory keeps only the sign-in key and the files clients read).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from runplane.adapters import aws
from runplane.adapters.acting_function import acting_as, as_function
from runplane.adapters.jwt import LocalIssuer
from runplane.adapters.launchers import LocalProcessLauncher, sandbox_isolation
from runplane.adapters.role_sessions import RoleSessions
from runplane.adapters.token_signer import create_signing_key
from runplane.domain import auto_destroy
from runplane.domain.identity import Permission
from runplane.domain.sandbox_exits import SandboxExit
from runplane.local import moto_inprocess, moto_serial, moto_speedups
from runplane.local.gateway import Gateway, GatewayServer
from runplane.local.moto_serial import serialize_requests
from runplane.local.moto_stepfunctions import enable_step_functions
from runplane.local.moto_streams import bound_streams
from runplane.local.scheduler import LocalScheduler
from runplane.local.stream_relay import StreamRelay
from runplane.local.sts_trust import trust_checking_sts
from runplane.runner import cli_config as cli_config_hcl
from runplane.settings import Settings
from runplane.store import models
from runplane.store.provision import create_table
from runplane.wiring import Services, build_services, install

REGION = "us-east-1"
ACCOUNT = "123456789012"
ASL = Path(__file__).resolve().parents[3] / "statemachines" / "run.asl.json"
SOURCE_ASL = ASL.parent / "source.asl.json"
GITHUB_APP_ID = "1"
DEFAULT_ORGANIZATION = "default"
LOCAL_ISSUER = "https://runplane.local/issuer"
LOCAL_AUDIENCE = "runplane-local"
# The workload identity tokens' signing key (RSA_2048, SIGN_VERIFY) in moto's KMS.
OIDC_KEY_ALIAS = "alias/runplane-oidc"


def _function_name(handler: str) -> str:
    return f"runplane-{handler}"


def _definition(path: Path = ASL) -> str:
    """The same ASL a deployment uses, with each function placeholder substituted."""
    text = path.read_text(encoding="utf-8")
    for name in task_handlers():
        arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{_function_name(name)}"
        text = text.replace(f"${{{name}FunctionArn}}", arn)
    if "${" in text:
        raise RuntimeError("the state machine definition has an unsubstituted placeholder")
    return text


def _configure_moto(endpoint: str) -> None:
    body = json.dumps(
        {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - loopback moto server
        f"{endpoint}/moto-api/config",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=30).close()  # noqa: S310


def _provider_mirror(directory: Path) -> Path | None:
    """The repository's offline test provider, when running from a clone."""
    installer = ASL.parents[1] / "examples" / "providers" / "install.py"
    spec = importlib.util.spec_from_file_location("runplane_test_provider_install", installer)
    if spec is None or spec.loader is None or not installer.exists():
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mirror: Path = module.install_mirror(directory)
    return mirror


def _build_sha() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],  # noqa: S607
            cwd=ASL.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def task_handlers() -> dict[str, Any]:
    from functions.tasks.handlers import HANDLERS
    from functions.tasks.source_handlers import SOURCE_HANDLERS

    return {**HANDLERS, **SOURCE_HANDLERS}


@dataclass(frozen=True)
class LocalGitHubApp:
    """The GitHub App the stack trusts: its ID, RSA key and webhook secret (generated
    at start; a local or fake GitHub is pointed at them)."""

    api_url: str
    app_id: str
    private_key_pem: str
    public_key_pem: str
    webhook_secret: str
    # The App's OAuth client, for connecting installations (a fake GitHub checks them).
    client_id: str
    client_secret: str
    slug: str = "runplane-local"

    @property
    def web_url(self) -> str:
        """GitHub's web pages: a local or fake GitHub serves them beside its API."""
        return self.api_url

    @classmethod
    def generate(cls, api_url: str) -> LocalGitHubApp:
        import secrets

        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        public = (
            key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        return cls(
            api_url,
            GITHUB_APP_ID,
            private,
            public,
            secrets.token_hex(32),
            f"Iv23li{secrets.token_hex(7)}",
            secrets.token_hex(20),
        )


# The audit export's step, registered beside the sweep (in AWS: its own rule and Lambda,
# infra/constructs/audit_export.py).
AUDIT_EXPORT_SCHEDULE = {"export": "audit"}
# The standby pool's top-up, when the stack keeps one (in AWS: infra/constructs/standby.py).
STANDBY_TOP_UP_SCHEDULE = {"standby": "top-up"}
STANDBY_TOP_UP_RATE = "rate(5 minutes)"


def _fire_schedule(payload: dict[str, Any]) -> Any:
    """What EventBridge Scheduler's Lambda target receives, delivered in-process."""
    if payload == STANDBY_TOP_UP_SCHEDULE:
        return _top_up_standbys()
    if payload == AUDIT_EXPORT_SCHEDULE:
        from functions.audit_export.handler import export

        with acting_as("functions.audit_export.handler.export"):
            return export({}, None)
    from functions.scheduler.handler import fire

    with acting_as("functions.scheduler.handler.fire"):
        return fire(payload, None)


def _top_up_standbys() -> Any:
    from functions.sandboxes.handler import top_up

    with acting_as("functions.sandboxes.handler.top_up"):
        return top_up({}, None)


def is_dashboard(path: str) -> bool:
    """The dashboard's paths: its pages, Terraform's run links under /app/, and the
    icon browsers ask for."""
    return path in ("/", "/ui", "/favicon.ico") or path.startswith(("/ui/", "/app/"))


def _api(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One gateway, three handlers: the dashboard at /, /ui and /app, the run API under
    /api/v1 (and the OpenID Connect issuer's documents), the Cloud API elsewhere."""
    path = str(event.get("path", ""))
    if is_dashboard(path):
        from functions.dashboard.app import handler as dashboard

        with acting_as("functions.dashboard.app.handler"):
            return dashboard(event, context)
    from functions.api.routes import OWN_PATHS

    if path.startswith("/api/v1/") or path.startswith("/webhooks/") or path in OWN_PATHS:
        from functions.api.app import handler as run_api

        with acting_as("functions.api.app.handler"):
            return run_api(event, context)
    from functions.cloud_api.handler import handler as cloud_api

    with acting_as("functions.cloud_api.handler.handler"):
        return cloud_api(event, context)


def _is_public(method: str, path: str) -> bool:
    from functions.api.routes import is_public as run_api_public
    from functions.cloud_api.routes import is_public as cloud_public

    # The dashboard signs its callers in with its own cookie sessions.
    return is_dashboard(path) or run_api_public(method, path) or cloud_public(method, path)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Credentials:
    url: str
    organization: str
    token: str

    def host(self) -> str:
        return self.url.split("://", 1)[1].rstrip("/")


class EngineNotFound(RuntimeError):
    """No engine binary for the sandboxes: the stack would start but every run would fail."""


ENGINE_HELP = (
    "no engine found for the sandboxes: pass --engine PATH, put tofu (or terraform) on "
    "PATH, or install the pinned one into this environment with `make engine` "
    "(python -m tools.fetch_engine) in a clone; see docs/engine.md"
)


def find_engine(
    explicit: str | None = None,
    *,
    cwd: Path | None = None,
    prefix: Path | None = None,
    path: str | None = None,
) -> str:
    """The engine sandboxes run: ``explicit``, else the pinned binary of this
    environment (``sys.prefix/engine/terraform``) or of the clone in ``cwd``
    (``.venv/engine/terraform``), else ``tofu``, then ``terraform`` on ``path``."""
    if explicit:
        found = shutil.which(explicit, path=path) if os.sep not in explicit else explicit
        if found is None or not os.access(found, os.X_OK) or not Path(found).is_file():
            raise EngineNotFound(f"--engine {explicit}: not an executable file")
        return str(Path(found).resolve())
    for pinned in (
        (prefix or Path(sys.prefix)) / "engine" / "terraform",
        (cwd or Path.cwd()) / ".venv" / "engine" / "terraform",
    ):
        if pinned.is_file() and os.access(pinned, os.X_OK):
            return str(pinned.resolve())
    for name in ("tofu", "terraform"):
        found = shutil.which(name, path=path)
        if found:
            return str(Path(found).resolve())
    raise EngineNotFound(ENGINE_HELP)


def provider_installation(mirror: Path) -> str:
    """Install every namespace the mirror holds from it only; everything else directly."""
    if not mirror.is_dir():
        return ""
    patterns = sorted(
        f"{host.name}/{namespace.name}/*"
        for host in mirror.iterdir()
        if host.is_dir()
        for namespace in host.iterdir()
        if namespace.is_dir()
    )
    if not patterns:
        return ""
    return cli_config_hcl.provider_installation(os.fspath(mirror.absolute()), patterns)


def terraform_rc(credentials: Credentials, provider_mirror: Path | None = None) -> str:
    """A CLI configuration that lets ``terraform``/``tofu`` use the stack over plain HTTP,
    and install the providers runs get from the stack's mirror (when it has one)."""
    api = f"{credentials.url}/api/v2/"
    services = {name: api for name in ("tfe.v2", "tfe.v2.1", "tfe.v2.2", "state.v2")}
    installation = provider_installation(provider_mirror) if provider_mirror else ""
    return cli_config_hcl.cli_config(
        credentials.host(), services, credentials.token, installation=installation
    )


class EmbeddedStack:
    def __init__(
        self,
        data_dir: Path,
        host: str = "127.0.0.1",
        port: int = 8700,
        *,
        engine: str | None = None,
        approval_window_seconds: int = 7 * 24 * 3600,
        runner_heartbeat_seconds: int = 900,
        notification_retry_base_seconds: int = 30,
        notification_allow_loopback: bool = False,
        github_api_url: str | None = None,
        scheduler_poll_seconds: float = 20.0,
        sandbox_network: bool = False,
        runner_standby: int = 0,
    ) -> None:
        self.data_dir = data_dir
        self._host = host
        self._port = port
        self._engine = engine
        self._approval_window = approval_window_seconds
        self._runner_heartbeat = runner_heartbeat_seconds
        self._notification_retry_base = notification_retry_base_seconds
        # Tests' webhook receivers listen on 127.0.0.1; a stack people use has none.
        self._notification_allow_loopback = notification_allow_loopback
        self.launcher: LocalProcessLauncher | None = None
        self._moto: Any = None
        self._server: GatewayServer | None = None
        self.services: Services | None = None
        self.credentials: Credentials | None = None
        self.issuer: LocalIssuer | None = None
        self.provider_mirror: Path | None = None
        self.github: LocalGitHubApp | None = (
            LocalGitHubApp.generate(github_api_url) if github_api_url else None
        )
        self._scheduler_poll = scheduler_poll_seconds
        # How far its sandboxes' engines are fenced in (adapters/launchers.py), and
        # whether they share this machine's network (then the stack's servers too).
        self.isolation = sandbox_isolation()
        self.sandbox_network = sandbox_network
        self.scheduler: LocalScheduler | None = None
        self.relay: StreamRelay | None = None
        # The AWS-style pool of standby runners (docs/standby.md), when above 0; else
        # the launcher's own standby (one runner handed its run on standard input).
        self._runner_standby = runner_standby
        self._top_up_scheduled = False

    def start(self) -> Credentials:
        from moto.server import ThreadedMotoServer

        from functions.authorizer.handler import handler as authorizer

        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "local")
        # moto's HTTP server logs every request; the stack reports its own state.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        moto_speedups.install()
        serialize_requests("dynamodb")
        serialize_requests("dynamodbstreams")
        bound_streams()
        moto_port = free_port()
        # moto's Step Functions interpreter calls Lambda through this port.
        os.environ["MOTO_PORT"] = str(moto_port)
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
        self._moto.start()
        endpoint = f"http://127.0.0.1:{moto_port}"
        # moto's interpreter names its own server as localhost.
        for served in (endpoint, f"http://localhost:{moto_port}"):
            moto_inprocess.serve_in_process(served, self._moto._server.app)
        _configure_moto(endpoint)
        enable_step_functions(
            {
                _function_name(name): as_function(f"{fn.__module__}.{fn.__name__}", fn)
                for name, fn in task_handlers().items()
            }
        )
        authorize = as_function("functions.authorizer.handler.handler", authorizer)
        self._server = GatewayServer(Gateway(_api, authorize, _is_public), self._host, self._port)
        self._server.start()
        host, port = self._server.address
        url = f"http://{host}:{port}"
        definition = _definition()
        digest = hashlib.sha256(definition.encode()).hexdigest()[:12]
        build = _build_sha()
        settings = Settings(
            table_name="runplane",
            artifact_bucket="runplane-artifacts",
            kms_key_id="alias/runplane",
            region=REGION,
            aws_endpoint_url=endpoint,
            control_plane_url=url,
            launcher="local",
            engine_path=self._engine,
            approval_window_seconds=self._approval_window,
            runner_heartbeat_seconds=self._runner_heartbeat,
            definition_version=f"run.asl.json#{digest}",
            build_sha=build,
            runner_release=f"runner@{build[:12]}",
            # Run events use the in-process queue (fed by the stream relay); receivers
            # may be on plain http, on loopback only when tests allow it, and never on
            # the stack's own gateway or moto ports (moto's reset would wipe all data).
            notification_allow_http=True,
            notification_allow_loopback=self._notification_allow_loopback,
            notification_refused_ports=(moto_port, port),
            notification_retry_base_seconds=self._notification_retry_base,
            single_organization=not self.isolates_tenants,
            # GitLab instances on loopback (a local or test server) may be plain http.
            gitlab_allow_http=True,
            # The audit export writes JSON lines under <data_dir>/audit/ (docs/audit.md).
            audit_export_directory=str(self.data_dir),
            runner_standby=self._runner_standby,
        )
        arn = self._provision(settings, definition)
        settings = settings.model_copy(
            update={
                "state_machine_arn": arn,
                **self._provision_sources(settings),
                **self._provision_issuer(settings),
            }
        )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # The admin token, the issuer's signing key: the stack's alone.
        self.data_dir.chmod(0o700)
        self.issuer = self._issuer()
        self.provider_mirror = _provider_mirror(self.data_dir / "providers")
        self.launcher = LocalProcessLauncher(
            engine=self._engine,
            provider_mirror=self.provider_mirror,
            isolation=self.isolation,
            host_network=self.sandbox_network,
        )
        if not self.isolates_tenants:
            print(
                f"runplane local: sandboxes are {self.isolation_summary()}: a configuration "
                "could reach this stack's data or servers, so the stack serves one "
                "organization. See docs/security.md.",
                file=sys.stderr,
            )
        self.services = self._build_services(settings)
        # A sandbox that ends before its runner's result is noticed as it ends.
        self.launcher.on_exit = self._sandbox_stopped
        self.activate()
        # Run events reach the queue as in AWS: from the outbox, through the table's stream.
        session = boto3.session.Session(region_name=settings.region)
        self.relay = StreamRelay.for_table(
            session.client("dynamodb", endpoint_url=endpoint),
            session.client("dynamodbstreams", endpoint_url=endpoint),
            settings.table_name,
            self.services.event_relay.relay,
        )
        self.relay.start()
        moto_serial.WRITE_LISTENERS.append(self.relay.wake)
        # The deployment's own schedule, as CDK creates it (infra/constructs/scheduler.py).
        self.services.schedule_registry.put_own(
            "auto-destroy-sweep", auto_destroy.SWEEP_RATE, {"sweep": auto_destroy.SWEEP}
        )
        self.services.schedule_registry.put_own(
            "audit-export", "rate(10 minutes)", AUDIT_EXPORT_SCHEDULE
        )
        self.scheduler = LocalScheduler(
            self.services.schedule_registry,
            _fire_schedule,
            self.services.clock,
            poll_seconds=self._scheduler_poll,
        )
        self.scheduler.start()
        self._fill_standby_pool()
        self.credentials = self._bootstrap(url)
        self._write_client_files(self.credentials)
        return self.credentials

    def _build_services(self, settings: Settings) -> Services:
        assert self.issuer is not None
        endpoint = settings.aws_endpoint_url
        assert endpoint is not None
        services = build_services(settings, verifier=self.issuer.verifier(), launcher=self.launcher)
        # moto issues credentials for any role: this STS first refuses what AWS would.
        services.role_sessions = RoleSessions(
            trust_checking_sts(endpoint, services.workload_identity.jwks),
            endpoint_url=endpoint,
        )
        return services

    def _fill_standby_pool(self) -> None:
        """With a pool: its top-up schedule, and a first top-up now (in AWS the
        schedule's first run fills it)."""
        assert self.services is not None
        if not self.services.settings.runner_standby:
            return
        if not self._top_up_scheduled:
            self.services.schedule_registry.put_own(
                "standby-top-up", STANDBY_TOP_UP_RATE, STANDBY_TOP_UP_SCHEDULE
            )
            self._top_up_scheduled = True
        _top_up_standbys()

    def use_standby_pool(self, size: int, *, poll_seconds: int | None = None) -> None:
        """Keep ``size`` standby runners in the AWS-style pool from now on (0: none),
        each claiming every ``poll_seconds``, on a running stack: its services are
        built again with the settings, as a deployment's functions are after
        ``runnerStandby`` changes, and the previous pool's waiting standbys are
        retired (a run already assigned one goes on)."""
        assert self.services is not None
        previous = self.services
        changed: dict[str, int] = {"runner_standby": size}
        if poll_seconds is not None:
            changed["runner_standby_poll_seconds"] = poll_seconds
        settings = Settings.model_validate({**previous.settings.model_dump(), **changed})
        self.services = self._build_services(settings)
        # One run-event queue per stack: deliveries already queued go on in it.
        self.services.event_queue = previous.event_queue
        self.activate()
        if previous.standby_pool is not None:
            with acting_as("functions.sandboxes.handler.top_up"):
                previous.standby_pool.retire()
        self._fill_standby_pool()

    @property
    def isolates_tenants(self) -> bool:
        """Whether one organization's configuration can reach nothing of another's."""
        return self.isolation == "namespaces" and not self.sandbox_network

    def isolation_summary(self) -> str:
        network = "this machine's network" if self.sandbox_network else "no network"
        if self.isolation == "namespaces":
            return f"isolated (own user and namespaces, {network})"
        if self.isolation == "user":
            return "own user only (no bubblewrap), this machine's network"
        return "not isolated (not run as root)"

    def _sandbox_stopped(self, notice: SandboxExit) -> None:
        assert self.services is not None
        with acting_as("functions.sandboxes.handler.stopped"):
            self.services.sandbox_exits.stopped(notice)

    def activate(self) -> None:
        """Point this process's handlers at this stack (again, if something else moved them)."""
        assert self.services is not None
        settings = self.services.settings
        models.bind(settings.table_name, settings.region, settings.aws_endpoint_url)
        install(self.services)

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
            self.scheduler = None
        if self.launcher is not None:
            self.launcher.stop_all()
        if self.relay is not None:
            if self.relay.wake in moto_serial.WRITE_LISTENERS:
                moto_serial.WRITE_LISTENERS.remove(self.relay.wake)
            self.relay.stop()
            self.relay = None
        stop_events = getattr(self.services.event_queue if self.services else None, "stop", None)
        if stop_events is not None:
            stop_events()
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._moto is not None:
            for host in ("127.0.0.1", "localhost"):
                moto_inprocess.stop_serving(f"http://{host}:{self._moto._port}")
            self._moto.stop()
            self._moto = None
        aws.forget_clients()

    def __enter__(self) -> EmbeddedStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _provision(settings: Settings, definition: str) -> str:
        session = boto3.session.Session(region_name=settings.region)
        endpoint = settings.aws_endpoint_url
        create_table(session.client("dynamodb", endpoint_url=endpoint), settings.table_name)
        session.client("s3", endpoint_url=endpoint).create_bucket(Bucket=settings.artifact_bucket)
        kms = session.client("kms", endpoint_url=endpoint)
        key_id = kms.create_key(Description="Runplane embedded stack")["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName=settings.kms_key_id, TargetKeyId=key_id)
        scheduler = session.client("scheduler", endpoint_url=endpoint)
        scheduler.create_schedule_group(Name=settings.scheduler_group)
        sfn = session.client("stepfunctions", endpoint_url=endpoint)
        created = sfn.create_state_machine(
            name="runplane-run",
            definition=definition,
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/runplane-run",
        )
        return str(created["stateMachineArn"])

    def _provision_sources(self, settings: Settings) -> dict[str, Any]:
        """The source workflow, and the GitHub App's secrets in Secrets Manager."""
        session = boto3.session.Session(region_name=settings.region)
        endpoint = settings.aws_endpoint_url
        created = session.client("stepfunctions", endpoint_url=endpoint).create_state_machine(
            name="runplane-source",
            definition=_definition(SOURCE_ASL),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/runplane-source",
        )
        found: dict[str, Any] = {"source_state_machine_arn": created["stateMachineArn"]}
        if self.github is None:
            return found
        manager = session.client("secretsmanager", endpoint_url=endpoint)
        key = manager.create_secret(
            Name="runplane/github-app-private-key", SecretString=self.github.private_key_pem
        )
        hook = manager.create_secret(
            Name="runplane/github-webhook-secret", SecretString=self.github.webhook_secret
        )
        client = manager.create_secret(
            Name="runplane/github-app-client-secret", SecretString=self.github.client_secret
        )
        return {
            **found,
            "github_api_url": self.github.api_url,
            "github_web_url": self.github.web_url,
            "github_app_id": self.github.app_id,
            "github_app_slug": self.github.slug,
            "github_client_id": self.github.client_id,
            "github_app_private_key_secret_arn": key["ARN"],
            "github_webhook_secret_arn": hook["ARN"],
            "github_client_secret_arn": client["ARN"],
        }

    @staticmethod
    def _provision_issuer(settings: Settings) -> dict[str, Any]:
        """Runplane as an OpenID Connect issuer at the stack's own URL, signing with a key
        of moto's KMS (docs/credentials.md)."""
        session = boto3.session.Session(region_name=settings.region)
        kms = session.client("kms", endpoint_url=settings.aws_endpoint_url)
        key = create_signing_key(kms, OIDC_KEY_ALIAS, "Runplane embedded stack: workload identity")
        return {"oidc_issuer_url": settings.control_plane_url, "oidc_signing_key_ids": key}

    def _issuer(self) -> LocalIssuer:
        path = self.data_dir / "issuer.json"
        if path.exists():
            return LocalIssuer.load(path, LOCAL_ISSUER, LOCAL_AUDIENCE)
        issuer = LocalIssuer.create(LOCAL_ISSUER, LOCAL_AUDIENCE)
        issuer.save(path)
        return issuer

    def _bootstrap(self, url: str) -> Credentials:
        assert self.services is not None
        org = self.services.tenancy.create_organization(DEFAULT_ORGANIZATION)
        issued = self.services.identity.issue_token(
            org.id, "admin", frozenset(Permission), created_by="runplane local up"
        )
        return Credentials(url=url, organization=org.name, token=issued.token)

    def login_link(self) -> str:
        """A one-time dashboard sign-in link for the organization's admin."""
        assert self.services is not None
        assert self.credentials is not None
        org_id = self.services.workspaces.organization_id_of(self.credentials.organization)
        code = self.services.web_sessions.issue_login_code(
            org_id, "admin", frozenset(Permission), created_by="runplane local up"
        )
        return f"{self.credentials.url}/ui/login?code={code}"

    def _write_client_files(self, credentials: Credentials) -> None:
        secrets = {
            "url": credentials.url,
            "organization": credentials.organization,
            "token": credentials.token,
        }
        for name, text in (
            ("credentials.json", json.dumps(secrets, indent=2) + "\n"),
            ("terraform.rc", terraform_rc(credentials, self.provider_mirror)),
        ):
            path = self.data_dir / name
            path.write_text(text, encoding="utf-8")
            path.chmod(0o600)
