"""Counting the DynamoDB requests a call sends (counts are deterministic; timings are not)."""

from __future__ import annotations

from typing import Any

import botocore.client
import pytest


class DynamoDBRequests:
    """Records each DynamoDB operation botocore sends while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.operations: list[str] = []
        # A private method botocore's stubs leave out.
        original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

        def counted(client: Any, operation: str, params: Any) -> Any:
            if client.meta.service_model.service_name == "dynamodb":
                self.operations.append(operation)
            return original(client, operation, params)

        monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counted)
