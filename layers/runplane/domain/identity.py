"""Who is calling and what they may do: principals, named permissions, roles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

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
    RUN_CREATE = "run:create"
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
    P.RUN_CANCEL,
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

# What a runner session may do, within its own run's workspace only.
RUNNER_PERMISSIONS = frozenset({P.WORKSPACE_READ, P.STATE_READ, P.STATE_WRITE})

# What a schedule may do when it fires, within its own workspace only.
SCHEDULE_PERMISSIONS = frozenset({P.WORKSPACE_READ, P.RUN_READ, P.RUN_CREATE})

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

    @property
    def ref(self) -> str:
        return f"{self.kind}:{self.id}"

    def require(self, permission: Permission) -> None:
        if permission not in self.permissions:
            raise Forbidden(permission)

    def can_see_workspace(self, organization_id: str, workspace_id: str) -> bool:
        if organization_id != self.organization_id:
            return False
        return self.workspace_id is None or self.workspace_id == workspace_id


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


def permissions_for_roles(roles: list[str] | tuple[str, ...]) -> frozenset[Permission]:
    granted: frozenset[Permission] = frozenset()
    for role in roles:
        granted |= ROLES.get(role, frozenset())
    return granted
