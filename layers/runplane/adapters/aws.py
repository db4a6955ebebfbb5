"""AWS clients, created lazily once per process and shared (client creation is not
thread-safe; calls on a created client are)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from runplane.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_stepfunctions import SFNClient

_LOCK = threading.Lock()
_CLIENTS: dict[tuple[str, str, str | None], Any] = {}


def _client(service: str, settings: Settings) -> Any:
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


def s3(settings: Settings) -> S3Client:
    return _client("s3", settings)  # type: ignore[no-any-return]


def kms(settings: Settings) -> KMSClient:
    return _client("kms", settings)  # type: ignore[no-any-return]


def stepfunctions(settings: Settings) -> SFNClient:
    return _client("stepfunctions", settings)  # type: ignore[no-any-return]


def ecs(settings: Settings) -> ECSClient:
    return _client("ecs", settings)  # type: ignore[no-any-return]


def sqs(settings: Settings) -> Any:
    return _client("sqs", settings)


def secret_string(settings: Settings, secret_id: str) -> str:
    """A Secrets Manager secret's current string value (the caller keeps it out of logs)."""
    client = _client("secretsmanager", settings)
    value = client.get_secret_value(SecretId=secret_id).get("SecretString")
    if not isinstance(value, str) or not value:
        raise ValueError("the secret has no string value")
    return value


def secretsmanager(settings: Settings) -> Any:
    return _client("secretsmanager", settings)


def scheduler(settings: Settings) -> Any:
    return _client("scheduler", settings)


def forget_clients() -> None:
    """Drop cached clients (tests start a fresh moto backend per test)."""
    with _LOCK:
        _CLIENTS.clear()
