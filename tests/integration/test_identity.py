"""Credentials become principals: API tokens, JWTs, runner sessions; nothing else does."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from runplane.domain.capabilities import CapabilityKind
from runplane.domain.entities import Organization, Workspace
from runplane.domain.identity import Permission, PrincipalKind, Unauthenticated
from runplane.domain.parts import AttemptState
from runplane.domain.run import RunKind
from runplane.services.principals import decode_principal, encode_principal
from runplane.store import run_parts
from runplane.store.attempts import close_attempt
from tests.integration.conftest import Stack
from tests.integration.dynamodb_requests import DynamoDBRequests
from tests.integration.sandbox import new_binding

P = Permission


def test_an_api_token_is_shown_once_stored_hashed_and_revocable(
    stack: Stack, org: Organization
) -> None:
    issued = stack.identity.issue_token(org.id, "ci", [P.WORKSPACE_READ], created_by="user:ada")

    principal = stack.identity.authenticate(f"Bearer {issued.token}")

    assert principal.kind is PrincipalKind.API_TOKEN
    assert principal.organization_id == org.id
    assert principal.permissions == frozenset({P.WORKSPACE_READ})
    assert issued.token not in str(stack.scan())
    assert issued.token not in repr(issued)
    admin = stack.identity.authenticate(
        "Bearer "
        + stack.identity.issue_token(org.id, "admin", list(P), created_by="user:ada").token
    )
    stack.identity.revoke_token(admin, issued.record.id)
    with pytest.raises(Unauthenticated):
        stack.identity.authenticate(f"Bearer {issued.token}")


@pytest.mark.parametrize(
    "header",
    [None, "", "Basic abc", "Bearer ", "Bearer rpt_nope", "Bearer rps_nope", "Bearer a.b.c"],
)
def test_anything_else_is_unauthenticated(stack: Stack, header: str | None) -> None:
    with pytest.raises(Unauthenticated):
        stack.identity.authenticate(header)


def test_a_jwt_user_gets_the_permissions_of_their_roles(stack: Stack, org: Organization) -> None:
    signed_in = stack.clock.now() - timedelta(minutes=3)
    token = stack.issuer.issue(
        subject="user-123",
        now=stack.clock.now(),
        groups=["developer"],
        auth_time=signed_in,
        extra={"custom:organization": org.id},
    )

    principal = stack.identity.authenticate(f"Bearer {token}")

    assert principal.kind is PrincipalKind.USER
    assert principal.organization_id == org.id
    assert P.STATE_WRITE in principal.permissions
    assert P.RUN_RECOVER not in principal.permissions
    assert principal.auth_time is not None
    assert abs((principal.auth_time - signed_in).total_seconds()) < 1


def test_an_expired_jwt_or_one_without_organization_is_refused(
    stack: Stack, org: Organization
) -> None:
    expired = stack.issuer.issue(
        subject="u",
        now=stack.clock.now() - timedelta(hours=2),
        lifetime=timedelta(hours=1),
        extra={"custom:organization": org.id},
    )
    orphan = stack.issuer.issue(subject="u", now=stack.clock.now())
    for token in (expired, orphan):
        with pytest.raises(Unauthenticated):
            stack.identity.authenticate(f"Bearer {token}")


def test_a_runner_session_is_confined_to_its_runs_workspace(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    run = stack.new_run(org.id, workspace.id, RunKind.PLAN_AND_APPLY, actor="user:ada")
    binding = new_binding(stack)
    binding = type(binding)(run.id, binding.attempt_id, binding.phase, binding.sandbox_id)
    # A session is honoured only while its attempt is the run's open one.
    run_parts.put(
        run.id,
        f"attempt#{binding.phase.value}",
        state="started",
        body={"attempt_id": binding.attempt_id, "sandbox_id": binding.sandbox_id},
        now=stack.clock.now(),
    ).commit()
    minted = stack.capabilities.mint(
        CapabilityKind.BOOTSTRAP, binding, lifetime=timedelta(minutes=5), organization_id=org.id
    )
    grant = stack.sessions.start(minted.handle, binding)

    principal = stack.identity.authenticate(f"Bearer {grant.token}")

    assert principal.kind is PrincipalKind.RUNNER
    assert (principal.run_id, principal.workspace_id) == (run.id, workspace.id)
    other = stack.tenancy.create_workspace(org.id, "elsewhere")
    assert principal.can_see_workspace(org.id, workspace.id)
    assert not principal.can_see_workspace(org.id, other.id)
    assert P.WORKSPACE_FORCE_UNLOCK not in principal.permissions
    stack.sessions.revoke_attempt(binding.attempt_id)
    with pytest.raises(Unauthenticated):
        stack.identity.authenticate(f"Bearer {grant.token}")


def _runner_grant(stack: Stack, org: Organization, workspace: Workspace) -> tuple[Any, str]:
    run = stack.new_run(org.id, workspace.id, RunKind.PLAN_AND_APPLY, actor="user:ada")
    binding = new_binding(stack)
    binding = type(binding)(run.id, binding.attempt_id, binding.phase, binding.sandbox_id)
    run_parts.put(
        run.id,
        f"attempt#{binding.phase.value}",
        state="started",
        body={"attempt_id": binding.attempt_id, "sandbox_id": binding.sandbox_id},
        now=stack.clock.now(),
    ).commit()
    minted = stack.capabilities.mint(
        CapabilityKind.BOOTSTRAP, binding, lifetime=timedelta(minutes=5), organization_id=org.id
    )
    return binding, stack.sessions.start(minted.handle, binding).token


def test_a_known_runner_session_authenticates_in_one_request_and_revocation_stays_immediate(
    stack: Stack, org: Organization, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a runner session this process has authenticated once
    binding, token = _runner_grant(stack, org, workspace)
    stack.identity.authenticate(f"Bearer {token}")
    requests = DynamoDBRequests(monkeypatch)

    # When its sandbox calls again
    principal = stack.identity.authenticate(f"Bearer {token}")

    # Then the session and its attempt are read in one request
    assert principal.run_id == binding.run_id
    assert requests.operations == ["BatchGetItem"]

    # And once its attempt closes (which revokes its sessions), the next call is refused
    attempt = run_parts.require(binding.run_id, f"attempt#{binding.phase.value}")
    now = stack.clock.now()
    close_attempt(binding.run_id, attempt.name, attempt, AttemptState.SUCCEEDED, now)[0].commit()
    with pytest.raises(Unauthenticated, match="attempt has ended"):
        stack.identity.authenticate(f"Bearer {token}")


def test_a_known_runner_session_revoked_alone_is_refused_at_once(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a runner session this process has authenticated once
    binding, token = _runner_grant(stack, org, workspace)
    stack.identity.authenticate(f"Bearer {token}")

    # When its sessions are revoked while the attempt's part still reads open
    stack.sessions.revoke_attempt(binding.attempt_id)

    # Then its next call is refused, without waiting for anything to expire
    with pytest.raises(Unauthenticated, match="not valid"):
        stack.identity.authenticate(f"Bearer {token}")


def test_the_principal_survives_the_authorizer_context(stack: Stack, org: Organization) -> None:
    issued = stack.identity.issue_token(org.id, "ci", [P.STATE_READ], created_by="user:ada")
    principal = stack.identity.authenticate(f"Bearer {issued.token}")

    context = encode_principal(principal)

    assert all(isinstance(value, str) for value in context.values())
    assert decode_principal(context) == principal
    with pytest.raises(Unauthenticated):
        decode_principal({})
