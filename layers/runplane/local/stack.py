"""The embedded stack: Runplane on one machine with no AWS account.

moto serves DynamoDB, S3 and KMS on loopback; the table, bucket and key are
created from the same definitions a deployment uses; the Cloud API handlers
and the authorizer run in this process behind a loopback HTTP gateway. It is
ephemeral: moto keeps everything in memory, so a restart starts empty (the
data directory keeps only the sign-in key and the files clients read).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from runplane.adapters import aws
from runplane.adapters.jwt import LocalIssuer
from runplane.domain.identity import Permission
from runplane.local.gateway import Gateway, GatewayServer
from runplane.local.moto_serial import serialize_requests
from runplane.settings import Settings
from runplane.store import models
from runplane.store.provision import create_table
from runplane.wiring import Services, build_services, install

REGION = "us-east-1"
DEFAULT_ORGANIZATION = "default"
LOCAL_ISSUER = "https://runplane.local/issuer"
LOCAL_AUDIENCE = "runplane-local"


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


def terraform_rc(credentials: Credentials) -> str:
    """A CLI configuration that lets ``terraform``/``tofu`` use the stack over plain HTTP."""
    api = f"{credentials.url}/api/v2/"
    host = credentials.host()
    return (
        f'host "{host}" {{\n'
        "  services = {\n"
        f'    "tfe.v2" = "{api}",\n'
        f'    "tfe.v2.1" = "{api}",\n'
        f'    "tfe.v2.2" = "{api}",\n'
        f'    "state.v2" = "{api}",\n'
        "  }\n"
        "}\n\n"
        f'credentials "{host}" {{\n'
        f'  token = "{credentials.token}"\n'
        "}\n"
    )


class EmbeddedStack:
    def __init__(self, data_dir: Path, host: str = "127.0.0.1", port: int = 8700) -> None:
        self.data_dir = data_dir
        self._host = host
        self._port = port
        self._moto: Any = None
        self._server: GatewayServer | None = None
        self.services: Services | None = None
        self.credentials: Credentials | None = None
        self.issuer: LocalIssuer | None = None

    def start(self) -> Credentials:
        from moto.server import ThreadedMotoServer

        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "local")
        serialize_requests("dynamodb")
        moto_port = free_port()
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
        self._moto.start()
        endpoint = f"http://127.0.0.1:{moto_port}"
        settings = Settings(
            table_name="runplane",
            artifact_bucket="runplane-artifacts",
            kms_key_id="alias/runplane",
            region=REGION,
            aws_endpoint_url=endpoint,
        )
        self._provision(settings)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.issuer = self._issuer()
        self.services = build_services(settings, verifier=self.issuer.verifier())
        self.activate()

        from functions.authorizer.handler import handler as authorizer
        from functions.cloud_api.handler import handler as cloud_api
        from functions.cloud_api.routes import is_public

        self._server = GatewayServer(
            Gateway(cloud_api, authorizer, is_public), self._host, self._port
        )
        self._server.start()
        host, port = self._server.address
        url = f"http://{host}:{port}"
        self.credentials = self._bootstrap(url)
        self._write_client_files(self.credentials)
        return self.credentials

    def activate(self) -> None:
        """Point this process's handlers at this stack (again, if something else moved them)."""
        assert self.services is not None
        settings = self.services.settings
        models.bind(settings.table_name, settings.region, settings.aws_endpoint_url)
        install(self.services)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._moto is not None:
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
    def _provision(settings: Settings) -> None:
        session = boto3.session.Session(region_name=settings.region)
        endpoint = settings.aws_endpoint_url
        create_table(session.client("dynamodb", endpoint_url=endpoint), settings.table_name)
        session.client("s3", endpoint_url=endpoint).create_bucket(Bucket=settings.artifact_bucket)
        kms = session.client("kms", endpoint_url=endpoint)
        key_id = kms.create_key(Description="Runplane embedded stack")["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName=settings.kms_key_id, TargetKeyId=key_id)

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

    def _write_client_files(self, credentials: Credentials) -> None:
        secrets = {
            "url": credentials.url,
            "organization": credentials.organization,
            "token": credentials.token,
        }
        for name, text in (
            ("credentials.json", json.dumps(secrets, indent=2) + "\n"),
            ("terraform.rc", terraform_rc(credentials)),
        ):
            path = self.data_dir / name
            path.write_text(text, encoding="utf-8")
            path.chmod(0o600)
