"""Who may call each route of the run API, the Cloud API and the dashboard: one rule per
(method, path template as the resolver registers it), and what the permission walk
sends to prove it (tests/e2e/test_permission_matrix.py).

A route added without a rule, or a rule left for a removed route, fails
tests/unit/test_permission_table.py. Expected outcomes are never typed here: they come
from the permission each rule names and ``runplane.domain.teams.access_permissions``.

Scopes:
- ``WORKSPACE``: the permission on the route's workspace (a caller who may not even see
  the workspace gets 404, as for a missing one; one who sees it, 403).
- ``ORGANIZATION``: the permission across the organization (a role, a team's
  organization access or owners flag; every team member holds ``organization:read``).
- ``SOMEWHERE``: a listing across workspaces, allowed to a caller holding the permission
  on at least one workspace, and filtered to what they may see.
- ``SIGNED_IN``: any authenticated caller (it answers about the caller only).
- ``PUBLIC``: no credential (discovery documents, webhooks that check their own
  signature, sign-in pages, static assets, URLs that carry their own single-purpose
  credential).
- ``RUNNER``: a runner session of a run only (never a person or an API token).
- ``PLATFORM``: deployment operators (``platform:operate``), no organization role.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runplane.domain.identity import Permission

P = Permission


class Scope(StrEnum):
    WORKSPACE = "workspace"
    ORGANIZATION = "organization"
    SOMEWHERE = "somewhere"
    SIGNED_IN = "signed-in"
    PUBLIC = "public"
    RUNNER = "runner"
    PLATFORM = "platform"


class Surface(StrEnum):
    API = "api"
    CLOUD_API = "cloud-api"
    DASHBOARD = "dashboard"


@dataclass(frozen=True)
class Probe:
    """What the walk sends. ``path``: placeholder -> walk object name (default: the
    placeholder's own name); ``body``: JSON (APIs) or form fields (dashboard, the CSRF
    token added), ``{grant}`` replaced by the grant's label so that a write that should
    have been refused is visible; ``changes``: what the walk reads back to prove a
    refused probe wrote nothing; ``restore``: what the walk puts back after an allowed
    probe changed it."""

    path: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    changes: tuple[str, ...] = ()
    restore: str | None = None
    # Query parameters (text placeholders filled as in the body).
    query: dict[str, str] = field(default_factory=dict)
    # An allowed probe may be answered 404 naming this: past the permission check, what
    # the probe acts on is absent (an upload never made, an auto-destroy never set).
    absent: str = ""
    # Why an allowed probe leaves no lasting effect.
    note: str = ""


@dataclass(frozen=True)
class Rule:
    scope: Scope
    # Every one of these is needed (in the rule's scope).
    needs: tuple[Permission, ...] = ()
    probe: Probe | None = None

    def allows(self, held: frozenset[Permission]) -> bool:
        return all(p in held for p in self.needs)


# A plain request with no body (a read); ``probe=None``: not walked (see the rule's comment).
_READ = Probe()


def ws(*needs: Permission, probe: Probe | None = _READ) -> Rule:
    return Rule(Scope.WORKSPACE, needs, probe)


def org(*needs: Permission, probe: Probe | None = _READ) -> Rule:
    return Rule(Scope.ORGANIZATION, needs, probe)


PUBLIC = Rule(Scope.PUBLIC)
RUNNER = Rule(Scope.RUNNER)
SIGNED_IN = Rule(Scope.SIGNED_IN)
PLATFORM = Rule(Scope.PLATFORM, (P.PLATFORM_OPERATE,))

# A configuration version created for the probe and never uploaded: a run or a
# finalization with it is refused after the permission check.
_PENDING_CV = {"cv_id": "pending_cv"}
_RUN = {"run_id": "run_id"}

API: dict[tuple[str, str], Rule] = {
    ("GET", "/api/v1/openapi.json"): PUBLIC,
    ("GET", "/api/v1/sign-in/config"): PUBLIC,
    ("GET", "/.well-known/openid-configuration"): PUBLIC,
    ("GET", "/.well-known/jwks.json"): PUBLIC,
    # Signed by the provider: the route checks its own signature.
    ("POST", "/webhooks/github"): PUBLIC,
    ("POST", "/webhooks/gitlab"): PUBLIC,
    # -- workspaces
    ("POST", "/api/v1/workspaces"): org(
        P.WORKSPACE_CREATE, probe=Probe(body={"name": "probe-{grant}"}, changes=("workspaces",))
    ),
    ("GET", "/api/v1/workspaces"): Rule(Scope.SOMEWHERE, (P.WORKSPACE_READ,), Probe()),
    ("GET", "/api/v1/workspaces/<workspace_id>"): ws(P.WORKSPACE_READ),
    ("PATCH", "/api/v1/workspaces/<workspace_id>"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"approval_window_seconds": 1},
            changes=("workspace",),
            note="an approval window below the minimum: 422 after the check",
        ),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>"): ws(
        P.WORKSPACE_DELETE,
        probe=Probe(
            changes=("workspace",),
            note="the workspace manages a resource: 409 without force, after the check",
        ),
    ),
    ("POST", "/api/v1/workspaces/<workspace_id>/configuration-versions"): ws(
        P.RUN_PLAN, probe=Probe(note="a pending configuration version, never uploaded")
    ),
    ("POST", "/api/v1/configuration-versions/<cv_id>/actions/finalize"): ws(
        P.RUN_PLAN,
        probe=Probe(path=_PENDING_CV, absent="upload", note="nothing was uploaded: refused after"),
    ),
    # -- variables
    ("GET", "/api/v1/workspaces/<workspace_id>/variables"): ws(P.WORKSPACE_READ),
    ("PUT", "/api/v1/workspaces/<workspace_id>/variables/<name>"): ws(
        P.VARIABLES_MANAGE,
        probe=Probe(
            path={"name": "variable"},
            body={"value": "{grant}"},
            changes=("variables",),
            restore="variable",
        ),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/variables/<name>"): ws(
        P.VARIABLES_MANAGE,
        probe=Probe(path={"name": "variable"}, changes=("variables",), restore="variable"),
    ),
    ("PUT", "/api/v1/workspaces/<workspace_id>/variables/<category>/<name>"): ws(
        P.VARIABLES_MANAGE,
        probe=Probe(
            path={"name": "variable"},
            body={"value": "{grant}"},
            changes=("variables",),
            restore="variable",
        ),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/variables/<category>/<name>"): ws(
        P.VARIABLES_MANAGE,
        probe=Probe(path={"name": "variable"}, changes=("variables",), restore="variable"),
    ),
    # -- variable sets (organization-wide; applying one names a workspace)
    ("POST", "/api/v1/variable-sets"): org(
        P.VARIABLE_SETS_MANAGE,
        probe=Probe(body={"name": "probe-{grant}"}, changes=("variable_sets",)),
    ),
    ("GET", "/api/v1/variable-sets"): org(P.ORGANIZATION_READ),
    ("GET", "/api/v1/variable-sets/<set_id>"): org(P.ORGANIZATION_READ),
    ("PATCH", "/api/v1/variable-sets/<set_id>"): org(
        P.VARIABLE_SETS_MANAGE,
        probe=Probe(body={"description": "{grant}"}, changes=("variable_set",)),
    ),
    ("DELETE", "/api/v1/variable-sets/<set_id>"): org(
        P.VARIABLE_SETS_MANAGE, probe=Probe(changes=("variable_sets",))
    ),
    ("PUT", "/api/v1/variable-sets/<set_id>/variables/<category>/<name>"): org(
        P.VARIABLE_SETS_MANAGE, probe=Probe(path={"name": "variable"}, body={"value": "{grant}"})
    ),
    ("DELETE", "/api/v1/variable-sets/<set_id>/variables/<category>/<name>"): org(
        P.VARIABLE_SETS_MANAGE, probe=Probe(path={"name": "variable"})
    ),
    ("PUT", "/api/v1/variable-sets/<set_id>/workspaces/<workspace_id>"): org(
        P.VARIABLE_SETS_MANAGE
    ),
    ("DELETE", "/api/v1/variable-sets/<set_id>/workspaces/<workspace_id>"): org(
        P.VARIABLE_SETS_MANAGE
    ),
    # -- cloud settings
    ("GET", "/api/v1/workspaces/<workspace_id>/cloud-settings"): ws(P.WORKSPACE_READ),
    ("PUT", "/api/v1/workspaces/<workspace_id>/cloud-settings"): ws(
        P.CREDENTIALS_MANAGE,
        probe=Probe(
            body={"aws_session_duration": 1},
            changes=("cloud_settings",),
            note="a session shorter than AWS allows: 422 after the check",
        ),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/cloud-settings"): ws(
        P.CREDENTIALS_MANAGE,
        probe=Probe(changes=("cloud_settings",), note="no settings to clear: idempotent"),
    ),
    # -- auto-destroy
    ("GET", "/api/v1/workspaces/<workspace_id>/auto-destroy"): ws(P.WORKSPACE_READ),
    ("PUT", "/api/v1/workspaces/<workspace_id>/auto-destroy"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"destroy_after_inactivity": "1m"},
            changes=("auto_destroy",),
            note="a period below the minimum: 422 after the check",
        ),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/auto-destroy"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(changes=("auto_destroy",), absent="auto-destroy of workspace", note="none set"),
    ),
    ("POST", "/api/v1/workspaces/<workspace_id>/auto-destroy/actions/postpone"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"by": "1h"},
            changes=("auto_destroy",),
            absent="auto-destroy of workspace",
            note="nothing scheduled to postpone",
        ),
    ),
    # -- runs
    ("POST", "/api/v1/workspaces/<workspace_id>/runs"): ws(
        P.RUN_CREATE,
        probe=Probe(
            body={"configuration_version_id": "{pending_cv}", "kind": "plan_and_apply"},
            changes=("runs",),
            note="a configuration version never uploaded: 422 after the check",
        ),
    ),
    ("GET", "/api/v1/workspaces/<workspace_id>/runs"): ws(P.RUN_READ),
    ("GET", "/api/v1/runs/<run_id>"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    ("POST", "/api/v1/runs/<run_id>/actions/approve"): ws(
        P.RUN_APPROVE,
        probe=Probe(path=_RUN, body={}, changes=("run",), note="the run was decided: 409"),
    ),
    ("POST", "/api/v1/runs/<run_id>/actions/reject"): ws(
        P.RUN_APPROVE,
        probe=Probe(path=_RUN, body={}, changes=("run",), note="the run was decided: 409"),
    ),
    ("POST", "/api/v1/runs/<run_id>/actions/cancel"): ws(
        P.RUN_CANCEL, probe=Probe(path=_RUN, changes=("run",), note="the run has ended: 409")
    ),
    ("POST", "/api/v1/runs/<run_id>/actions/override-policy"): ws(
        P.POLICY_OVERRIDE,
        probe=Probe(
            path=_RUN,
            body={"reason": "probe"},
            changes=("run",),
            note="no soft-failed policy to override: 409 after the check",
        ),
    ),
    ("POST", "/api/v1/runs/<run_id>/actions/recover"): ws(
        P.RUN_RECOVER,
        probe=Probe(
            path=_RUN,
            body={
                "resolution": "current_state_verified",
                "reason": "probe",
                "current_state_version_id": None,
            },
            changes=("run",),
            note="the run needs no recovery: refused after the check",
        ),
    ),
    ("GET", "/api/v1/runs/<run_id>/logs/<phase>"): ws(
        P.RUN_READ, probe=Probe(path={**_RUN, "phase": "plan"})
    ),
    ("GET", "/api/v1/runs/<run_id>/plan"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    # -- tokens, policy, launch controls (organization-wide)
    ("POST", "/api/v1/tokens"): org(
        P.TOKEN_MANAGE, probe=Probe(body={"name": "probe", "role": "reader"})
    ),
    ("DELETE", "/api/v1/tokens/<token_id>"): org(
        P.TOKEN_MANAGE, probe=Probe(path={"token_id": "missing_token"})
    ),
    ("POST", "/api/v1/policy-sets"): org(
        P.POLICY_MANAGE,
        probe=Probe(body={"name": "probe", "modules": [{"x": "y"}], "policies": [{"x": "y"}]}),
    ),
    ("GET", "/api/v1/policy-sets"): org(P.ORGANIZATION_READ),
    ("GET", "/api/v1/policy-sets/<name>"): org(
        P.ORGANIZATION_READ, probe=Probe(path={"name": "missing_policy"}, absent="policy set")
    ),
    ("PUT", "/api/v1/policy-sets/<name>/attachments"): org(
        P.POLICY_MANAGE, probe=Probe(path={"name": "missing_policy"}, body={"workspaces": []})
    ),
    ("GET", "/api/v1/launch-controls/<scope>"): org(
        P.ORGANIZATION_READ, probe=Probe(path={"scope": "organization"})
    ),
    ("PUT", "/api/v1/launch-controls/<scope>"): org(
        P.LAUNCH_CONTROL,
        probe=Probe(path={"scope": "organization"}, body={"launches_enabled": True}),
    ),
    ("GET", "/api/v1/audit"): org(P.AUDIT_READ),
    # -- teams
    ("POST", "/api/v1/teams"): org(
        P.TEAMS_MANAGE, probe=Probe(body={"name": "probe-{grant}"}, changes=("teams",))
    ),
    ("GET", "/api/v1/teams"): org(P.ORGANIZATION_READ),
    ("GET", "/api/v1/teams/<team_id>"): org(P.ORGANIZATION_READ),
    ("PATCH", "/api/v1/teams/<team_id>"): org(
        P.TEAMS_MANAGE, probe=Probe(body={"groups": ["{grant}"]}, changes=("team",))
    ),
    ("DELETE", "/api/v1/teams/<team_id>"): org(P.TEAMS_MANAGE, probe=Probe(changes=("team",))),
    ("PUT", "/api/v1/teams/<team_id>/members/<user>"): org(
        P.TEAMS_MANAGE, probe=Probe(path={"user": "outsider"}, changes=("team",))
    ),
    ("DELETE", "/api/v1/teams/<team_id>/members/<user>"): org(
        P.TEAMS_MANAGE, probe=Probe(path={"user": "member"}, changes=("team",))
    ),
    ("POST", "/api/v1/teams/<team_id>/tokens"): org(
        P.TEAMS_MANAGE, P.TOKEN_MANAGE, probe=Probe(body={"name": "probe"})
    ),
    ("GET", "/api/v1/teams/<team_id>/access"): org(P.ORGANIZATION_READ),
    ("GET", "/api/v1/workspaces/<workspace_id>/team-access"): ws(P.WORKSPACE_READ),
    # Organization-wide: a workspace admin may not grant their own team a capability.
    ("PUT", "/api/v1/workspaces/<workspace_id>/team-access/<team_id>"): Rule(
        Scope.ORGANIZATION,
        (P.TEAMS_MANAGE,),
        Probe(body={"level": "admin", "capabilities": ["recover"]}, changes=("team_access",)),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/team-access/<team_id>"): Rule(
        Scope.ORGANIZATION, (P.TEAMS_MANAGE,), Probe(changes=("team_access",))
    ),
    # -- source bindings
    ("PUT", "/api/v1/workspaces/<workspace_id>/github"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"installation_id": 1, "repository": "probe/probe", "branch": "main"},
            changes=("github",),
            note="an installation the organization never connected: refused after",
        ),
    ),
    ("GET", "/api/v1/workspaces/<workspace_id>/github"): ws(
        P.WORKSPACE_READ, probe=Probe(absent="GitHub binding")
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/github"): ws(
        P.WORKSPACE_UPDATE, probe=Probe(changes=("github",), absent="GitHub binding")
    ),
    ("GET", "/api/v1/github/installations"): org(P.ORGANIZATION_READ),
    ("DELETE", "/api/v1/github/installations/<installation_id>"): org(
        P.GITHUB_CONNECT, probe=Probe(path={"installation_id": "missing_installation"})
    ),
    # Not walked: an ingestion exists only after a GitHub delivery (tests/e2e/test_github.py
    # reads one as a member and as another organization).
    ("GET", "/api/v1/github/ingestions/<source_id>"): ws(P.WORKSPACE_READ, probe=None),
    ("PUT", "/api/v1/workspaces/<workspace_id>/gitlab"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"base_url": "not a url", "project": "p/p", "branch": "main", "access_token": "t"},
            changes=("gitlab",),
            note="a base URL that is none: 422 after the check",
        ),
    ),
    ("GET", "/api/v1/workspaces/<workspace_id>/gitlab"): ws(
        P.WORKSPACE_READ, probe=Probe(absent="GitLab binding")
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/gitlab"): ws(
        P.WORKSPACE_UPDATE, probe=Probe(changes=("gitlab",), absent="GitLab binding")
    ),
    # -- inbox: the runs waiting for the caller, on the workspaces they may read
    ("GET", "/api/v1/attention"): Rule(Scope.SOMEWHERE, (P.RUN_READ,), Probe()),
    # -- run triggers and notifications
    ("GET", "/api/v1/workspaces/<workspace_id>/run-triggers"): ws(P.WORKSPACE_READ),
    ("POST", "/api/v1/workspaces/<workspace_id>/run-triggers"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"source_workspace_id": "{workspace_id}"},
            changes=("run_triggers",),
            note="the workspace as its own source: 422 after the check",
        ),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/run-triggers/<source_id>"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            path={"source_id": "source_workspace"},
            changes=("run_triggers",),
            restore="run_trigger",
        ),
    ),
    ("GET", "/api/v1/workspaces/<workspace_id>/notifications"): ws(P.WORKSPACE_READ),
    ("POST", "/api/v1/workspaces/<workspace_id>/notifications"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"name": "{grant}", "url": "http://127.0.0.1:9/hook", "events": ["applied"]},
            changes=("notifications",),
            restore="notification",
        ),
    ),
    ("DELETE", "/api/v1/workspaces/<workspace_id>/notifications/<destination_id>"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            path={"destination_id": "destination"},
            changes=("notifications",),
            restore="notification",
        ),
    ),
    (
        "POST",
        "/api/v1/workspaces/<workspace_id>/notifications/<destination_id>/actions/test",
    ): ws(P.WORKSPACE_UPDATE, probe=Probe(path={"destination_id": "destination"})),
    (
        "GET",
        "/api/v1/workspaces/<workspace_id>/notifications/<destination_id>/deliveries",
    ): ws(P.WORKSPACE_READ, probe=Probe(path={"destination_id": "destination"})),
    # -- schedules and drift
    ("POST", "/api/v1/workspaces/<workspace_id>/drift/actions/remediate"): ws(
        P.RUN_CREATE,
        probe=Probe(
            body={"remedy": "reconcile"},
            changes=("runs",),
            note="no drift was detected: refused after the check",
        ),
    ),
    ("POST", "/api/v1/workspaces/<workspace_id>/schedules"): ws(
        P.WORKSPACE_UPDATE,
        P.RUN_CREATE,
        probe=Probe(
            body={"expression": "0 3 * * *", "kind": "plan_only"},
            changes=("schedules",),
            restore="schedules",
        ),
    ),
    ("GET", "/api/v1/workspaces/<workspace_id>/schedules"): ws(P.WORKSPACE_READ),
    ("GET", "/api/v1/schedules/<schedule_id>"): ws(
        P.WORKSPACE_READ, probe=Probe(path={"schedule_id": "schedule"})
    ),
    ("POST", "/api/v1/schedules/<schedule_id>/actions/pause"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            path={"schedule_id": "schedule"},
            body={"paused": True},
            changes=("schedules",),
            restore="schedules",
        ),
    ),
    ("DELETE", "/api/v1/schedules/<schedule_id>"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(path={"schedule_id": "schedule"}, changes=("schedules",), restore="schedules"),
    ),
    # -- the runner's session routes
    ("POST", "/api/v1/runner/sessions"): RUNNER,
    # A standby runner's claim: its single-use ticket, not a session (docs/standby.md).
    ("POST", "/api/v1/runner/standby/claim"): RUNNER,
    ("POST", "/api/v1/runner/downloads/<artifact_id>"): RUNNER,
    ("POST", "/api/v1/runner/uploads"): RUNNER,
    ("POST", "/api/v1/runner/uploads/register"): RUNNER,
    ("POST", "/api/v1/runner/uploads/<artifact_id>/register"): RUNNER,
    ("POST", "/api/v1/runner/apply-start"): RUNNER,
    ("POST", "/api/v1/runner/credentials"): RUNNER,
    ("GET", "/api/v1/runner/state-check"): RUNNER,
    ("POST", "/api/v1/runner/heartbeat"): RUNNER,
    ("POST", "/api/v1/runner/log-chunks"): RUNNER,
    ("POST", "/api/v1/runner/result"): RUNNER,
}

_WS = {"ws_id": "workspace_id"}
# Well formed, refused after the permission check (a workspace is never renamed): 422.
_RENAME = {"data": {"type": "workspaces", "attributes": {"name": "renamed"}}}
_BY_NAME = {"org": "org_name", "name": "workspace"}

CLOUD_API: dict[tuple[str, str], Rule] = {
    ("GET", "/.well-known/terraform.json"): PUBLIC,
    ("GET", "/api/v2/ping"): PUBLIC,
    # Upload and log URLs carry their own single-purpose credential.
    ("PUT", "/_archivist/<token>"): PUBLIC,
    ("PUT", "/_configuration/<token>"): PUBLIC,
    ("GET", "/_logs/<run_id>/<phase>/<expires>/<grant>"): PUBLIC,
    ("GET", "/api/v2/account/details"): SIGNED_IN,
    # The caller's own organization, to a caller who may read it.
    ("GET", "/api/v2/organizations"): org(P.ORGANIZATION_READ),
    ("GET", "/api/v2/organizations/<org>"): org(
        P.ORGANIZATION_READ, probe=Probe(path={"org": "org_name"})
    ),
    # What a native client, and the engine in a run's sandbox (a runner session, which
    # holds no organization:read), reads at init: the same for every caller of the
    # organization (the deployment's features; a run queue that is always empty).
    ("GET", "/api/v2/organizations/<org>/entitlement-set"): SIGNED_IN,
    ("GET", "/api/v2/organizations/<org>/runs/queue"): SIGNED_IN,
    ("GET", "/api/v2/organizations/<org>/workspaces"): Rule(
        Scope.SOMEWHERE, (P.WORKSPACE_READ,), Probe(path={"org": "org_name"})
    ),
    ("POST", "/api/v2/organizations/<org>/workspaces"): org(
        P.WORKSPACE_CREATE,
        probe=Probe(
            path={"org": "org_name"},
            body={"data": {"type": "workspaces", "attributes": {"name": "probe-{grant}"}}},
            changes=("workspaces",),
        ),
    ),
    ("GET", "/api/v2/organizations/<org>/workspaces/<name>"): ws(
        P.WORKSPACE_READ, probe=Probe(path=_BY_NAME)
    ),
    ("PATCH", "/api/v2/organizations/<org>/workspaces/<name>"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            path=_BY_NAME,
            body=_RENAME,
            changes=("workspace",),
        ),
    ),
    ("DELETE", "/api/v2/organizations/<org>/workspaces/<name>"): ws(
        P.WORKSPACE_DELETE,
        probe=Probe(path=_BY_NAME, changes=("workspace",), note="not empty: 409 after"),
    ),
    ("GET", "/api/v2/workspaces/<ws_id>"): ws(P.WORKSPACE_READ, probe=Probe(path=_WS)),
    ("PATCH", "/api/v2/workspaces/<ws_id>"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            path=_WS,
            body=_RENAME,
            changes=("workspace",),
        ),
    ),
    ("POST", "/api/v2/workspaces/<ws_id>/actions/safe-delete"): ws(
        P.WORKSPACE_DELETE,
        probe=Probe(path=_WS, changes=("workspace",), note="not empty: 409 after"),
    ),
    ("POST", "/api/v2/workspaces/<ws_id>/actions/lock"): ws(
        P.WORKSPACE_LOCK,
        probe=Probe(path=_WS, body={"reason": "probe"}, changes=("lock",), restore="unlocked"),
    ),
    ("POST", "/api/v2/workspaces/<ws_id>/actions/unlock"): ws(
        P.WORKSPACE_LOCK, probe=Probe(path=_WS, changes=("lock",), note="not locked: 409")
    ),
    ("POST", "/api/v2/workspaces/<ws_id>/actions/force-unlock"): ws(
        P.WORKSPACE_FORCE_UNLOCK,
        probe=Probe(path=_WS, changes=("lock",), note="not locked: 409"),
    ),
    ("GET", "/api/v2/workspaces/<ws_id>/current-state-version"): ws(
        P.STATE_READ, probe=Probe(path=_WS)
    ),
    ("GET", "/api/v2/workspaces/<ws_id>/current-state-version-outputs"): ws(
        P.STATE_READ, probe=Probe(path=_WS)
    ),
    ("GET", "/api/v2/workspaces/<ws_id>/state-versions"): ws(P.STATE_READ, probe=Probe(path=_WS)),
    ("GET", "/api/v2/state-versions"): ws(
        P.STATE_READ,
        probe=Probe(
            query={"filter[organization][name]": "{org_name}", "filter[workspace][name]": "main"}
        ),
    ),
    ("POST", "/api/v2/workspaces/<ws_id>/state-versions"): ws(
        P.STATE_WRITE,
        probe=Probe(
            path=_WS,
            body={
                "data": {
                    "type": "state-versions",
                    "attributes": {"serial": 1, "md5": "0" * 32, "lineage": "probe"},
                }
            },
            changes=("state",),
            note="not locked by the caller: refused after the check",
        ),
    ),
    ("GET", "/api/v2/state-versions/<sv_id>"): ws(
        P.STATE_READ, probe=Probe(path={"sv_id": "state_version"})
    ),
    ("GET", "/api/v2/state-versions/<sv_id>/outputs"): ws(
        P.STATE_READ, probe=Probe(path={"sv_id": "state_version"})
    ),
    ("GET", "/api/v2/state-version-outputs/<wsout_id>"): ws(
        P.STATE_READ, probe=Probe(path={"wsout_id": "output"})
    ),
    ("GET", "/api/v2/state-versions/<sv_id>/download"): ws(
        P.STATE_READ, probe=Probe(path={"sv_id": "state_version"})
    ),
    ("GET", "/api/v2/state-versions/<sv_id>/json-download"): ws(
        P.STATE_READ, probe=Probe(path={"sv_id": "state_version"}, absent="JSON state")
    ),
    ("POST", "/api/v2/workspaces/<ws_id>/configuration-versions"): ws(
        P.RUN_PLAN,
        probe=Probe(
            path=_WS,
            body={"data": {"type": "configuration-versions", "attributes": {"speculative": True}}},
        ),
    ),
    ("GET", "/api/v2/configuration-versions/<cv_id>"): ws(
        P.RUN_READ, probe=Probe(path=_PENDING_CV)
    ),
    ("POST", "/api/v2/runs"): ws(
        P.RUN_CREATE,
        probe=Probe(
            body={
                "data": {
                    "type": "runs",
                    "attributes": {},
                    "relationships": {
                        "workspace": {"data": {"type": "workspaces", "id": "{workspace_id}"}},
                        "configuration-version": {
                            "data": {"type": "configuration-versions", "id": "{pending_cv}"}
                        },
                    },
                }
            },
            changes=("runs",),
            note="the workspace runs plans on the client: 409 after the check",
        ),
    ),
    ("GET", "/api/v2/runs/<run_id>"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    ("GET", "/api/v2/workspaces/<ws_id>/runs"): ws(P.RUN_READ, probe=Probe(path=_WS)),
    ("POST", "/api/v2/runs/<run_id>/actions/apply"): ws(
        P.RUN_APPROVE, probe=Probe(path=_RUN, changes=("run",), note="decided: 409")
    ),
    ("POST", "/api/v2/runs/<run_id>/actions/discard"): ws(
        P.RUN_APPROVE, probe=Probe(path=_RUN, changes=("run",), note="decided: 409")
    ),
    ("POST", "/api/v2/runs/<run_id>/actions/cancel"): ws(
        P.RUN_CANCEL, probe=Probe(path=_RUN, changes=("run",), note="ended: 409")
    ),
    ("GET", "/api/v2/plans/<plan_id>"): ws(P.RUN_READ, probe=Probe(path={"plan_id": "plan_id"})),
    ("GET", "/api/v2/runs/<run_id>/plan"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    ("GET", "/api/v2/applies/<apply_id>"): ws(
        P.RUN_READ, probe=Probe(path={"apply_id": "apply_id"})
    ),
    ("GET", "/api/v2/runs/<run_id>/apply"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    ("GET", "/api/v2/runs/<run_id>/policy-checks"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    # Not walked: the walk's run has no policy check, and a missing one is not found to
    # everyone alike (tests/e2e/test_policy.py reads them).
    ("GET", "/api/v2/policy-checks/<check_id>"): ws(P.RUN_READ, probe=None),
    ("GET", "/api/v2/policy-checks/<check_id>/output"): ws(P.RUN_READ, probe=None),
    # What an engine in a run's sandbox reads first (a runner session only).
    ("GET", "/api/v2/runner/first-reads"): RUNNER,
}

_UI_WS = "/ui/workspaces/<workspace_id>"

DASHBOARD: dict[tuple[str, str], Rule] = {
    # The workspace list: a person who may read none is told so (200), not refused.
    ("GET", "/"): SIGNED_IN,
    ("GET", "/ui"): SIGNED_IN,
    ("GET", "/ui/login"): PUBLIC,
    ("GET", "/ui/sign-in"): PUBLIC,
    ("GET", "/ui/oauth2/callback"): PUBLIC,
    ("POST", "/ui/logout"): SIGNED_IN,
    ("GET", "/favicon.ico"): PUBLIC,
    ("GET", "/ui/static/<file_name>"): PUBLIC,
    ("GET", "/ui/github"): org(P.ORGANIZATION_READ),
    ("POST", "/ui/github/connect"): org(
        P.GITHUB_CONNECT, probe=Probe(body={"installation_id": "1"})
    ),
    # The GitHub App's redirect back: it checks its own state parameter.
    ("GET", "/ui/github/callback"): PUBLIC,
    ("POST", "/ui/github/installations/<installation_id>/release"): org(
        P.GITHUB_CONNECT, probe=Probe(path={"installation_id": "missing_installation"})
    ),
    ("GET", "/ui/attention"): Rule(Scope.SOMEWHERE, (P.RUN_READ,), Probe()),
    ("GET", "/ui/teams"): org(P.ORGANIZATION_READ),
    ("POST", "/ui/teams"): org(
        P.TEAMS_MANAGE, probe=Probe(body={"name": "probe-{grant}"}, changes=("teams",))
    ),
    ("POST", "/ui/teams/<team_id>/delete"): org(P.TEAMS_MANAGE, probe=Probe(changes=("team",))),
    ("POST", "/ui/teams/<team_id>/members"): org(
        P.TEAMS_MANAGE, probe=Probe(body={"user": "{outsider}"}, changes=("team",))
    ),
    ("POST", "/ui/teams/<team_id>/members/remove"): org(
        P.TEAMS_MANAGE, probe=Probe(body={"user": "{member}"}, changes=("team",))
    ),
    ("POST", "/ui/teams/<team_id>/access"): org(
        P.TEAMS_MANAGE,
        probe=Probe(
            body={"workspace_id": "{workspace_id}", "level": "admin", "capability_recover": "yes"},
            changes=("team_access",),
        ),
    ),
    ("POST", "/ui/teams/<team_id>/access/remove"): org(
        P.TEAMS_MANAGE,
        probe=Probe(body={"workspace_id": "{workspace_id}"}, changes=("team_access",)),
    ),
    ("GET", _UI_WS): ws(P.WORKSPACE_READ),
    ("POST", f"{_UI_WS}/cloud-settings"): ws(
        P.CREDENTIALS_MANAGE,
        probe=Probe(body={"expected_version": "999"}, changes=("cloud_settings",)),
    ),
    ("POST", f"{_UI_WS}/cloud-settings/clear"): ws(
        P.CREDENTIALS_MANAGE,
        probe=Probe(body={"expected_version": "999"}, changes=("cloud_settings",)),
    ),
    ("POST", f"{_UI_WS}/drift/remediate"): ws(
        P.RUN_CREATE, probe=Probe(body={"remedy": "reconcile"}, changes=("runs",))
    ),
    ("POST", f"{_UI_WS}/auto-destroy/postpone"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(changes=("auto_destroy",), absent="auto-destroy of workspace"),
    ),
    ("POST", f"{_UI_WS}/variables"): ws(
        P.VARIABLES_MANAGE,
        probe=Probe(
            body={"name": "{variable}", "category": "terraform", "value": "{grant}"},
            changes=("variables",),
            restore="variable",
        ),
    ),
    ("POST", f"{_UI_WS}/variables/delete"): ws(
        P.VARIABLES_MANAGE,
        probe=Probe(
            body={"name": "{variable}", "category": "terraform"},
            changes=("variables",),
            restore="variable",
        ),
    ),
    ("POST", f"{_UI_WS}/schedules"): ws(
        P.WORKSPACE_UPDATE,
        P.RUN_CREATE,
        probe=Probe(
            body={"expression": "0 3 * * *", "kind": "plan_only"},
            changes=("schedules",),
            restore="schedules",
        ),
    ),
    ("POST", f"{_UI_WS}/schedules/pause"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"schedule_id": "{schedule}", "paused": "yes"},
            changes=("schedules",),
            restore="schedules",
        ),
    ),
    ("POST", f"{_UI_WS}/schedules/delete"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"schedule_id": "{schedule}"}, changes=("schedules",), restore="schedules"
        ),
    ),
    ("POST", f"{_UI_WS}/run-triggers"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"source_workspace_id": "{workspace_id}", "run_kind": "plan_only"},
            changes=("run_triggers",),
        ),
    ),
    ("POST", f"{_UI_WS}/run-triggers/remove"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"source_workspace_id": "{source_workspace}"},
            changes=("run_triggers",),
            restore="run_trigger",
        ),
    ),
    ("POST", f"{_UI_WS}/notifications"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"name": "{grant}", "url": "http://127.0.0.1:9/hook", "event_applied": "yes"},
            changes=("notifications",),
            restore="notification",
        ),
    ),
    ("POST", f"{_UI_WS}/notifications/delete"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"destination_id": "{destination}"},
            changes=("notifications",),
            restore="notification",
        ),
    ),
    ("GET", f"{_UI_WS}/state-versions/<state_version_id>/download"): ws(
        P.STATE_READ, probe=Probe(path={"state_version_id": "state_version"})
    ),
    ("POST", f"{_UI_WS}/lock"): ws(
        P.WORKSPACE_LOCK, probe=Probe(changes=("lock",), restore="unlocked")
    ),
    ("POST", f"{_UI_WS}/unlock"): ws(P.WORKSPACE_LOCK, probe=Probe(changes=("lock",))),
    ("POST", f"{_UI_WS}/force-unlock"): ws(
        P.WORKSPACE_FORCE_UNLOCK, probe=Probe(changes=("lock",))
    ),
    ("POST", f"{_UI_WS}/settings"): ws(
        P.WORKSPACE_UPDATE,
        probe=Probe(
            body={"expected_settings_version": "999", "execution_mode": "local"},
            changes=("workspace",),
            note="a stale settings version: 409 after the check",
        ),
    ),
    ("GET", "/ui/runs/<run_id>"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    ("POST", "/ui/runs/<run_id>/<decision>"): ws(
        P.RUN_APPROVE, probe=Probe(path={**_RUN, "decision": "approve"}, changes=("run",))
    ),
    ("POST", "/ui/runs/<run_id>/recover"): ws(
        P.RUN_RECOVER,
        probe=Probe(
            path=_RUN,
            body={"resolution": "current_state_verified", "reason": "probe"},
            changes=("run",),
        ),
    ),
    ("POST", "/ui/runs/<run_id>/cancel"): ws(
        P.RUN_CANCEL, probe=Probe(path=_RUN, changes=("run",))
    ),
    ("GET", "/ui/runs/<run_id>/logs/<phase>"): ws(
        P.RUN_READ, probe=Probe(path={**_RUN, "phase": "plan"})
    ),
    ("GET", "/ui/runs/<run_id>/plan"): ws(P.RUN_READ, probe=Probe(path=_RUN)),
    # The link `terraform` prints: redirects to the run page, which checks.
    ("GET", "/app/<organization>/<workspace>/runs/<run_id>"): SIGNED_IN,
}

TABLES: dict[Surface, dict[tuple[str, str], Rule]] = {
    Surface.API: API,
    Surface.CLOUD_API: CLOUD_API,
    Surface.DASHBOARD: DASHBOARD,
}
