"""Teams and what they may do: organization access, and per-workspace levels with
Runplane's own capabilities on top.

A team's members are people named by hand (their unchangeable user name) and everyone
whose identity provider puts them in one of the team's mapped groups; a team token acts
as the team. A member holds the union of their teams' grants. The levels follow HCP
Terraform's (read, plan, write, admin); three capabilities are never part of a level
(policy override, recovery, cloud credential settings) and are granted by name, so a
workspace admin does not silently get the means to bypass a policy or rewrite state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from runplane.domain.errors import InvalidInput, RunplaneError
from runplane.domain.identity import ROLES, Permission

P = Permission

MAX_TEAMS_PER_ORGANIZATION: Final = 200
MAX_MEMBERS_PER_TEAM: Final = 500
MAX_GROUPS_PER_TEAM: Final = 20
_TEAM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# Cognito user names (and federated ones, `<provider>_<subject>`), group names as
# identity providers send them: printable, no control characters, bounded.
_MEMBER = re.compile(r"^[\w.@+=,:/-]{1,128}$")
_GROUP = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")


class AccessLevel(StrEnum):
    READ = "read"
    PLAN = "plan"
    WRITE = "write"
    ADMIN = "admin"


class Capability(StrEnum):
    APPROVE = "approve"
    OVERRIDE_POLICY = "override-policy"
    RECOVER = "recover"
    MANAGE_VARIABLES = "manage-variables"
    MANAGE_CREDENTIALS = "manage-credentials"


_READ = frozenset({P.WORKSPACE_READ, P.STATE_READ, P.RUN_READ})
_PLAN = _READ | {P.RUN_PLAN}
_WRITE = _PLAN | {
    P.RUN_CREATE,
    P.RUN_CANCEL,
    P.RUN_APPROVE,
    P.WORKSPACE_LOCK,
    P.STATE_WRITE,
    P.VARIABLES_MANAGE,
}
_ADMIN = _WRITE | {P.WORKSPACE_UPDATE, P.WORKSPACE_FORCE_UNLOCK, P.WORKSPACE_DELETE}

LEVEL_PERMISSIONS: Final[dict[AccessLevel, frozenset[Permission]]] = {
    AccessLevel.READ: _READ,
    AccessLevel.PLAN: _PLAN,
    AccessLevel.WRITE: _WRITE,
    AccessLevel.ADMIN: _ADMIN,
}

CAPABILITY_PERMISSIONS: Final[dict[Capability, frozenset[Permission]]] = {
    Capability.APPROVE: frozenset({P.RUN_APPROVE}),
    Capability.OVERRIDE_POLICY: frozenset({P.POLICY_OVERRIDE}),
    Capability.RECOVER: frozenset({P.RUN_RECOVER, P.STATE_RECOVER}),
    Capability.MANAGE_VARIABLES: frozenset({P.VARIABLES_MANAGE}),
    Capability.MANAGE_CREDENTIALS: frozenset({P.CREDENTIALS_MANAGE}),
}

# What a team may be given across the organization (HCP's "organization access"), by name.
ORGANIZATION_ACCESS: Final[dict[str, frozenset[Permission]]] = {
    # As HCP Terraform's: create workspaces, and administer every one.
    "manage-workspaces": _ADMIN | {P.WORKSPACE_CREATE},
    "manage-policies": frozenset({P.POLICY_MANAGE}),
    "manage-variable-sets": frozenset({P.VARIABLE_SETS_MANAGE}),
    "manage-vcs": frozenset({P.GITHUB_CONNECT}),
    "read-workspaces": _READ,
}

# Every member of a team is a member of the organization: they may read it.
MEMBER_PERMISSIONS: Final = frozenset({P.ORGANIZATION_READ})
OWNER_PERMISSIONS: Final = ROLES["admin"]

# What a workspace grant can ever hold: organization-wide permissions stay out of it.
WORKSPACE_SCOPED: Final = frozenset().union(
    *LEVEL_PERMISSIONS.values(), *CAPABILITY_PERMISSIONS.values()
)


def access_permissions(
    level: AccessLevel | None, capabilities: frozenset[Capability]
) -> frozenset[Permission]:
    granted = LEVEL_PERMISSIONS[level] if level is not None else frozenset()
    for capability in capabilities:
        granted |= CAPABILITY_PERMISSIONS[capability]
    if granted:
        # Whatever a grant allows on a workspace, it allows seeing it.
        granted |= {P.WORKSPACE_READ, P.RUN_READ}
    return granted


class TeamNameTaken(RunplaneError):
    code = "TEAM_NAME_TAKEN"
    http_status = 409

    def __init__(self, name: str) -> None:
        super().__init__(f"the organization already has a team named {name}")


@dataclass(frozen=True)
class Team:
    id: str
    organization_id: str
    name: str
    # People named by hand, by user name.
    members: frozenset[str]
    # Identity-provider groups whose members are members.
    groups: frozenset[str]
    # Organization-wide access by name (``ORGANIZATION_ACCESS``).
    organization_access: frozenset[str]
    # Organization owners: every permission of the admin role.
    owners: bool
    version: int
    created_at: datetime
    created_by: str

    def includes(self, *, user: str | None, groups: tuple[str, ...], team_id: str | None) -> bool:
        """Whether a caller belongs to the team: named, in a mapped group, or its token."""
        if team_id is not None:
            return team_id == self.id
        if user is None:
            return False
        return user in self.members or not self.groups.isdisjoint(groups)

    def organization_permissions(self) -> frozenset[Permission]:
        if self.owners:
            return OWNER_PERMISSIONS
        granted = MEMBER_PERMISSIONS
        for name in self.organization_access:
            granted |= ORGANIZATION_ACCESS[name]
        return granted

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "members": sorted(self.members),
            "groups": sorted(self.groups),
            "organization_access": sorted(self.organization_access),
            "owners": self.owners,
            "version": self.version,
            "created_at": self.created_at.isoformat(),
            "created_by": self.created_by,
        }


@dataclass(frozen=True)
class TeamAccess:
    """One team's access to one workspace."""

    team_id: str
    workspace_id: str
    level: AccessLevel | None
    capabilities: frozenset[Capability]
    set_at: datetime
    set_by: str

    @property
    def permissions(self) -> frozenset[Permission]:
        return access_permissions(self.level, self.capabilities)

    def view(self) -> dict[str, Any]:
        return {
            "team_id": self.team_id,
            "workspace_id": self.workspace_id,
            "level": self.level.value if self.level else None,
            "capabilities": sorted(c.value for c in self.capabilities),
            "permissions": sorted(p.value for p in self.permissions),
            "set_at": self.set_at.isoformat(),
            "set_by": self.set_by,
        }


def team_name(name: str) -> str:
    if not isinstance(name, str) or not _TEAM_NAME.match(name):
        raise InvalidInput(
            "a team name is 1-64 lowercase letters, digits, '-' or '_', starting with a "
            "letter or digit",
            "/name",
        )
    return name


def member_name(name: str, pointer: str = "/user") -> str:
    if not isinstance(name, str) or not _MEMBER.match(name):
        raise InvalidInput("a member is named by their user name (1-128 characters)", pointer)
    return name


def group_names(groups: Any, pointer: str = "/groups") -> frozenset[str]:
    if not isinstance(groups, list | tuple) or len(groups) > MAX_GROUPS_PER_TEAM:
        raise InvalidInput(f"groups is a list of at most {MAX_GROUPS_PER_TEAM} names", pointer)
    for index, group in enumerate(groups):
        if not isinstance(group, str) or not _GROUP.match(group):
            raise InvalidInput("a group name is 1-256 printable characters", f"{pointer}/{index}")
    return frozenset(groups)


def organization_access(names: Any, pointer: str = "/organization_access") -> frozenset[str]:
    if not isinstance(names, list | tuple):
        raise InvalidInput("organization_access is a list of names", pointer)
    for index, name in enumerate(names):
        if name not in ORGANIZATION_ACCESS:
            raise InvalidInput(
                f"organization access is one of {', '.join(sorted(ORGANIZATION_ACCESS))}",
                f"{pointer}/{index}",
            )
    return frozenset(names)


def access_level(value: Any) -> AccessLevel | None:
    if value is None:
        return None
    try:
        return AccessLevel(value)
    except ValueError:
        raise InvalidInput(
            f"level is one of {', '.join(level.value for level in AccessLevel)}", "/level"
        ) from None


def capabilities(values: Any) -> frozenset[Capability]:
    if not isinstance(values, list | tuple):
        raise InvalidInput("capabilities is a list of names", "/capabilities")
    found: set[Capability] = set()
    for index, value in enumerate(values):
        try:
            found.add(Capability(value))
        except ValueError:
            raise InvalidInput(
                f"a capability is one of {', '.join(c.value for c in Capability)}",
                f"/capabilities/{index}",
            ) from None
    return frozenset(found)
