"""Who is calling and what they may do: principals, named permissions, roles."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from runplane.domain.errors import RunplaneError


class Permission(StrEnum):
    ORGANIZATION_READ = "organization:read"
    WORKSPACE_READ = "workspace:read"
    WORKSPACE_CREATE = "workspace:create"
    WORKSPACE_UPDATE = "workspace:update"
    WORKSPACE_LOCK = "workspace:lock"
    WORKSPACE_FORCE_UNLOCK = "workspace:force-unlock"
    # Delete a workspace (its name is freed; its runs, state versions and audit are kept).
    WORKSPACE_DELETE = "workspace:delete"
    STATE_READ = "state:read"
    STATE_WRITE = "state:write"
    RUN_READ = "run:read"
    # Queue runs of any kind (plans that may be applied, destroys).
    RUN_CREATE = "run:create"
    # Queue speculative (plan-only) runs.
    RUN_PLAN = "run:plan"
    RUN_APPROVE = "run:approve"
    RUN_CANCEL = "run:cancel"
    RUN_RECOVER = "run:recover"
    STATE_RECOVER = "state:recover"
    POLICY_OVERRIDE = "policy:override"
    # Publish policy sets and attach them to workspaces.
    POLICY_MANAGE = "policy:manage"
    # Create, change and delete organization variable sets and apply them to workspaces.
    VARIABLE_SETS_MANAGE = "variable-sets:manage"
    TOKEN_MANAGE = "token:manage"
    # Create and delete teams, change their members and their access.
    TEAMS_MANAGE = "teams:manage"
    # Set and delete a workspace's variables.
    VARIABLES_MANAGE = "variables:manage"
    # Connect (claim) and release GitHub App installations for the organization.
    GITHUB_CONNECT = "github:connect"
    # Tenant launch switch and suspension of the caller's own organization.
    LAUNCH_CONTROL = "launch:control"
    # Change a workspace's cloud settings: which roles and audiences its runs may use.
    CREDENTIALS_MANAGE = "credentials:manage"
    # Read the organization's security audit trail (the admin role only).
    AUDIT_READ = "audit:read"
    # Platform-wide controls: granted to deployment operators only, by no role.
    PLATFORM_OPERATE = "platform:operate"


P = Permission
_READER = frozenset({P.ORGANIZATION_READ, P.WORKSPACE_READ, P.STATE_READ, P.RUN_READ})
_DEVELOPER = _READER | {
    P.WORKSPACE_CREATE,
    P.WORKSPACE_UPDATE,
    P.WORKSPACE_LOCK,
    P.STATE_WRITE,
    P.RUN_CREATE,
    P.RUN_PLAN,
    P.RUN_CANCEL,
    P.VARIABLES_MANAGE,
}
_OPERATOR = _DEVELOPER | {
    P.RUN_APPROVE,
    P.WORKSPACE_FORCE_UNLOCK,
    P.RUN_RECOVER,
    P.STATE_RECOVER,
    P.POLICY_OVERRIDE,
}

ROLES: dict[str, frozenset[Permission]] = {
    "reader": _READER,
    "developer": _DEVELOPER,
    "operator": _OPERATOR,
    "admin": frozenset(Permission) - {P.PLATFORM_OPERATE},
}

# A role with any of these sees every workspace of its organization.
_SEES_WORKSPACES = frozenset({P.WORKSPACE_READ, P.RUN_READ, P.STATE_READ})

# What a runner session may do, within its own run's workspace only.
RUNNER_PERMISSIONS = frozenset({P.WORKSPACE_READ, P.STATE_READ, P.STATE_WRITE})

# What a schedule may do when it fires, within its own workspace only.
SCHEDULE_PERMISSIONS = frozenset({P.WORKSPACE_READ, P.RUN_READ, P.RUN_CREATE, P.RUN_PLAN})

# Recovery needs a recent sign-in, not only the permission.
STEP_UP_WINDOW = timedelta(minutes=15)


class PrincipalKind(StrEnum):
    USER = "user"
    API_TOKEN = "token"
    RUNNER = "runner"
    # The control plane acting on its own (a run trigger), with the permissions it was given.
    SYSTEM = "system"
    # A source ingestion creating the runs of a GitHub event, confined to one workspace.
    SOURCE = "source"
    # A workspace schedule creating its run (never a caller of the API).
    SCHEDULE = "schedule"


class Unauthenticated(RunplaneError):
    code = "UNAUTHENTICATED"
    http_status = 401

    def __init__(self, why: str = "missing or invalid credentials") -> None:
        super().__init__(why)


class Forbidden(RunplaneError):
    code = "FORBIDDEN"
    http_status = 403

    def __init__(self, permission: Permission) -> None:
        super().__init__(f"this action needs the {permission} permission")
        self.permission = permission


class TeamGrants(Protocol):
    """What a caller's teams give them, read when first asked (once per request): across
    the organization, and on one workspace."""

    def organization_permissions(self) -> frozenset[Permission]: ...

    def workspace_permissions(self, workspace_id: str) -> frozenset[Permission]: ...

    def anywhere(self) -> frozenset[Permission]:
        """What the teams grant across the organization or on at least one workspace."""
        ...


@dataclass(frozen=True)
class Principal:
    kind: PrincipalKind
    id: str
    organization_id: str
    permissions: frozenset[Permission]
    display: str
    auth_time: datetime | None = None
    # A runner session is confined to its run's workspace.
    run_id: str | None = None
    workspace_id: str | None = None
    attempt_id: str | None = None
    sandbox_id: str | None = None
    phase: str | None = None
    inputs: tuple[str, ...] = ()
    # The person behind a user principal, by a name they cannot change (Cognito's
    # username): the same through a bearer token and a dashboard session.
    user: str | None = None
    # The identity provider's groups of a user (team mappings read them).
    groups: tuple[str, ...] = ()
    # The team an API token acts for (its permissions are the team's, read per request).
    team_id: str | None = None
    # The network address the request came from, for the audit trail.
    source_address: str | None = None
    # What the caller's teams give them (people and tokens only; None: no teams read).
    teams: TeamGrants | None = field(default=None, compare=False, repr=False)

    @property
    def ref(self) -> str:
        return f"{self.kind}:{self.id}"

    def may(self, permission: Permission, workspace_id: str | None = None) -> bool:
        """Whether the caller holds ``permission`` across the organization (a role), or
        through a team: on ``workspace_id`` when named, else across the organization."""
        if permission in self.permissions:
            return True
        if self.teams is None:
            return False
        # A team's organization access (owners, manage-workspaces) holds on every workspace.
        if permission in self.teams.organization_permissions():
            return True
        return workspace_id is not None and (
            permission in self.teams.workspace_permissions(workspace_id)
        )

    def may_somewhere(self, permission: Permission) -> bool:
        """Whether the caller holds ``permission`` on at least one workspace (what a
        listing across workspaces asks before it filters)."""
        if permission in self.permissions:
            return True
        return self.teams is not None and permission in self.teams.anywhere()

    def require_somewhere(self, permission: Permission) -> None:
        if not self.may_somewhere(permission):
            raise Forbidden(permission)

    def permissions_in(self, workspace_id: str | None = None) -> frozenset[Permission]:
        """Everything the caller holds on ``workspace_id`` (or across the organization):
        what pages and documents show as allowed."""
        if self.teams is None:
            return self.permissions
        granted = self.permissions | self.teams.organization_permissions()
        if workspace_id is not None:
            granted |= self.teams.workspace_permissions(workspace_id)
        return granted

    def require(self, permission: Permission, workspace_id: str | None = None) -> None:
        """``may``, or ``Forbidden`` naming the permission."""
        if not self.may(permission, workspace_id):
            raise Forbidden(permission)

    def can_see_workspace(self, organization_id: str, workspace_id: str) -> bool:
        """The caller's organization, within its confinement (a runner's, a schedule's
        workspace), and readable by its role or a team: a workspace it may not read is
        reported exactly like a missing one."""
        if organization_id != self.organization_id:
            return False
        if self.workspace_id is not None and self.workspace_id != workspace_id:
            return False
        # A role holds on every workspace: what it allows there is checked action by action.
        if self.teams is None or self.permissions & _SEES_WORKSPACES:
            return True
        return self.may(Permission.WORKSPACE_READ, workspace_id)


@dataclass(frozen=True)
class ApiTokenRecord:
    """An organization API token as recorded (only its hash is the key): whom it acts
    for, with which permissions, and whether it was revoked."""

    id: str
    organization_id: str
    name: str
    permissions: frozenset[Permission]
    created_at: datetime
    created_by: str
    revoked: bool
    # A team token acts as its team: its permissions are the team's, read per request.
    team_id: str | None = None


def permissions_for_roles(roles: list[str] | tuple[str, ...]) -> frozenset[Permission]:
    granted: frozenset[Permission] = frozenset()
    for role in roles:
        granted |= ROLES.get(role, frozenset())
    return granted
