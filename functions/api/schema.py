"""What the run API answers, for its OpenAPI document: response models, the errors
each route may give, and how callers authenticate.

Every router builds its reply as one of these models (or a router's own ``Doc``), by
keyword or by validating what its service returns (a run's review included), so the
model is the reply and its schema at once: ``edge.json_reply`` serializes it, a reply
that strays from the model fails in the handler, and a field the model does not name
never reaches a client. The runner's replies (``routers/runner.py``) are closed models:
a field the service returns and the model does not name fails in the handler, since the
runner would lose it. A test fuzzes the API and checks every response against this
document; another checks a runner's real replies against it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.models import SecurityScheme

JSON = "application/json"
JSONAPI = "application/vnd.api+json"


class Doc(BaseModel):
    """A response model: it describes a reply in the OpenAPI document and validates
    nothing at run time, so its schema is built with the document, not at import."""

    model_config = ConfigDict(defer_build=True)


# -- security ------------------------------------------------------------------------------


def security_schemes() -> dict[str, SecurityScheme]:
    # Powertools' OpenAPI models cost more to import than a route: only the document needs them.
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    return {
        "jwt": HTTPBearer(
            bearerFormat="JWT",
            description="A person's identity token (Cognito in AWS, the local issuer in the "
            "embedded stack), carrying the organization and the roles.",
        ),
        "apiToken": HTTPBearer(
            bearerFormat="rpt_…",
            description="An organization API token with a role (POST /api/v1/tokens).",
        ),
        "runnerSession": HTTPBearer(
            description="A sandbox's runner session, redeemed from its one-time bootstrap "
            "handle (POST /api/v1/runner/sessions).",
        ),
    }


PEOPLE: list[dict[str, list[str]]] = [{"jwt": []}, {"apiToken": []}]
RUNNER: list[dict[str, list[str]]] = [{"runnerSession": []}]


# -- errors --------------------------------------------------------------------------------


class ErrorBody(Doc):
    """Every error of the run API: a machine-readable code and a sentence."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str
    pointer: str | None = Field(default=None, description="The field to blame (JSON pointer)")


class _GatewayErrorItem(Doc):
    status: str | None = None
    title: str
    detail: str


class GatewayError(Doc):
    """Errors the gateway answers itself (no credentials, payload over 10 MB)."""

    errors: list[_GatewayErrorItem]


_ERROR_WHEN = {
    400: "unreadable body: not UTF-8, not JSON, or nested deeper than 32 levels",
    401: "missing, unknown, revoked or expired credentials",
    403: "the caller lacks the permission the route needs",
    404: "no such object (or another organization's)",
    409: "the object is not in a state that allows this (the body names why)",
    413: "the body carries more than its documented bounds",
    422: "invalid input: `pointer` names the field",
    503: "new work is not being accepted now, or too much contention: retry later",
}


def _error(status: int) -> dict[str, Any]:
    if status == 401:
        # API Gateway's authorizer answers before the application, in JSON:API shape.
        content = {JSONAPI: {"model": GatewayError}, JSON: {"model": ErrorBody}}
    else:
        content = {JSON: {"model": ErrorBody}}
    return {"description": _ERROR_WHEN[status], "content": content}


def responses(
    status: int,
    model: type[BaseModel],
    *errors: int,
    also: int | None = None,
) -> dict[int, Any]:
    """The success response (``also``: a second success status with the same body) and
    the errors a route may give (400 and 422 always can)."""
    success = {"description": "Success", "content": {JSON: {"model": model}}}
    declared: dict[int, Any] = {status: success}
    if also is not None:
        declared[also] = success
    for code in sorted({400, 422, *errors}):
        declared[code] = _error(code)
    return declared


def text_responses(*errors: int) -> dict[int, Any]:
    """A plain-text success (a log) and the errors a route may give."""
    declared: dict[int, Any] = {
        200: {"description": "Success", "content": {"text/plain": {"schema": {"type": "string"}}}}
    }
    for code in sorted({400, 422, *errors}):
        declared[code] = _error(code)
    return declared


# Routes for people: authenticated, permission-checked, organization-scoped.
AUTHENTICATED = (401, 403)
READ = (*AUTHENTICATED, 404)
WRITE = (*AUTHENTICATED, 404, 409, 413, 503)


# -- workspaces and configuration ----------------------------------------------------------


class WorkspaceCreated(Doc):
    id: str
    name: str
    organization: str
    tags: list[str]


class SecondApprovalView(Doc):
    """The two-person rule for destructive runs (docs/runs.md, "A second approver")."""

    destroy_runs: bool = Field(description="Every destroy run needs two approvers")
    destroys_over: int | None = Field(
        description="Plans destroying more than this many resources need two; null: none"
    )
    separation_of_duties: bool = Field(
        description="The run's creator may not approve it (anyone with the permission may "
        "reject it)"
    )


class WorkspaceUpdated(Doc):
    id: str
    name: str
    approval_window_seconds: int | None
    tags: list[str]
    second_approval: SecondApprovalView


class WorkspaceDeleted(Doc):
    """A deleted workspace: its name is free again; its runs, state versions and audit
    events are kept (docs/runs.md, "Deleting a workspace")."""

    id: str
    name: str
    deleted: Literal[True]
    deleted_at: str
    forced: bool
    resources: int = Field(
        description="Resource instances its current state still managed (left unmanaged)"
    )


class DriftView(Doc):
    """A workspace's drift (docs/schedules.md)."""

    drifted: bool
    run_id: str
    detected_at: str | None
    cleared_at: str | None
    schedule_id: str | None
    summary: dict[str, int] | None
    cleared_by: Literal["scheduled_plan", "apply"] | None


class WorkspaceView(Doc):
    id: str
    name: str
    created_at: str
    description: str | None
    tags: list[str]
    terraform_version: str | None
    approval_window_seconds: int | None = Field(
        description="null: the deployment's default window applies"
    )
    locked: bool
    writer_run_id: str | None
    queue_length: int
    current_state_version_id: str | None
    drift: DriftView | None = Field(
        default=None, description="What the last scheduled plan found; null: never checked"
    )
    second_approval: SecondApprovalView


class WorkspaceList(Doc):
    workspaces: list[WorkspaceView]


class ConfigurationUpload(Doc):
    id: str
    upload_url: str = Field(description="A single-purpose URL to PUT one tar.gz to")
    expires_at: str


class Configuration(Doc):
    id: str
    workspace_id: str
    status: Literal["pending", "uploaded"]
    sha256: str | None
    size: int | None
    artifact_id: str | None


# -- runs ------------------------------------------------------------------------------------


class _Open(Doc):
    """A record whose fields are listed in the docs and may grow."""

    model_config = ConfigDict(extra="allow")


class Workflow(Doc):
    execution_name: str
    definition_version: str | None
    build_sha: str | None


class StageView(Doc):
    stage: str
    status: str
    started_at: str | None
    finished_at: str | None


class VariableSetRef(Doc):
    id: str
    name: str | None


class RunVariable(Doc):
    name: str
    category: Literal["terraform", "env"] = Field(
        description="terraform: a Terraform variable; env: an environment variable of the "
        "engine's process"
    )
    source: Literal["run", "workspace", "variable_set"] = Field(
        description="Where the value came from when the run was created: the run's own "
        "variables, the workspace's, or a variable set applied to the workspace"
    )
    sensitive: bool
    variable_set: VariableSetRef | None = Field(description="For source variable_set: which")


class AwsDecisionView(Doc):
    plan_role_arn: str = Field(description="The role plans and speculative runs assume")
    apply_role_arn: str | None = Field(
        description="The role the apply assumes; null: the run never applies, or the "
        "workspace has no apply role (its apply gets no AWS credentials)"
    )
    external_id_set: bool = Field(description="Whether an external ID is sent (never its value)")
    session_duration: int
    region: str


class AudienceView(Doc):
    audience: str


class AzureDecisionView(Doc):
    audience: str
    client_id: str
    tenant_id: str


class CredentialDecisionsView(Doc):
    """A run's credential decisions, pinned at creation from its workspace's cloud
    settings (docs/credentials.md): which identities each phase may get, never a
    credential. All null: no cloud credentials."""

    settings_version: int = Field(description="The settings' version pinned; 0: none")
    aws: AwsDecisionView | None
    gcp: AudienceView | None
    azure: AzureDecisionView | None
    digest: str = Field(description="SHA-256 of the decisions' canonical JSON")


class RunInput(Doc):
    configuration_version_id: str | None
    configuration_sha256: str | None
    engine_version: str | None
    variable_names: list[str]
    variables: list[RunVariable] = Field(
        description="Names, categories, sources and sensitivity, never values"
    )
    predecessor_state_version_id: str | None
    credentials: CredentialDecisionsView
    options: RunOptionsView


class RunOptionsView(Doc):
    """What the plan was asked to do beyond the configuration (docs/runs.md, "Run
    options")."""

    destroy: bool = Field(description="A destroy plan: every managed resource goes")
    refresh_only: bool = Field(description="Only refresh: accept the real world into state")
    targets: list[str] = Field(description="Resource or module addresses the plan is limited to")
    replacements: list[str] = Field(description="Resource instances replaced even if unchanged")


class PlanView(_Open):
    has_changes: bool | None
    summary: dict[str, Any] | None
    plan_sha256: str | None
    engine_version: str | None


class StatusView(_Open):
    status: str


class SourceIngestionView(Doc):
    id: str
    status: Literal["ready"]


class SourceProvenance(Doc):
    """Where a run's configuration came from (docs/github.md): identifiers and digests
    of persisted records only."""

    provider: Literal["github", "gitlab"]
    repository: str
    event: Literal["push", "pull_request", "merge_request"]
    ref: str
    branch: str
    pull_request: int | None
    commit_sha: str
    commit_message: str | None
    sender: str | None
    pull_request_title: str | None
    pull_request_author: str | None
    working_directory: str
    source_ingestion: SourceIngestionView
    workflow_id: str
    delivery_id: str
    configuration_version_id: str
    archive_sha256: str | None
    configuration_artifact_id: str


class Review(Doc):
    """The run review: every fact from the database."""

    id: str
    workspace_id: str
    kind: Literal["plan_only", "speculative", "plan_and_apply", "refresh_only"]
    status: str
    label: str
    status_reason: str | None
    created_at: str
    updated_at: str
    created_by: str | None
    created_by_display: str | None = Field(
        default=None, description="Who created the run, in words (User alice)"
    )
    workflow: Workflow
    stages: list[StageView]
    input: RunInput
    source: SourceProvenance | None
    # The run that queued this one through a run trigger (docs/run-triggers.md).
    trigger: dict[str, str] | None = None
    remediation: dict[str, str] | None = Field(
        default=None, description="The drift this run resolves: remedy and drift_run_id"
    )
    auto_destroy: dict[str, str | int | bool] | None = Field(
        default=None,
        description="The auto-destroy that created this destroy run: due_at, attempt, "
        "auto_apply, set_by",
    )
    # What this run's apply queued in dependent workspaces: a run, or why not.
    triggered_runs: list[dict[str, str | None]] = []
    plan: PlanView | None
    policy: StatusView | None
    approval: StatusView | None
    apply: StatusView | None
    failure: dict[str, str] | None = None
    recovery: RecoveryPanel | None = None
    schedule: dict[str, str] | None = Field(
        default=None, description="The schedule and fire time that created the run"
    )
    drift: dict[str, bool] | None = Field(
        default=None, description="A scheduled plan's finding: whether it found drift"
    )


class RecoveryPanel(Doc):
    """What an operator compares before recovering (docs/recovery.md)."""

    model_config = ConfigDict(extra="allow")
    status: Literal["required", "prepared", "completed"]
    pre_apply_state_version_id: str | None
    current_state_version_id: str | None
    state_moved: bool
    fence: int
    pending_uploads: list[dict[str, Any]]
    lease_expires_at: str | None = None
    lease_remaining_seconds: int | None = Field(default=None, ge=0, le=900)


class RecoveryResult(Doc):
    recovery_id: str
    run_id: str
    status: Literal["completed"]
    resolution: Literal["current_state_verified", "import_emergency_state"]
    recovered_by: str
    completed_at: str
    fence: int
    state_version_id: str | None
    publications_verified: int
    discarded_uploads: list[dict[str, Any]]
    writer_handed_to: str | None


class RunSummary(Doc):
    id: str
    kind: str
    status: str
    created_at: str


class RunList(Doc):
    runs: list[RunSummary]


# -- tokens, policy sets, launch controls ---------------------------------------------------


class TokenIssued(Doc):
    id: str
    name: str
    role: str
    permissions: list[str]
    token: str = Field(description="Shown once: only its hash is stored")


class TokenRevoked(Doc):
    id: str
    revoked: bool


class PolicySet(Doc):
    name: str
    digest: str
    version: int
    input_shape: str = Field(
        default="runplane", description="The input document the set's policies see"
    )
    rego_v0_modules: list[str] = Field(
        default_factory=list,
        description="Modules written in Rego v0, upgraded to v1 each time they are compiled",
    )
    policies: list[dict[str, Any]]
    attached_workspaces: list[str]
    all_workspaces: bool
    warnings: list[str] = Field(
        default_factory=list,
        description="Publication warnings, e.g. modules reading input roots the set's "
        "input shape does not provide (with unknown_input_roots: warn)",
    )


class PolicySets(Doc):
    policy_sets: list[PolicySet]


class LaunchControls(Doc):
    scope: Literal["platform", "organization"]
    launches_enabled: bool
    suspended: bool
    allowed_regions: list[str]
    runner_releases: list[str]
    policy_runtimes: list[str]
    max_sandboxes: int | None
    running_sandboxes: int | None = Field(default=None, description="Only when read")


# -- workspace variables ---------------------------------------------------------------


class VariableView(Doc):
    name: str
    category: Literal["terraform", "env"]
    sensitive: bool
    description: str | None
    value: str | None = Field(description="null for a sensitive variable: never returned")
    updated_at: str
    updated_by: str


class VariableList(Doc):
    workspace_id: str
    variables: list[VariableView]


class VariableDeleted(Doc):
    workspace_id: str
    name: str
    category: Literal["terraform", "env"] = "terraform"
    deleted: Literal[True]


# -- workspace cloud settings ---------------------------------------------------------------


class CloudSettingsView(Doc):
    """A workspace's cloud settings (docs/credentials.md); the external ID only as
    whether one is set."""

    workspace_id: str
    aws_plan_role_arn: str | None
    aws_apply_role_arn: str | None
    aws_external_id_set: bool
    aws_session_duration: int
    aws_region: str | None = Field(description="null: the deployment's region")
    gcp_audience: str | None
    azure_audience: str | None
    azure_client_id: str | None
    azure_tenant_id: str | None
    version: int = Field(description="Each change adds one; 0: never set")
    updated_at: str | None
    updated_by: str | None


# -- workspace auto-destroy ------------------------------------------------------------------


class AutoDestroyView(Doc):
    """A workspace's auto-destroy (docs/auto-destroy.md); only ``workspace_id`` and
    ``armed`` when it has none."""

    workspace_id: str
    armed: bool
    version: int | None = None
    destroy_at: str | None = None
    destroy_after_inactivity: str | None = None
    auto_apply: bool | None = None
    set_at: str | None = None
    set_by: str | None = None
    due_at: str | None = Field(
        default=None, description="When the destroy run starts; null once destroyed"
    )
    postponed_until: str | None = None
    postponed_by: str | None = None
    active_run_id: str | None = Field(default=None, description="The destroy run under way")
    last_run_id: str | None = None
    last_outcome: Literal["destroyed", "failed"] | None = None
    last_reason: str | None = None
    attempts: int | None = Field(default=None, description="Destroy runs for this due time")
    next_attempt_at: str | None = Field(default=None, description="After a failure")
    destroyed_at: str | None = None


# -- GitHub sources ------------------------------------------------------------------------


class GitHubBindingView(Doc):
    workspace_id: str
    provider: Literal["github"]
    repository: str
    branch: str
    working_directory: str
    installation_id: int
    push_run_kind: Literal["plan_and_apply", "plan_only"]
    pull_request_workspaces: bool = Field(
        description="A pull request gets its own preview workspace, planned and applied, "
        "destroyed when it closes (instead of a speculative plan here)"
    )
    pull_request_auto_apply_destroy: bool = Field(
        description="A closed pull request's preview is destroyed without a person's approval"
    )
    trigger_patterns: list[str] = Field(
        description="Globs over repository paths: a change runs only if a changed file "
        "matches one (or lies in the working directory); empty: every change runs"
    )
    ignore_patterns: list[str] = Field(
        description="Globs over repository paths: changed files matching one never count"
    )


class PathFilterDecision(Doc):
    """What a bound workspace's path filters made of a push or pull request."""

    workspace_id: str
    decision: Literal["triggered", "skipped"]
    reason: str
    files_considered: int
    files_matched: int
    fallback: Literal["truncated", "new_branch", "force_push", "unavailable"] | None = Field(
        description="Why the changed files could not all be listed (the change then ran)"
    )


class GitHubIngestionTargetView(Doc):
    workspace_id: str
    bound_workspace_id: str
    run_id: str | None
    error: str | None


class GitHubIngestionView(Doc):
    """A source ingestion: the commit a webhook delivery named, the runs it made, and
    what each bound workspace's path filters decided (docs/github.md)."""

    id: str
    delivery_id: str
    event: str
    action: str | None
    repository: str
    branch: str
    ref: str
    commit_sha: str
    pull_request: int | None
    status: Literal["pending", "ready", "failed"]
    reason: str | None
    created_at: str
    updated_at: str
    targets: list[GitHubIngestionTargetView]
    path_filters: list[PathFilterDecision]


class GitHubInstallationView(Doc):
    """A GitHub App installation the organization holds (connected from the dashboard)."""

    installation_id: int
    account: str
    account_type: Literal["Organization", "User"]
    verified_github_user: str
    claimed_by: str
    claimed_at: str
    bindings: int


class GitHubInstallationList(Doc):
    installations: list[GitHubInstallationView]


class GitHubInstallationReleased(Doc):
    installation_id: int
    released: Literal[True]


class GitHubUnbound(Doc):
    workspace_id: str
    bound: Literal[False]


class GitLabBindingView(Doc):
    """A workspace's GitLab project binding (its access token is never shown)."""

    workspace_id: str
    provider: Literal["gitlab"]
    base_url: str = Field(description="The GitLab instance, e.g. https://gitlab.com")
    project: str = Field(description="The project's numeric ID or full path")
    branch: str
    working_directory: str
    push_run_kind: Literal["plan_and_apply", "plan_only"]
    trigger_patterns: list[str] = Field(
        description="Globs over repository paths: a change runs only if a changed file "
        "matches one (or lies in the working directory); empty: every change runs"
    )
    ignore_patterns: list[str] = Field(
        description="Globs over repository paths: changed files matching one never count"
    )


class GitLabBound(GitLabBindingView):
    webhook_token: str = Field(
        description="The project webhook's secret token: shown once, only a digest is kept"
    )


class GitLabUnbound(Doc):
    workspace_id: str
    bound: Literal[False]


class WebhookAck(Doc):
    """What a delivery did: accepted (a source ingestion started) or ignored, and why."""

    model_config = ConfigDict(extra="allow")
    delivery_id: str
    event: str
    status: Literal["accepted", "ignored"]
    source_id: str | None = None
    reason: str | None = None
    duplicate: bool = False


def webhook_responses() -> dict[int, Any]:
    success = {"description": "Accepted", "content": {JSON: {"model": WebhookAck}}}
    declared: dict[int, Any] = {202: success, 200: {**success, "description": "Ignored"}}
    for code in (400, 401, 409, 413, 422, 503):
        declared[code] = _error(code)
    return declared


RUNNER_RESULT = "/api/v1/runner/result"


def with_runner_report(document: str) -> str:
    """The document with the runner report's wire form described on its route.

    The route takes a plain JSON object because ``runner_reports.from_wire`` is the
    one validator; the schema documents what that reader accepts (a test holds them
    to the same fields)."""
    import json

    from runplane.domain.runner_reports import result_schema

    parsed = json.loads(document)
    body = parsed["paths"][RUNNER_RESULT]["post"]["requestBody"]["content"]["application/json"]
    body["schema"] = {
        "title": "RunnerReport",
        "description": "A runner's report of its phase, discriminated by outcome",
        **result_schema(),
    }
    return json.dumps(parsed)
