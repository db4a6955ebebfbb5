"""Least privilege proven by execution, for the table: every DynamoDB call the code
makes while a run goes from creation to applying, and while the authorizer checks
each kind of credential, is allowed by the IAM actions its functions are granted.

The calls are recorded at botocore's API boundary (the real requests moto answers),
so a store function that starts using another API (``BatchGetItem``, say) fails
here instead of with ``AccessDenied`` in a deployment.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.client import BaseClient

from infra.constructs.functions import TABLE_GET, TABLE_READ, TABLE_WRITE
from tests.integration.arena import Arena, applying

# What each TransactWriteItems element needs (IAM checks each one's own action).
_TRANSACT = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
# Setting the table up, which no function does.
_SETUP = {"CreateTable", "UpdateTimeToLive", "DescribeTable", "DescribeTimeToLive"}


def _actions(operation: str, params: dict[str, Any]) -> set[str]:
    if operation == "TransactWriteItems":
        return {_TRANSACT[kind] for item in params["TransactItems"] for kind in item}
    return {f"dynamodb:{operation}"}


@contextmanager
def recorded() -> Iterator[set[str]]:
    """The IAM actions of every DynamoDB request made inside the block."""
    actions: set[str] = set()
    original = BaseClient._make_api_call  # type: ignore[attr-defined]

    def record(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb" and operation not in _SETUP:
            actions.update(_actions(operation, params))
        return original(self, operation, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BaseClient, "_make_api_call", record)
        yield actions


def test_a_run_to_its_apply_uses_only_granted_table_actions(arena: Arena) -> None:
    # When a run is created, planned, checked, approved and its apply started
    with recorded() as actions:
        applying(arena, "grants")

    # Then every table call was a read or write the run functions are granted
    assert actions
    assert actions <= set(TABLE_READ) | set(TABLE_WRITE), sorted(
        actions - set(TABLE_READ) - set(TABLE_WRITE)
    )


def test_the_authorizer_needs_only_its_grant_for_every_credential(arena: Arena) -> None:
    # Given a run with an apply sandbox (a runner session), and an API token
    _, run_id = applying(arena, "authorizer")
    token = arena.runner_token(run_id, "apply")
    api_token = arena.stack.identity.create_token(arena.admin, "grants", "reader").token

    # When the authorizer's service checks each credential
    with recorded() as actions:
        arena.stack.identity.authenticate_request(f"Bearer {token}", "POST /api/v1/runner/result")
        arena.stack.identity.authenticate_request(f"Bearer {api_token}")

    # Then its reads are within the authorizer's grant
    assert actions
    assert actions <= set(TABLE_GET), sorted(actions - set(TABLE_GET))
