"""A person's call reads what its path names (the run it decides, the workspace or the
configuration version it uploads to) with its token, in one consistent request; the
token is still read on every call, and permissions are still checked first."""

from __future__ import annotations

import pytest

from runplane.domain.errors import NotFound
from runplane.domain.identity import ROLES, Principal, Unauthenticated
from runplane.domain.read_ahead import ReadAhead
from runplane.services.identity import token_call_reads
from runplane.store import prefetch, run_parts
from runplane.store.request_reads import REQUEST
from tests.integration.arena import Arena, awaiting_approval
from tests.integration.conftest import Stack
from tests.integration.dynamodb_requests import DynamoDBRequests


def authorized(arena: Arena, token: str, route: str) -> tuple[Principal, ReadAhead]:
    """What the authorizer hands the application for ``route``: the principal and,
    through its context (text), the items its read fetched."""
    principal, read = arena.stack.identity.authenticate_request(f"Bearer {token}", route)
    return principal, prefetch.decode(prefetch.encode(read))


def token_of(arena: Arena, organization_id: str, role: str = "admin") -> str:
    issued = arena.stack.identity.issue_token(
        organization_id, f"ci-{role}", ROLES[role], created_by="user:ada"
    )
    return issued.token


def test_an_approval_is_its_token_read_and_its_write(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run awaiting approval and a person's token
    _, run_id = awaiting_approval(arena, "token-reads-approve")
    token = token_of(arena, arena.org.id)
    requests = DynamoDBRequests(monkeypatch)
    # When the person approves it through the API's route
    principal, read = authorized(arena, token, f"POST /api/v1/runs/{run_id}/actions/approve")
    with REQUEST.opened(read):
        arena.runs.decide(principal, run_id, "approve", None)
    sent = list(requests.operations)
    # Then the token, the run, its approval and its policy check were one request,
    # and the decision one write
    assert sent == ["BatchGetItem", "TransactWriteItems"]
    assert run_parts.require(run_id, "approval").state == "approved"


def test_a_revoked_token_is_refused_whatever_it_read_ahead(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run awaiting approval and a token revoked since it was issued
    _, run_id = awaiting_approval(arena, "token-reads-revoked")
    issued = arena.stack.identity.issue_token(
        arena.org.id, "ci", ROLES["admin"], created_by="user:ada"
    )
    arena.stack.identity.revoke_token(arena.admin, issued.record.id)
    # When it calls the approval route
    # Then it is refused, and nothing was approved
    with pytest.raises(Unauthenticated):
        authorized(arena, issued.token, f"POST /api/v1/runs/{run_id}/actions/approve")
    assert run_parts.require(run_id, "approval").state != "approved"


def test_another_organizations_run_read_ahead_is_still_not_found(
    stack: Stack, arena: Arena
) -> None:
    # Given a run awaiting approval in one organization and a token of another
    _, run_id = awaiting_approval(arena, "token-reads-tenant")
    other = stack.tenancy.create_organization("globex")
    token = token_of(arena, other.id)
    # When that token approves the run by its ID (the run is read with the token)
    principal, read = authorized(arena, token, f"POST /api/v1/runs/{run_id}/actions/approve")
    assert read  # the item was read ahead: the check below is the service's
    # Then the run does not exist for it, and nothing was written
    with REQUEST.opened(read), pytest.raises(NotFound):
        arena.runs.decide(principal, run_id, "approve", None)
    assert run_parts.require(run_id, "approval").state != "approved"


@pytest.mark.parametrize(
    ("route", "reads"),
    [
        ("POST /api/v1/workspaces/ws-abc1/configuration-versions", 1),
        ("POST /api/v1/configuration-versions/cv-abc1/actions/finalize", 1),
        ("POST /api/v1/runs/run-abc1/actions/approve", 3),
        ("POST /api/v1/runs/run-abc1/actions/reject", 3),
        ("POST /api/v1/runs/run-abc1/actions/cancel", 0),
        ("GET /api/v1/runs/run-abc1/actions/approve", 0),
        ("POST /api/v1/runs/run-ABC/actions/approve", 0),
        ("POST /api/v1/runs/run-abc1/actions/approve/x", 0),
        ("POST /api/v1/workspaces/ws-a%2Fb/configuration-versions", 0),
    ],
)
def test_only_the_named_routes_with_well_formed_ids_read_ahead(route: str, reads: int) -> None:
    assert len(token_call_reads(route)) == reads
