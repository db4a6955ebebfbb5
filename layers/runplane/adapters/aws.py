"""AWS clients, created on first use once per process and shared (client creation is
not thread-safe; calls on a created client are).

What these functions return creates its client when a method is first called on it:
creating one loads the service's model, hundreds of milliseconds at a cold start,
which a request that builds a service but never calls that client (a state read
builds the artifact store, an S3 and a KMS client) should not pay."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol, cast

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_stepfunctions import SFNClient


class Endpoint(Protocol):
    """Where the clients connect: the settings model provides it (adapters do not
    import the settings; the composition root hands them in)."""

    @property
    def region(self) -> str: ...

    @property
    def aws_endpoint_url(self) -> str | None: ...


_LOCK = threading.Lock()
_CLIENTS: dict[tuple[str, str, str | None], Any] = {}


def _client(service: str, settings: Endpoint) -> Any:
    key = (service, settings.region, settings.aws_endpoint_url)
    with _LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = boto3.session.Session().client(
                service,  # type: ignore[call-overload]
                region_name=settings.region,
                endpoint_url=settings.aws_endpoint_url,
                config=Config(retries={"mode": "standard"}, signature_version="s3v4")
                if service == "s3"
                else Config(retries={"mode": "standard"}),
            )
        return _CLIENTS[key]


class _OnFirstUse:
    """Stands for a service's shared client, created when first used."""

    __slots__ = ("_service", "_settings")

    def __init__(self, service: str, settings: Endpoint) -> None:
        self._service = service
        self._settings = settings

    def __getattr__(self, name: str) -> Any:
        return getattr(_client(self._service, self._settings), name)


def clients_created() -> set[str]:
    """The services whose clients this process has created."""
    with _LOCK:
        return {service for service, _, _ in _CLIENTS}


def s3(settings: Endpoint) -> S3Client:
    return cast("S3Client", _OnFirstUse("s3", settings))


def kms(settings: Endpoint) -> KMSClient:
    return cast("KMSClient", _OnFirstUse("kms", settings))


def stepfunctions(settings: Endpoint) -> SFNClient:
    return cast("SFNClient", _OnFirstUse("stepfunctions", settings))


def ecs(settings: Endpoint) -> ECSClient:
    return cast("ECSClient", _OnFirstUse("ecs", settings))


def sqs(settings: Endpoint) -> Any:
    return _OnFirstUse("sqs", settings)


def secret_string(settings: Endpoint, secret_id: str) -> str:
    """A Secrets Manager secret's current string value (the caller keeps it out of logs)."""
    client = _client("secretsmanager", settings)
    value = client.get_secret_value(SecretId=secret_id).get("SecretString")
    if not isinstance(value, str) or not value:
        raise ValueError("the secret has no string value")
    return value


def secretsmanager(settings: Endpoint) -> Any:
    return _client("secretsmanager", settings)


def scheduler(settings: Endpoint) -> Any:
    return _client("scheduler", settings)


def forget_clients() -> None:
    """Drop cached clients (tests start a fresh moto backend per test)."""
    with _LOCK:
        _CLIENTS.clear()


_STS_CLIENTS: dict[tuple[str, str | None, bool], Any] = {}


def sts(endpoint_url: str | None, region: str, signed: bool) -> Any:
    """An STS client in ``region`` (regional endpoints: a role session is issued where
    the engine uses it); ``signed=False`` for calls that take no AWS credentials (a web
    identity token is the caller's proof)."""
    from botocore import UNSIGNED

    key = (region, endpoint_url, signed)
    with _LOCK:
        if key not in _STS_CLIENTS:
            config = Config(retries={"mode": "standard"})
            if not signed:
                config = config.merge(Config(signature_version=UNSIGNED))
            _STS_CLIENTS[key] = boto3.session.Session().client(
                "sts", region_name=region, endpoint_url=endpoint_url, config=config
            )
        return _STS_CLIENTS[key]
