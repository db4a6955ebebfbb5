"""The deploy-time copy of the dashboard app client's secret, against moto's Cognito
and Secrets Manager."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.custom_resources import client_secret

REGION = "us-east-1"


class _Responses:
    """Records what the function PUTs to CloudFormation's response URL."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def urlopen(self, request: Any, timeout: float) -> io.BytesIO:
        assert request.get_method() == "PUT"
        self.sent.append(json.loads(request.data))
        return io.BytesIO(b"")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Responses]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    responses = _Responses()
    monkeypatch.setattr(
        "infra.custom_resources.client_secret.urllib.request.urlopen", responses.urlopen
    )
    with mock_aws():
        yield responses


def _event(kind: str, pool: str, client: str, secret: str) -> dict[str, Any]:
    return {
        "RequestType": kind,
        "ResponseURL": "https://cloudformation-custom-resource-response.example/presigned",
        "StackId": "stack",
        "RequestId": "request",
        "LogicalResourceId": "DashboardClientSecretCopy",
        "ResourceProperties": {"UserPoolId": pool, "ClientId": client, "SecretArn": secret},
    }


def _pool_client_secret(generate: bool) -> tuple[str, str, str, str | None]:
    cognito = boto3.client("cognito-idp", region_name=REGION)
    pool = cognito.create_user_pool(PoolName="runplane")["UserPool"]["Id"]
    client = cognito.create_user_pool_client(
        UserPoolId=pool, ClientName="dashboard", GenerateSecret=generate
    )["UserPoolClient"]
    secret = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="dashboard-client", SecretString="placeholder"
    )["ARN"]
    return pool, client["ClientId"], secret, client.get("ClientSecret")


@pytest.mark.parametrize("kind", ["Create", "Update"])
def test_the_client_secret_lands_in_the_secret_and_nowhere_else(aws: _Responses, kind: str) -> None:
    # Given an app client with a secret and the stack's secret
    pool, client, secret, value = _pool_client_secret(generate=True)
    assert value
    # When the resource is created or updated
    client_secret.handler(_event(kind, pool, client, secret), None)
    # Then the secret holds the client's secret
    stored = boto3.client("secretsmanager", region_name=REGION).get_secret_value(SecretId=secret)
    assert stored["SecretString"] == value
    # And CloudFormation hears success, with no data (the value never passes through it)
    (response,) = aws.sent
    assert response["Status"] == "SUCCESS"
    assert response["Data"] == {}
    assert value not in json.dumps(response)


def test_a_client_without_a_secret_fails_the_deployment(aws: _Responses) -> None:
    pool, client, secret, _ = _pool_client_secret(generate=False)
    client_secret.handler(_event("Create", pool, client, secret), None)
    (response,) = aws.sent
    assert response["Status"] == "FAILED"
    assert response["Reason"] == "copying the client secret failed: ValueError"


def test_delete_copies_nothing(aws: _Responses) -> None:
    pool, client, secret, _ = _pool_client_secret(generate=True)
    client_secret.handler(_event("Delete", pool, client, secret), None)
    stored = boto3.client("secretsmanager", region_name=REGION).get_secret_value(SecretId=secret)
    assert stored["SecretString"] == "placeholder"
    assert aws.sent[0]["Status"] == "SUCCESS"


def test_the_source_fits_inline_in_a_template() -> None:
    assert len(Path(client_secret.__file__).read_text(encoding="utf-8")) < 4096
