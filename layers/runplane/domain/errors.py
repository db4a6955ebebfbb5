"""Typed errors. Each carries a machine-readable code, an HTTP status and a
sentence a person can act on. Messages name public IDs only, never secrets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class RunplaneError(Exception):
    code = "RUNPLANE_ERROR"
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_body(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class InvalidInput(RunplaneError):
    """A request that cannot be valid; ``pointer`` names the field (JSON pointer)."""

    code = "INVALID_INPUT"
    http_status = 422

    def __init__(self, message: str, pointer: str | None = None) -> None:
        super().__init__(message)
        self.pointer = pointer


class InvalidBody(RunplaneError):
    """A request body that cannot be read at all: not UTF-8, not JSON, or nested
    deeper than any document we accept. Nothing was done."""

    code = "INVALID_BODY"
    http_status = 400


class TooLarge(RunplaneError):
    """Input over a documented size bound (or one the database would refuse); nothing
    was stored. ``pointer`` names the field when one is to blame."""

    code = "TOO_LARGE"
    http_status = 413

    def __init__(self, message: str, pointer: str | None = None) -> None:
        super().__init__(message)
        self.pointer = pointer


class VariablesTooLarge(TooLarge):
    code = "VARIABLES_TOO_LARGE"


class ItemTooLarge(TooLarge):
    """A write over DynamoDB's 400 KB item limit: the request carried more than fits."""

    code = "ITEM_TOO_LARGE"

    def __init__(self) -> None:
        super().__init__(
            "the request carries more than a record can hold (400 KB); nothing was written"
        )


class NotFound(RunplaneError):
    code = "NOT_FOUND"
    http_status = 404

    def __init__(self, kind: str, public_id: str, pointer: str | None = None) -> None:
        super().__init__(f"{kind} {public_id} was not found")
        self.kind = kind
        self.public_id = public_id
        # The request field that named it, when it came from a body (JSON pointer).
        self.pointer = pointer


class AlreadyExists(RunplaneError):
    code = "ALREADY_EXISTS"
    http_status = 409


class Conflict(RunplaneError):
    """A conditional write lost to another writer: the request was not applied."""

    code = "CONFLICT"
    http_status = 409


class ConcurrentChange(Conflict):
    """A fact the request was built on changed meanwhile; rebuilding it may succeed."""

    code = "CONCURRENT_CHANGE"


class PartTokenChanged(ConcurrentChange):
    """A run part's change expected a token (or none) and found another, its state as
    expected: what it holds now is ``token``."""

    def __init__(self, run_id: str, name: str, token: str | None) -> None:
        super().__init__(f"run {run_id}: the token of its {name} changed meanwhile")
        self.token = token


class SameApprover(RunplaneError):
    """The second approval a run needs came from the person who gave the first."""

    code = "SECOND_APPROVER_REQUIRED"
    http_status = 403


class NoDrift(Conflict):
    """Remediation asked of a workspace whose last check found no drift."""

    code = "NO_DRIFT"


class AutoDestroyUnderway(Conflict):
    """A postponement asked while the workspace's destroy run is already under way."""

    code = "AUTO_DESTROY_UNDERWAY"

    def __init__(self, workspace_id: str, run_id: str) -> None:
        super().__init__(
            f"the auto-destroy of workspace {workspace_id} is under way as run {run_id}: "
            f"reject or cancel that run (runplane run reject {run_id}), then postpone"
        )
        self.run_id = run_id


class IllegalTransition(Conflict):
    """The transition table has no row for this move (or its guard is false)."""

    code = "ILLEGAL_TRANSITION"

    def __init__(self, source: object, target: object, why: str) -> None:
        super().__init__(f"a run cannot move from {source} to {target}: {why}")
        self.source = source
        self.target = target


class IllegalPartMove(Conflict):
    """A run part's move table has no row for this move."""

    code = "ILLEGAL_PART_MOVE"

    def __init__(self, part: str, source: str, target: str) -> None:
        super().__init__(f"a run's {part} cannot move from {source} to {target}")
        self.part = part
        self.source = source
        self.target = target


class TransitionRejected(Conflict):
    """The run was not in the expected status and version; nothing was written.

    ``current`` is the run as the database holds it now (None if it is gone).
    """

    code = "TRANSITION_REJECTED"

    def __init__(self, run_id: str, expected: str, current: Mapping[str, Any] | None) -> None:
        if current is None:
            now = "it does not exist"
        else:
            now = f"it is {current.get('status')} at version {current.get('version')}"
        super().__init__(f"run {run_id} was expected {expected}, but {now}")
        self.run_id = run_id
        self.current = dict(current) if current is not None else None


class StaleFence(Conflict):
    """The caller's workspace lock or fence is no longer the current one."""

    code = "STALE_FENCE"

    def __init__(self, workspace_id: str, fence: int, current_fence: int | None) -> None:
        super().__init__(
            f"workspace {workspace_id}: fence {fence} is stale "
            f"(current fence is {current_fence}); this writer no longer has authority"
        )
        self.workspace_id = workspace_id
        self.fence = fence
        self.current_fence = current_fence


class ReservationNotNeeded(RunplaneError):
    """Only runs that may apply take the workspace writer reservation."""

    code = "RESERVATION_NOT_NEEDED"
    http_status = 409


class NotWriter(Conflict):
    """The run does not hold the workspace writer reservation it tried to use."""

    code = "NOT_WRITER"

    def __init__(self, workspace_id: str, run_id: str, holder: str | None) -> None:
        held = f"held by run {holder}" if holder else "not held by any run"
        super().__init__(
            f"run {run_id} does not hold the writer reservation of workspace "
            f"{workspace_id} (it is {held})"
        )
        self.workspace_id = workspace_id
        self.run_id = run_id
        self.holder = holder


class WorkspaceLocked(Conflict):
    code = "WORKSPACE_LOCKED"


class WorkspaceAlreadyLocked(WorkspaceLocked):
    """A lock request while the workspace is locked: whoever asks, as TFE does.

    A second lock by the same credentials is refused too: two processes sharing
    one token must not both believe they hold the lock.
    """

    def __init__(self, workspace_id: str, holder: str | None) -> None:
        super().__init__(
            f"workspace {workspace_id} is already locked by {holder or 'someone'}; wait for "
            "its holder to unlock it, or ask someone with workspace:force-unlock to release it"
        )
        self.workspace_id = workspace_id


class WorkspaceNotLocked(Conflict):
    code = "WORKSPACE_NOT_LOCKED"

    def __init__(self, workspace_id: str) -> None:
        super().__init__(f"workspace {workspace_id} is not locked")
        self.workspace_id = workspace_id


class WorkspaceHeldByRun(WorkspaceLocked):
    """A run holds the workspace's writer authority: native clients must wait or recover."""

    code = "WORKSPACE_HELD_BY_RUN"

    def __init__(
        self,
        workspace_id: str,
        run_id: str,
        status: str | None = None,
        needs_recovery: bool = False,
    ) -> None:
        held = f"workspace {workspace_id} is held by run {run_id}"
        if status:
            held += f" (status {status})"
        if needs_recovery:
            advice = (
                "an operator must complete that run's recovery (runplane run recover) "
                "before retrying"
            )
            # Not 409: native clients turn any 409 on a lock into a bare "workspace
            # already locked"; a 423 reaches the person with this sentence.
            self.code = "WORKSPACE_RECOVERY_PENDING"
            self.http_status = 423
        else:
            advice = "wait for that run to finish, or cancel it, before retrying"
        super().__init__(f"{held}; {advice}; runplane run show {run_id} shows that run")
        self.workspace_id = workspace_id
        self.run_id = run_id


class WorkspaceNotEmpty(Conflict):
    """A deletion of a workspace whose current state still manages resources, not forced."""

    code = "WORKSPACE_NOT_EMPTY"

    def __init__(self, workspace_id: str, name: str, resources: int) -> None:
        noun = "resource" if resources == 1 else "resources"
        super().__init__(
            f"workspace {workspace_id} still manages {resources} {noun} in its current state; "
            "nothing was deleted: destroy them first with a destroy run "
            f"(runplane run create --workspace {name} --dir DIR --destroy, or terraform "
            "destroy), or delete it anyway, leaving them unmanaged, with "
            f"runplane workspace delete {name} --force --reason TEXT (audited)"
        )
        self.workspace_id = workspace_id
        self.resources = resources


class WorkspaceBusy(Conflict):
    """A deletion of a workspace a run or a lock is using: forcing it would orphan them."""

    code = "WORKSPACE_BUSY"

    def __init__(self, workspace_id: str, why: str) -> None:
        super().__init__(
            f"workspace {workspace_id} is in use ({why}); nothing was deleted: wait for it to "
            "end, or cancel it or release the lock, and try again (--force does not skip this)"
        )
        self.workspace_id = workspace_id


class TooMuchContention(RunplaneError):
    """Optimistic retries ran out; safe to retry the whole request later."""

    code = "CONTENTION"
    http_status = 503


# -- artifacts ------------------------------------------------------------------------


class ArtifactTooLarge(RunplaneError):
    code = "ARTIFACT_TOO_LARGE"
    http_status = 413

    def __init__(self, limit: int) -> None:
        super().__init__(f"the artifact exceeds the {limit:,}-byte limit; nothing was stored")
        self.limit = limit


class ArtifactCorrupt(RunplaneError):
    """Ciphertext that does not decrypt to exactly what was recorded.

    ``reason`` says which check failed; the message never includes content.
    """

    code = "ARTIFACT_CORRUPT"
    http_status = 422

    def __init__(self, artifact_id: str, reason: str, detail: str) -> None:
        super().__init__(f"artifact {artifact_id} failed verification ({reason}): {detail}")
        self.artifact_id = artifact_id
        self.reason = reason


class UploadTicketRefused(RunplaneError):
    """An upload's ticket that this session was not issued, or no longer holds.

    ``reason`` is ``malformed``, ``not_issued`` or ``expired``; nothing was written."""

    code = "UPLOAD_TICKET_REFUSED"
    http_status = 403

    def __init__(self, artifact_id: str, reason: str, detail: str) -> None:
        super().__init__(f"the upload of {artifact_id} was refused ({reason}): {detail}")
        self.artifact_id = artifact_id
        self.reason = reason


# -- capabilities and runner sessions --------------------------------------------------


class CapabilityRefused(RunplaneError):
    """Base of every refused redemption; none of them writes anything."""

    code = "CAPABILITY_REFUSED"
    http_status = 403


class UnknownCapability(CapabilityRefused):
    code = "CAPABILITY_UNKNOWN"
    http_status = 401

    def __init__(self) -> None:
        super().__init__("the capability handle is not valid")


class CapabilityExpired(CapabilityRefused):
    code = "CAPABILITY_EXPIRED"
    http_status = 401

    def __init__(self, jti: str) -> None:
        super().__init__(f"capability {jti} has expired")
        self.jti = jti


class CapabilityWrongBinding(CapabilityRefused):
    """Presented for another attempt, phase or sandbox than the one it is bound to."""

    code = "CAPABILITY_WRONG_BINDING"
    field = "binding"

    def __init__(self, jti: str) -> None:
        super().__init__(f"capability {jti} is bound to another {self.field}")
        self.jti = jti


class CapabilityWrongAttempt(CapabilityWrongBinding):
    code = "CAPABILITY_WRONG_ATTEMPT"
    field = "attempt"


class CapabilityWrongPhase(CapabilityWrongBinding):
    code = "CAPABILITY_WRONG_PHASE"
    field = "phase"


class CapabilityWrongSandbox(CapabilityWrongBinding):
    code = "CAPABILITY_WRONG_SANDBOX"
    field = "sandbox"


class CapabilityConsumed(CapabilityRefused):
    code = "CAPABILITY_CONSUMED"
    http_status = 409

    def __init__(self, jti: str, why: str = "it was already redeemed") -> None:
        super().__init__(f"capability {jti} cannot be redeemed again: {why}")
        self.jti = jti


class SessionRefused(RunplaneError):
    code = "SESSION_INVALID"
    http_status = 401

    def __init__(self, why: str) -> None:
        super().__init__(f"the runner session is not valid: {why}")


class SessionAttemptEnded(SessionRefused):
    """The session's attempt has closed: its sandbox is refused from then on."""

    def __init__(self) -> None:
        super().__init__("its attempt has ended")


class RunnerAuthorityRefused(RunplaneError):
    """A runner session asked for authority its attempt does not hold: a plan
    session, another attempt or sandbox, or an attempt that has ended."""

    code = "RUNNER_AUTHORITY_REFUSED"
    http_status = 403

    def __init__(self, run_id: str, why: str) -> None:
        super().__init__(f"run {run_id}: this runner session may not do that: {why}")
        self.run_id = run_id


class RunNotApplying(Conflict):
    """State may be written with a run's authority only while the run is applying."""

    code = "RUN_NOT_APPLYING"

    def __init__(self, run_id: str, status: object) -> None:
        super().__init__(f"run {run_id} is {status}, not applying; its runner may not write state")
        self.run_id = run_id


# -- state ------------------------------------------------------------------------------


class UploadUrlUsed(Conflict):
    code = "UPLOAD_URL_USED"

    def __init__(self, remedy: str = "create a new state version") -> None:
        super().__init__(f"this upload URL was already used; {remedy}")


class UploadUrlExpired(Conflict):
    code = "UPLOAD_URL_EXPIRED"
    http_status = 410

    def __init__(self, remedy: str = "create a new state version") -> None:
        super().__init__(f"this upload URL has expired; {remedy}")


class StateRejected(RunplaneError):
    """The uploaded state is not what its declaration says (checksum, serial, lineage),
    or not a state at all; ``pointer`` names the field (JSON pointer)."""

    code = "STATE_REJECTED"
    http_status = 422

    def __init__(self, message: str, pointer: str | None = None) -> None:
        super().__init__(message)
        self.pointer = pointer


class StateConflict(Conflict):
    """The state cannot follow the current one (lineage or serial)."""

    code = "STATE_CONFLICT"


# -- runs -------------------------------------------------------------------------------


class ApprovalExpired(Conflict):
    code = "APPROVAL_EXPIRED"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} expired before a decision was recorded; create a new run")
        self.run_id = run_id


class AlreadyDecided(Conflict):
    """Someone decided the run first (approved, rejected, canceled, or it ended): the
    request lost that race and wrote nothing. Retrying cannot succeed, so this is a
    409 naming the run's status (and its approval's), never a 'retry later'."""

    code = "ALREADY_DECIDED"

    def __init__(self, run_id: str, status: object, approval: str | None = None) -> None:
        now = f"it is {status}"
        if approval is not None:
            now += f" and its approval is {approval}"
        super().__init__(f"run {run_id} was already decided: {now}; nothing was written")
        self.run_id = run_id
        self.status = str(status)
        self.approval = approval

    def to_body(self) -> dict[str, str]:
        body = {**super().to_body(), "run_id": self.run_id, "status": self.status}
        if self.approval is not None:
            body["approval"] = self.approval
        return body


class RunEnded(Conflict):
    """A workflow step found its run already ended (canceled, rejected, expired...)."""

    code = "RUN_ENDED"

    def __init__(self, run_id: str, status: object) -> None:
        super().__init__(f"run {run_id} already ended: it is {status}")
        self.run_id = run_id


class _RunnerRefusal(RunplaneError):
    """A runner's call refused for what it presented: the body says how the run stands
    after it (``status``), the message why (``reason``)."""

    def __init__(self, run_id: str, status: object, reason: str) -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.status = str(status)

    def to_body(self) -> dict[str, str]:
        return {**super().to_body(), "run_id": self.run_id, "status": self.status}


class ReportRefused(_RunnerRefusal):
    """A runner's result that names an artifact it cannot vouch for (not its attempt's
    upload, of another kind, unregistered, or not the digest it states). The report was
    not taken: the run ended ``status`` with ``reason``, which is this message."""

    code = "REPORT_REFUSED"
    http_status = 422


class ApplyStartRefused(_RunnerRefusal, Conflict):
    """An apply start that can never succeed (the plan presented is not the approved
    one, or the approval and plan evidence disagree). ``status``: how the run stands
    after the refusal (``apply_failed`` when this refusal ended it)."""

    code = "APPLY_START_REFUSED"


class PolicyBindingRefused(Conflict):
    """A policy-check write out of order: nothing was written."""

    code = "policy_binding_refused"


class PolicyOverrideRequired(Conflict):
    code = "policy_override_required"

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id} failed a soft-mandatory policy: someone with policy:override "
            "must override it, with a reason, before it can be approved"
        )


class SandboxCapacityExhausted(RunplaneError):
    """Every concurrent-sandbox slot of a scope is taken; the start step retries later."""

    code = "sandbox_capacity_exhausted"
    http_status = 503
    retry_after_seconds = 60

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(f"the {scope} is running its limit of {limit} concurrent sandboxes")
        self.scope = scope
        self.limit = limit


class LaunchDenied(RunplaneError):
    """Fail-closed launch controls deny new work for now; nothing was created."""

    code = "service_unavailable"
    http_status = 503
    retry_after_seconds = 60

    def __init__(self, reason: str) -> None:
        super().__init__(f"new runs are not being launched: {reason}; retry later")
        self.reason = reason


# -- policy -----------------------------------------------------------------------------


class InvalidPolicySet(RunplaneError):
    """A policy set that cannot be published: malformed metadata, a bad name, a module
    over a size cap, or a module that does not parse. Nothing was stored."""

    code = "invalid_policy_set"
    http_status = 422


class PolicyModuleRefused(InvalidPolicySet):
    """A module uses a builtin outside the fixed, deterministic capabilities."""

    code = "policy_module_refused"

    def __init__(self, module: str, builtin: str, line: int) -> None:
        super().__init__(
            f"{module} line {line} calls {builtin}, which is not allowed: policies run "
            "with fixed, deterministic capabilities (no network, clock, randomness or "
            "runtime environment)"
        )
        self.module = module
        self.builtin = builtin
        self.line = line


class PolicyInputRootRefused(InvalidPolicySet):
    """A module reads an ``input`` root that its set's declared input shape does not
    provide: the rule would be undefined on every plan, which reads as passed."""

    code = "policy_input_root_unknown"

    def __init__(
        self, message: str, *, module: str, line: int, root: str, providers: tuple[str, ...]
    ) -> None:
        super().__init__(message)
        self.module = module
        self.line = line
        self.root = root
        self.providers = providers


class PolicyInputPathRefused(PolicyInputRootRefused):
    """A module reads a path below an ``input`` root that its set's input shape never
    provides (``input.resource_changes[_].change`` in the ``runplane`` shape)."""

    code = "policy_input_path_unknown"

    def __init__(
        self,
        message: str,
        *,
        module: str,
        line: int,
        root: str,
        path: str,
        providers: tuple[str, ...],
    ) -> None:
        super().__init__(message, module=module, line=line, root=root, providers=providers)
        self.path = path


class LoginLinkRefused(RunplaneError):
    """A dashboard login link that is unknown, already used or past its lifetime."""

    code = "LOGIN_LINK_REFUSED"
    http_status = 403

    def __init__(self) -> None:
        super().__init__(
            "this login link is not valid: it was already used or has expired; "
            "ask for a new one (runplane local up prints one)"
        )


class CsrfRefused(RunplaneError):
    """A state-changing dashboard request without the session's form token, or sent
    from another origin: nothing was changed."""

    code = "CSRF_REFUSED"
    http_status = 403

    def __init__(self, why: str) -> None:
        super().__init__(why)


class RunTriggerRefused(InvalidInput):
    """A run-trigger change that cannot be valid: self, past the limit, or a cycle."""

    code = "RUN_TRIGGER_REFUSED"


class AlreadyTriggered(ConcurrentChange):
    """The source run already queued a run in this workspace: nothing new was written."""

    code = "ALREADY_TRIGGERED"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"already queued as run {run_id}")
        self.run_id = run_id


class RunAlreadyExists(ConcurrentChange):
    """A run with this ID was created before (a retried creation that derives its run's
    ID): nothing new was written; ``run_id`` names the existing run."""

    code = "RUN_ALREADY_EXISTS"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} already exists; nothing was written")
        self.run_id = run_id


class SignInRefused(RunplaneError):
    """A hosted-UI sign-in that cannot complete: unknown or expired pre-session, state,
    nonce or audience mismatch, a refused code, a person who belongs to no
    organization. ``reason`` is machine-readable; nothing was created."""

    code = "SIGN_IN_REFUSED"
    http_status = 403

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{message} ({reason}); start again from the sign-in page")
        self.reason = reason


class SignInUnavailable(RunplaneError):
    """The identity provider could not be reached or answered with an error of its own."""

    code = "SIGN_IN_UNAVAILABLE"
    http_status = 503

    def __init__(self, why: str) -> None:
        super().__init__(f"{why}; try again in a minute")


# -- GitHub source ingestion ----------------------------------------------------------


class WebhookSignatureInvalid(RunplaneError):
    """A webhook whose ``X-Hub-Signature-256`` does not match its body: nothing was written."""

    code = "WEBHOOK_SIGNATURE_INVALID"
    http_status = 401

    def __init__(self) -> None:
        super().__init__(
            "the X-Hub-Signature-256 header does not match the body and the webhook "
            "secret; nothing was recorded"
        )


class WebhookTokenInvalid(RunplaneError):
    """A GitLab webhook whose ``X-Gitlab-Token`` is no binding's token: nothing was written."""

    code = "WEBHOOK_TOKEN_INVALID"
    http_status = 401

    def __init__(self) -> None:
        super().__init__(
            "the X-Gitlab-Token header is not the webhook token of a bound workspace; "
            "nothing was recorded"
        )


class WebhookReplayRefused(Conflict):
    """A delivery that is too old, or a delivery ID seen before with another body."""

    code = "WEBHOOK_REPLAY_REFUSED"


class WebhookTooLarge(TooLarge):
    code = "WEBHOOK_TOO_LARGE"


class GitHubNotConfigured(RunplaneError):
    """The deployment has no GitHub App configured (webhook secret or App key)."""

    code = "GITHUB_NOT_CONFIGURED"
    http_status = 503


class GitHubConnectRefused(RunplaneError):
    """Connecting a GitHub App installation to an organization failed a check: the
    browser did not start the flow, it took too long or was finished already, or the
    GitHub user does not administer the installation's account. ``reason`` is
    machine-readable; nothing was claimed."""

    code = "GITHUB_CONNECT_REFUSED"
    http_status = 403

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{message} ({reason})")
        self.reason = reason


class GitHubInstallationTaken(Conflict):
    """The installation is connected to another organization (or this one has as many
    installations as it may): nothing was claimed."""

    code = "GITHUB_INSTALLATION_TAKEN"


class GitHubUnavailable(RunplaneError):
    """GitHub did not answer as expected (network, 5xx, rate limit): worth retrying."""

    code = "GITHUB_UNAVAILABLE"
    http_status = 503


class SourceRefused(RunplaneError):
    """A commit that cannot become a configuration (missing working directory, a
    symlink or an unsafe path in the archive, over a size cap): final, not retried."""

    code = "SOURCE_REFUSED"
    http_status = 422


class ScheduleAlreadyFired(Conflict):
    """This schedule already fired for this scheduled time: nothing was written."""

    code = "SCHEDULE_ALREADY_FIRED"


class ScheduleMoved(Conflict):
    """The schedule changed while it fired (another fire started a run, or it was
    paused or deleted): nothing was written."""

    code = "SCHEDULE_MOVED"


class StaleDriftFinding(Conflict):
    """A run created later already wrote the workspace's drift record."""

    code = "STALE_DRIFT_FINDING"


class TooManySchedules(Conflict):
    code = "TOO_MANY_SCHEDULES"


class NotConfigured(RunplaneError):
    """A deployed function was not given the name of a resource it uses: it refuses to
    serve rather than address a default name that may exist in the same account."""

    code = "NOT_CONFIGURED"
    http_status = 503

    def __init__(self, setting: str) -> None:
        super().__init__(
            f"this function is not configured with RUNPLANE_{setting.upper()}; "
            "set it in the function's environment"
        )
        self.setting = setting


class CloudCredentialsRefused(RunplaneError):
    """The cloud refused to issue a phase's credentials (a role that does not trust the
    issuer, a duration over the role's maximum): the message says what to fix. Nothing
    was issued."""

    code = "cloud_credentials_refused"
    http_status = 422


class CloudCredentialsUnavailable(RunplaneError):
    """The cloud's token service or the signing key could not be reached; nothing was
    issued (the phase fails, a later run may succeed)."""

    code = "cloud_credentials_unavailable"
    http_status = 503


class CredentialsNotIssuable(Conflict):
    """A phase asked for credentials it may not have: the apply role before its attempt's
    apply started, or a role the run's credential decisions do not name."""

    code = "credentials_not_issuable"


# -- Runplane as an OpenID Connect issuer (docs/credentials.md) ----------------------------


class OidcIssuerNotConfigured(NotConfigured):
    """The deployment issues no workload identity tokens: its issuer URL or signing keys
    are not set. The discovery and JWKS endpoints answer 503 with this code."""

    code = "OIDC_ISSUER_NOT_CONFIGURED"

    def __init__(self, setting: str) -> None:
        super().__init__(setting)
        self.message = (
            "this deployment is not configured as an OpenID Connect issuer: "
            f"RUNPLANE_{setting.upper()} is not set"
        )
        self.args = (self.message,)


class SigningKeyUnavailable(RunplaneError):
    """KMS could not read or use a configured signing key (disabled, pending deletion,
    not an RSA signing key, or access denied). Names the key's place in the
    configuration, never its ARN."""

    code = "SIGNING_KEY_UNAVAILABLE"
    http_status = 503


class WorkloadIdentityRefused(InvalidInput):
    """A workload identity token that may not be issued as asked (a lifetime of zero or
    less, a phase already over, an apply without its plan digest, ...): nothing was
    signed."""

    code = "WORKLOAD_IDENTITY_REFUSED"


class ReservedVariableName(InvalidInput):
    """A variable name the runner or the platform owns (an environment variable such as
    ``PATH`` or ``TF_CLI_ARGS``): the message says who owns it and why; nothing was
    written."""

    code = "VARIABLE_NAME_RESERVED"


class VariableSetLimit(InvalidInput):
    """One variable set, variable or application past a documented count limit
    (docs/runs.md, "Variable sets"); nothing was written."""

    code = "VARIABLE_SET_LIMIT"


class SeparationOfDuties(RunplaneError):
    """The workspace separates duties: whoever created a run may not approve it."""

    code = "SEPARATION_OF_DUTIES"
    http_status = 403

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id} was created by you, and its workspace requires another person "
            "to approve it"
        )
        self.run_id = run_id
