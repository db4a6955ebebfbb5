"""Secrets are cached per process, and per deployed function where one process runs
several (the embedded stack), so that each function reads a secret under its own role."""

from __future__ import annotations

from typing import Any

from runplane.adapters.acting_function import acting_as
from runplane.adapters.secrets import Secrets

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:webhook"


class CountingSecretsManager:
    def __init__(self) -> None:
        self.reads: list[str] = []

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:
        self.reads.append(SecretId)
        return {"SecretString": "s3cret"}


def test_a_secret_is_read_once_by_a_process_with_one_function() -> None:
    client = CountingSecretsManager()
    secrets = Secrets(client)
    # When a deployed function (no acting function named) reads a secret twice
    values = [secrets.read(ARN, "webhook secret") for _ in range(2)]
    # Then the store was read once
    assert values == ["s3cret", "s3cret"]
    assert client.reads == [ARN]


def test_each_function_of_one_process_reads_the_secret_itself() -> None:
    client = CountingSecretsManager()
    secrets = Secrets(client)
    # When two functions of one process read the same secret, the first one twice
    for handler in (
        "functions.api.app.handler",
        "functions.tasks.x.ingest",
        "functions.api.app.handler",
    ):
        with acting_as(handler):
            secrets.read(ARN, "webhook secret")
    # Then each read it from the store once, itself
    assert client.reads == [ARN, ARN]
