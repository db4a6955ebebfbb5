"""The service tier: real services over the in-memory repositories (tests/fakes.py),
no moto and no AWS client. Only services whose store access goes through a repository
seam (runplane.services.repositories) can be tested here."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pynamodb.connection.base import Connection

from runplane.domain.entities import Organization
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.services.tenancy import Tenancy
from runplane.services.workspaces import Workspaces
from runplane.store.runs import RunRepository
from tests.fakes import FakeClock, InMemoryWorkspaces, SeededIds


@pytest.fixture(autouse=True)
def no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A service test that reaches DynamoDB fails loudly: the seam leaked."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a service test reached DynamoDB")

    monkeypatch.setattr(Connection, "_make_api_call", refuse)


@dataclass
class Tier:
    clock: FakeClock
    ids: SeededIds
    directory: InMemoryWorkspaces
    tenancy: Tenancy
    workspaces: Workspaces

    def admin(self, org: Organization) -> Principal:
        return Principal(
            kind=PrincipalKind.USER,
            id="ada",
            organization_id=org.id,
            permissions=frozenset(Permission),
            display="ada",
        )


@pytest.fixture
def tier() -> Tier:
    clock, ids, directory = FakeClock(), SeededIds(), InMemoryWorkspaces()
    return Tier(
        clock,
        ids,
        directory,
        Tenancy(clock, ids, directory),
        Workspaces(clock, ids, RunRepository(clock, ids), directory),
    )
