"""What the Cloud API tells each caller about a workspace in remote execution mode."""

from __future__ import annotations

from datetime import UTC, datetime

from functions.cloud_api import jsonapi
from runplane.domain.entities import Organization, Workspace
from runplane.domain.identity import Permission, Principal, PrincipalKind

NOW = datetime(2026, 1, 1, tzinfo=UTC)
REMOTE = Workspace(
    id="ws-" + "a" * 26,
    organization_id="org-" + "a" * 26,
    name="net",
    created_at=NOW,
    fence=0,
    writer_run_id=None,
    lock_id=None,
    lock_run_id=None,
    queue_length=0,
    terraform_version="1.0.3",
    execution_mode="remote",
)


def principal(kind: PrincipalKind) -> Principal:
    return Principal(
        kind=kind,
        id="x",
        organization_id=REMOTE.organization_id,
        permissions=frozenset(Permission),
        display="X",
    )


def test_people_see_remote_operations_and_a_sandbox_never_does() -> None:
    # Given a workspace in remote execution mode
    org = Organization(REMOTE.organization_id, "acme", NOW)
    person, sandbox = principal(PrincipalKind.API_TOKEN), principal(PrincipalKind.RUNNER)

    # When a person and a managed run's sandbox read it and the entitlements
    seen = jsonapi.workspace(REMOTE, "acme", person)["attributes"]
    by_sandbox = jsonapi.workspace(REMOTE, "acme", sandbox)["attributes"]

    # Then the person's client runs remotely; the sandbox's engine runs the plan itself
    assert (seen["execution-mode"], seen["operations"]) == ("remote", True)
    assert jsonapi.entitlements(org, person)["attributes"]["operations"] is True
    assert by_sandbox["operations"] is False
    assert jsonapi.entitlements(org, sandbox)["attributes"]["operations"] is False
