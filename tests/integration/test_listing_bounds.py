"""Listings read what they show, not a workspace's history: with thousands of runs
stored, no request scans the table and none examines more items than its page holds
(DynamoDB's ``ScannedCount``, what it charges for). A listing that reads a whole
partition that grows with runs fails here. The figures at 100,000 runs:
``benchmarks.scale`` (docs/BENCHMARKS.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import botocore.client
import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from runplane.domain.entities import Organization, Run, Workspace
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind, RunStatus
from runplane.services.runs import LISTED_RUNS
from runplane.services.workspace_overview import PAGE_SIZE
from tests.integration.conftest import TABLE, Stack

SEEDED = 2_000


class ItemsExamined:
    """Each DynamoDB request's operation and the items it examined."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.requests: list[tuple[str, int]] = []
        original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

        def counted(client: Any, operation: str, params: Any) -> Any:
            reply = original(client, operation, params)
            if client.meta.service_model.service_name == "dynamodb":
                self.requests.append((operation, int(reply.get("ScannedCount", 1))))
            return reply

        monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counted)

    def most(self) -> int:
        return max(examined for _, examined in self.requests)


def _seed(stack: Stack, org: Organization, workspace: Workspace, count: int) -> None:
    """``count`` finished runs as the store writes them (the run, its stages and its
    creation event), put straight into moto's table: thousands of requests would make
    this test slow, and the items are the store's own."""
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(TABLE)
    start = stack.clock.now() - timedelta(days=30)
    for n in range(count):
        at = start + timedelta(minutes=n)
        run = Run(
            id=stack.ids.new(IdKind.RUN),
            organization_id=org.id,
            workspace_id=workspace.id,
            kind=RunKind.PLAN_AND_APPLY,
            status=RunStatus.DISPATCH_PENDING,
            version=1,
            created_at=at,
            updated_at=at,
            created_by="user:ada",
        )
        for write in stack.records.creation(run, actor="user:ada")._writes:
            item = dict(write.request["Item"])
            if item["SK"]["S"] == "RUN":
                item["status"] = {"S": RunStatus.SUCCEEDED.value}
            table.put_item(item)


@pytest.fixture
def admin(stack: Stack, org: Organization) -> Principal:
    token = stack.identity.issue_token(org.id, "ada", list(Permission), created_by="tests").token
    return stack.identity.authenticate(f"Bearer {token}")


def test_run_listings_examine_only_their_page_with_thousands_of_runs_stored(
    stack: Stack,
    org: Organization,
    workspace: Workspace,
    admin: Principal,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a workspace with thousands of runs
    _seed(stack, org, workspace, SEEDED)
    runs = stack.services.runs
    examined = ItemsExamined(monkeypatch)

    # When its runs are listed (the run API and the CLI), and pages of them are read
    # (the Cloud API and the dashboard)
    listed = runs.list(admin, workspace.id)
    first = runs.page(admin, workspace.id, 1, 20)
    third = runs.page(admin, workspace.id, 3, 20)

    # Then the listing holds the newest runs and each page its own, newest first
    assert len(listed) == LISTED_RUNS
    assert [r.created_at for r in listed] == sorted((r.created_at for r in listed), reverse=True)
    assert first.items == listed[:20]
    assert third.items == listed[40:60]
    assert third.pages > 3  # more runs follow
    # And no request scanned, none examined more items than the longest read asked for
    assert "Scan" not in {operation for operation, _ in examined.requests}
    assert examined.most() <= LISTED_RUNS + 1


def test_the_workspace_list_reads_the_latest_runs_of_its_own_page_only(
    stack: Stack,
    org: Organization,
    workspace: Workspace,
    admin: Principal,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given more workspaces than a page of the dashboard's list shows, one with runs
    for n in range(PAGE_SIZE + 9):
        stack.tenancy.create_workspace(org.id, f"app-{n:03}")
    _seed(stack, org, workspace, 3)
    overview = stack.services.workspace_overview
    examined = ItemsExamined(monkeypatch)

    # When the first page, the second and one past the last are read
    first = overview.page(admin, 1)
    first_requests = list(examined.requests)
    second = overview.page(admin, 2)
    beyond = overview.page(admin, 9)

    # Then each page holds its workspaces by name, the last one the rest (with the runs'
    # workspace), and a page past the end is the last
    names = [row.workspace.name for row in first.items + second.items]
    assert names == sorted(names)
    assert len(first.items) == PAGE_SIZE
    assert (first.total, first.pages, len(second.items)) == (PAGE_SIZE + 10, 2, 10)
    assert second.items[-1].latest_run is not None
    assert [row.workspace.id for row in beyond.items] == [row.workspace.id for row in second.items]
    # And a page queried the latest run of its own workspaces only, one query each
    queries = [examined for operation, examined in first_requests if operation == "Query"]
    assert len(queries) <= PAGE_SIZE + 1
