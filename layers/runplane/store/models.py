"""pynamodb models of the single table. Keys are built only by the helpers here."""

from __future__ import annotations

from typing import Any, TypeVar

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
)
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from runplane.store.table import GSI1, PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE

_Item = TypeVar("_Item", bound="TableItem")


class Gsi1(GlobalSecondaryIndex[_Item]):  # type: ignore[no-untyped-call]
    class Meta:
        index_name = GSI1.name
        projection = AllProjection()

    gsi1pk = UnicodeAttribute(hash_key=True, attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(range_key=True, attr_name=GSI1.sort_key)


class TableItem(Model):
    """Every item of the table: the key schema and the TTL attribute."""

    class Meta:
        table_name = "runplane"
        region = "us-east-1"
        host: str | None = None
        billing_mode = "PAY_PER_REQUEST"

    pk = UnicodeAttribute(hash_key=True, attr_name=PARTITION_KEY)
    sk = UnicodeAttribute(range_key=True, attr_name=SORT_KEY)
    expires_at = TTLAttribute(null=True, attr_name=TTL_ATTRIBUTE)


def bind(table_name: str, region: str, host: str | None = None) -> None:
    """Point every model at a table. Called once by the settings factory or a test.

    Binding again to the same table keeps the connections: each holds a botocore
    client, and building one costs tens of milliseconds."""
    meta = TableItem.Meta
    if (meta.table_name, meta.region, meta.host) == (table_name, region, host):
        return
    TableItem.Meta.table_name = table_name
    TableItem.Meta.region = region
    TableItem.Meta.host = host
    for model in _all_models():
        model._connection = None


def _all_models() -> list[type[TableItem]]:
    found: list[type[TableItem]] = [TableItem]
    for model in found:
        found.extend(model.__subclasses__())
    return found


# -- keys ---------------------------------------------------------------------


def org_key(org_id: str) -> tuple[str, str]:
    return f"ORG#{org_id}", "ORG"


def org_name_key(name: str) -> tuple[str, str]:
    return f"ORGNAME#{name}", "ORGNAME"


def workspace_key(workspace_id: str) -> tuple[str, str]:
    return f"WS#{workspace_id}", "WS"


def tally_key(workspace_id: str) -> tuple[str, str]:
    """The tally of a workspace's variables (``store.workspace_variables``)."""
    return f"WS#{workspace_id}", "VARTALLY"


def drift_key(workspace_id: str) -> tuple[str, str]:
    """A workspace's drift record (``store.schedules``)."""
    return f"WS#{workspace_id}", "DRIFT"


def cloud_settings_key(workspace_id: str) -> tuple[str, str]:
    """A workspace's cloud settings (``store.cloud_settings``)."""
    return f"WS#{workspace_id}", "CLOUD"


def auto_destroy_key(workspace_id: str) -> tuple[str, str]:
    """A workspace's auto-destroy (``store.auto_destroy``)."""
    return f"WS#{workspace_id}", "AUTODESTROY"


def workspace_name_key(org_id: str, name: str) -> tuple[str, str]:
    return f"ORG#{org_id}", f"WSNAME#{name}"


def waiter_key(workspace_id: str, seq: int) -> tuple[str, str]:
    return f"WS#{workspace_id}", f"WAIT#{seq:012d}"


WAITER_PREFIX = "WAIT#"


def waiter_place_key(workspace_id: str, run_id: str) -> tuple[str, str]:
    return f"WS#{workspace_id}", f"QUEUED#{run_id}"


def run_key(run_id: str) -> tuple[str, str]:
    return f"RUN#{run_id}", "RUN"


def stage_key(run_id: str, stage: str) -> tuple[str, str]:
    return f"RUN#{run_id}", f"STAGE#{stage}"


STAGE_PREFIX = "STAGE#"
AUDIT_PREFIX = "AUDIT#"


def run_audit_key(run_id: str, version: int) -> tuple[str, str]:
    """A run's audit events are keyed by the run version they produced: one per move."""
    return f"RUN#{run_id}", f"{AUDIT_PREFIX}{version:010d}"


# -- items --------------------------------------------------------------------


class OrganizationItem(TableItem):
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    created_at = UTCDateTimeAttribute()


class NameClaimItem(TableItem):
    """Makes a name unique within its scope: put only if absent."""

    owner_id = UnicodeAttribute()


class WorkspaceItem(TableItem):
    gsi1: Gsi1[WorkspaceItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    created_at = UTCDateTimeAttribute()
    # Writer authority. The fence only ever grows.
    fence = NumberAttribute(default=0)
    writer_run_id = UnicodeAttribute(null=True)
    writer_since = UTCDateTimeAttribute(null=True)
    lock_id = UnicodeAttribute(null=True)
    lock_run_id = UnicodeAttribute(null=True)
    locked_at = UTCDateTimeAttribute(null=True)
    # Who holds the lock (a principal reference such as "token:tok-..." or
    # "run:run-..."), how to name them to a person, and why they locked.
    lock_holder = UnicodeAttribute(null=True)
    lock_holder_display = UnicodeAttribute(null=True)
    lock_reason = UnicodeAttribute(null=True)
    # The current state version: moved only by a conditional write naming it.
    current_sv_id = UnicodeAttribute(null=True)
    current_serial = NumberAttribute(null=True)
    current_lineage = UnicodeAttribute(null=True)
    # The current version's publication facts (``domain.publications.Publication`` as
    # JSON), set by the same conditional write that moves ``current_sv_id``; absent on a
    # workspace last moved before they were, or by recovery.
    current_publication = JSONAttribute(null=True)
    terraform_version = UnicodeAttribute(null=True)
    description = UnicodeAttribute(null=True)
    approval_window_seconds = NumberAttribute(null=True)
    # The two-person rule as JSON (domain/second_approval.py); absent: off.
    second_approval = UnicodeAttribute(null=True)
    # Absent: "local" (clients run the engine; remote mode runs it here).
    execution_mode = UnicodeAttribute(null=True)
    tag_names: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    # How many times the settings changed (absent: never), for stale-form refusals.
    settings_version = NumberAttribute(null=True)
    # FIFO queue of runs waiting for the reservation: seq numbers the next
    # waiter, length counts those still waiting.
    queue_seq = NumberAttribute(default=0)
    queue_length = NumberAttribute(default=0)
    # Notification destinations and dependent workspaces (run triggers from it), each
    # count changed in the write of each change; 0 at creation. Absent on a workspace
    # made before they were counted: a change then counts up from UNCOUNTED, which
    # reads as not counted (``store.workspaces.counted``).
    destination_count = NumberAttribute(null=True)
    dependent_count = NumberAttribute(null=True)
    # A deleted workspace's item stays for its history (runs, state versions and audit
    # name it), out of its organization's listing, and reads as not found.
    # A pull request's preview: the bound workspace it was made from (never updated).
    preview_of = UnicodeAttribute(null=True)
    deleted_at = UTCDateTimeAttribute(null=True)
    deleted_by = UnicodeAttribute(null=True)


class WaiterItem(TableItem):
    workspace_id = UnicodeAttribute()
    run_id = UnicodeAttribute()
    seq = NumberAttribute()
    token = UnicodeAttribute()
    enqueued_at = UTCDateTimeAttribute()


class WaiterPlaceItem(TableItem):
    """Where a run waits in its workspace's queue, so that it is found with one read
    instead of by walking the queue (written and deleted with its waiter)."""

    workspace_id = UnicodeAttribute()
    run_id = UnicodeAttribute()
    seq = NumberAttribute()


class RunItem(TableItem):
    gsi1: Gsi1[RunItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    run_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    kind = UnicodeAttribute()
    status = UnicodeAttribute()
    version = NumberAttribute()
    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()
    plan_has_changes = BooleanAttribute(null=True)
    status_reason = UnicodeAttribute(null=True)
    # Recorded at creation: what ran it, not what is deployed now.
    definition_version = UnicodeAttribute(null=True)
    build_sha = UnicodeAttribute(null=True)
    created_by = UnicodeAttribute(null=True)
    # The state version the run planned against, pinned when planning starts.
    predecessor_sv_id = UnicodeAttribute(null=True)
    approval_expires_at = UTCDateTimeAttribute(null=True)
    runner_release = UnicodeAttribute(null=True)


class RunStageItem(TableItem):
    run_id = UnicodeAttribute()
    stage = UnicodeAttribute()
    status = UnicodeAttribute()
    started_at = UTCDateTimeAttribute(null=True)
    finished_at = UTCDateTimeAttribute(null=True)


class AuditEventItem(TableItem):
    gsi1: Gsi1[AuditEventItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    event_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    subject_id = UnicodeAttribute()
    type = UnicodeAttribute()
    actor = UnicodeAttribute()
    at = UTCDateTimeAttribute()
    details: MapAttribute[str, Any] = MapAttribute(default=dict)  # type: ignore[no-untyped-call]


def security_record_key(org_id: str, at_and_id: str) -> tuple[str, str]:
    """A security audit record: its organization's trail, in time order."""
    return f"AUDITLOG#{org_id}", at_and_id


class SecurityRecordItem(TableItem):
    """One record of the security audit trail (``domain.audit.AuditRecord``): put once,
    never updated. GSI1 holds every organization's records of one day, for the export."""

    gsi1: Gsi1[SecurityRecordItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    record_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    at = UTCDateTimeAttribute()
    action = UnicodeAttribute()
    actor = UnicodeAttribute()
    actor_display = UnicodeAttribute()
    source_address = UnicodeAttribute(null=True)
    object_kind = UnicodeAttribute()
    object_id = UnicodeAttribute()
    outcome = UnicodeAttribute()
    details: MapAttribute[str, Any] = MapAttribute(default=dict)  # type: ignore[no-untyped-call]


class AuditExportWatermarkItem(TableItem):
    """How far the audit export has written: the GSI1 sort key of the last exported
    record, and the end of the batch claimed but not yet finished; replaced only from
    the values an exporter read (a conditional write)."""

    exported_through = UnicodeAttribute()
    pending = UnicodeAttribute(null=True)


def artifact_key(artifact_id: str) -> tuple[str, str]:
    return f"ART#{artifact_id}", "ART"


def capability_key(handle_hash: str) -> tuple[str, str]:
    return f"CAP#{handle_hash}", "CAP"


def session_key(secret_hash: str) -> tuple[str, str]:
    return f"SESSION#{secret_hash}", "SESSION"


def jti_claim_key(jti: str) -> tuple[str, str]:
    return f"JTI#{jti}", "JTI"


class ArtifactItem(TableItem):
    artifact_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    kind = UnicodeAttribute()
    status = UnicodeAttribute()
    object_key = UnicodeAttribute()
    # The KMS-wrapped data key; KMS unwraps it only with the artifact's context.
    wrapped_key = BinaryAttribute(legacy_encoding=False)
    chunk_size = NumberAttribute()
    size = NumberAttribute(null=True)
    sha256 = UnicodeAttribute(null=True)
    etag = UnicodeAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    registered_at = UTCDateTimeAttribute(null=True)
    # Set when a runner session was granted the upload: only it may register.
    session_id = UnicodeAttribute(null=True)
    # The runner attempt whose session registered it: a report names only its own.
    attempt_id = UnicodeAttribute(null=True)


class CapabilityItem(TableItem):
    jti = UnicodeAttribute()
    org_id = UnicodeAttribute()
    kind = UnicodeAttribute()
    run_id = UnicodeAttribute()
    attempt_id = UnicodeAttribute()
    phase = UnicodeAttribute()
    sandbox_id = UnicodeAttribute()
    inputs: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    created_at = UTCDateTimeAttribute()
    valid_until = UTCDateTimeAttribute()
    redeemed_at = UTCDateTimeAttribute(null=True)
    request_digest = UnicodeAttribute(null=True)
    result = JSONAttribute(null=True)


class RunnerSessionItem(TableItem):
    gsi1: Gsi1[RunnerSessionItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    session_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    jti = UnicodeAttribute()
    run_id = UnicodeAttribute()
    attempt_id = UnicodeAttribute()
    phase = UnicodeAttribute()
    sandbox_id = UnicodeAttribute()
    inputs: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    created_at = UTCDateTimeAttribute()
    valid_until = UTCDateTimeAttribute()
    revoked_at = UTCDateTimeAttribute(null=True)


class JtiClaimItem(TableItem):
    """The runner-session store consumes each bootstrap JTI exactly once."""

    session_id = UnicodeAttribute()


def api_token_key(token_hash: str) -> tuple[str, str]:
    return f"TOKEN#{token_hash}", "TOKEN"


def state_version_key(sv_id: str) -> tuple[str, str]:
    return f"SV#{sv_id}", "SV"


def upload_token_key(token_hash: str) -> tuple[str, str]:
    return f"UPLOAD#{token_hash}", "UPLOAD"


def org_event_key(org_id: str, at_and_id: str) -> tuple[str, str]:
    return f"ORG#{org_id}", f"{AUDIT_PREFIX}{at_and_id}"


class ApiTokenItem(TableItem):
    gsi1: Gsi1[ApiTokenItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    token_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    permissions: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    created_at = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()
    revoked_at = UTCDateTimeAttribute(null=True)
    # A team token's team (domain/teams.py).
    team_id = UnicodeAttribute(null=True)


class StateVersionItem(TableItem):
    gsi1: Gsi1[StateVersionItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    sv_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    serial = NumberAttribute()
    lineage = UnicodeAttribute()
    md5 = UnicodeAttribute()
    sha256 = UnicodeAttribute(null=True)
    size = NumberAttribute(null=True)
    artifact_id = UnicodeAttribute(null=True)
    json_artifact_id = UnicodeAttribute(null=True)
    status = UnicodeAttribute()
    forced = BooleanAttribute(default=False)
    created_at = UTCDateTimeAttribute()
    finalized_at = UTCDateTimeAttribute(null=True)
    created_by = UnicodeAttribute()
    predecessor_id = UnicodeAttribute(null=True)
    # Provenance when a runner session published it.
    provenance = JSONAttribute(null=True)
    # When the JSON state of a pending version arrived: a claim on that upload.
    claimed_at = UTCDateTimeAttribute(null=True)
    # The resource instances it manages, counted when published (absent: not counted).
    resources = NumberAttribute(null=True)


class UploadTokenItem(TableItem):
    """A single-purpose, short-lived upload URL's secret (hashed)."""

    sv_id = UnicodeAttribute()
    purpose = UnicodeAttribute()
    valid_until = UTCDateTimeAttribute()
    used_at = UTCDateTimeAttribute(null=True)


PART_PREFIX = "PART#"


def run_part_key(run_id: str, part: str) -> tuple[str, str]:
    """The run's own facts live beside it: input, plan, policy, approval, apply, attempt#..."""
    return f"RUN#{run_id}", f"{PART_PREFIX}{part}"


OUTBOX_PREFIX = "EVENT#"


def outbox_key(run_id: str, event_id: str) -> tuple[str, str]:
    """A run's outbox events live beside it, named by their (deterministic) event ID."""
    return f"RUN#{run_id}", f"{OUTBOX_PREFIX}{event_id}"


def configuration_version_key(cv_id: str) -> tuple[str, str]:
    return f"CV#{cv_id}", "CV"


def configurations_partition(workspace_id: str) -> str:
    """A workspace's uploaded configuration versions, newest last (by upload time)."""
    return f"WS#{workspace_id}#CVS"


class ConfigurationVersionItem(TableItem):
    # Set on upload: schedules find the workspace's latest configuration through it.
    gsi1: Gsi1[ConfigurationVersionItem] = Gsi1()
    gsi1pk = UnicodeAttribute(null=True, attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(null=True, attr_name=GSI1.sort_key)
    cv_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    status = UnicodeAttribute()
    upload_id = UnicodeAttribute()
    artifact_id = UnicodeAttribute(null=True)
    sha256 = UnicodeAttribute(null=True)
    size = NumberAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    uploaded_at = UTCDateTimeAttribute(null=True)
    # Created through the TFE API: plan-only, and the hash of its one upload URL's secret.
    speculative = BooleanAttribute(null=True)
    upload_token_hash = UnicodeAttribute(null=True)
    # Recorded from a GitHub commit: the source ingestion it came from.
    source_id = UnicodeAttribute(null=True)


class OutboxItem(TableItem):
    """A run event to queue, put in the transaction of the change it announces; the
    table's stream carries it to the relay (services/event_relay.py)."""

    run_id = UnicodeAttribute()
    event_id = UnicodeAttribute()
    # The queue message, JSON: public IDs and statuses only.
    message = UnicodeAttribute()
    created_at = UTCDateTimeAttribute()


class RunPartItem(TableItem):
    """One immutable or slowly changing fact of a run, as a JSON document.

    Input snapshot, plan evidence, policy check, approval, apply record and
    attempts are small documents read together with the run; each write is
    conditioned on its own ``state`` attribute.
    """

    run_id = UnicodeAttribute()
    part = UnicodeAttribute()
    state = UnicodeAttribute()
    body = JSONAttribute(default=dict)
    # A workflow task token waiting on this part (attempts, approval): never logged.
    token = UnicodeAttribute(null=True)
    # An attempt's runner sessions, by their items' keys (hashes, not the secrets): what
    # the write closing the attempt revokes.
    session_keys = UnicodeSetAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()


class RecoveryItem(TableItem):
    """The operator recovery of one run: prepared (leased to its operator), then completed.

    Every write is conditioned on ``state`` and ``generation``: a takeover bumps
    the generation, so the operator it replaced can no longer commit.
    """

    run_id = UnicodeAttribute()
    recovery_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    state = UnicodeAttribute()
    holder = UnicodeAttribute()
    generation = NumberAttribute()
    fingerprint = UnicodeAttribute()
    lease_expires_at = UTCDateTimeAttribute()
    # The copied target state (import_emergency_state), recorded once.
    target_artifact_id = UnicodeAttribute(null=True)
    body = JSONAttribute(default=dict)
    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()


def recovery_key(run_id: str) -> tuple[str, str]:
    return f"RUN#{run_id}", "RECOVERY"


def launch_controls_key(scope: str) -> tuple[str, str]:
    """``GLOBAL`` or an organization ID."""
    return "LAUNCH", f"CONTROLS#{scope}"


class LaunchControlsItem(TableItem):
    scope = UnicodeAttribute()
    launches_enabled = BooleanAttribute(default=True)
    suspended = BooleanAttribute(default=False)
    allowed_regions: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    runner_releases: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    policy_runtimes: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    max_sandboxes = NumberAttribute(null=True)
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()


def sandbox_count_key(scope: str) -> tuple[str, str]:
    """The running-sandbox count of ``GLOBAL`` or an organization."""
    return "LAUNCH", f"SANDBOXES#{scope}"


class SandboxCountItem(TableItem):
    scope = UnicodeAttribute()
    active = NumberAttribute(default=0)


def policy_set_key(org_id: str, name: str) -> tuple[str, str]:
    """An organization's policy set: its current version and where it is attached."""
    return f"POLICY#{org_id}", f"SET#{name}"


def policy_set_version_key(org_id: str, name: str, digest: str) -> tuple[str, str]:
    """One published, immutable version, addressed by its content digest."""
    return f"POLICY#{org_id}", f"VERSION#{name}#{digest}"


class PolicySetItem(TableItem):
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    current_digest = UnicodeAttribute()
    current_artifact_id = UnicodeAttribute()
    # The policies of the current version: [{"name", "enforcement"}], for listings.
    policies = JSONAttribute(default=list)
    versions = NumberAttribute(default=1)
    attached_workspaces: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    all_workspaces = BooleanAttribute(default=False)
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()
    version = NumberAttribute(default=1)


class PolicySetVersionItem(TableItem):
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    digest = UnicodeAttribute()
    artifact_id = UnicodeAttribute()
    number = NumberAttribute()
    policies = JSONAttribute(default=list)
    published_at = UTCDateTimeAttribute()
    published_by = UnicodeAttribute()


def policy_set_tally_key(org_id: str) -> tuple[str, str]:
    """How many policy sets an organization has (its sort key is outside ``SET#``)."""
    return f"POLICY#{org_id}", "TALLY"


class PolicySetTallyItem(TableItem):
    """Changed in the transaction of every head's creation; an organization created
    before it existed has none until its next set's creation counts them."""

    org_id = UnicodeAttribute()
    sets = NumberAttribute()


LOG_CHUNK_PREFIX = "LOGCHUNK#"


def log_chunk_key(run_id: str, attempt_id: str, sequence: int) -> tuple[str, str]:
    """A live log chunk lives beside its run, ordered within its attempt."""
    return f"RUN#{run_id}", f"{LOG_CHUNK_PREFIX}{attempt_id}#{sequence:06d}"


class LogChunkItem(TableItem):
    """One chunk of a phase's live log: immutable, its bytes in an encrypted artifact."""

    run_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    attempt_id = UnicodeAttribute()
    phase = UnicodeAttribute()
    sequence = NumberAttribute()
    offset = NumberAttribute()
    size = NumberAttribute()
    # Where the chunk ends: the next chunk must start exactly here.
    end = NumberAttribute()
    sha256 = UnicodeAttribute()
    artifact_id = UnicodeAttribute()
    created_at = UTCDateTimeAttribute()


# -- GitHub sources -------------------------------------------------------------


def github_binding_key(workspace_id: str) -> tuple[str, str]:
    return f"WS#{workspace_id}", "GITHUB"


def github_route_key(repository: str, workspace_id: str) -> tuple[str, str]:
    """A repository's bound workspaces, found with one query when its webhook arrives."""
    return f"GHREPO#{repository}", f"WS#{workspace_id}"


def github_preview_key(parent_workspace_id: str, pull_request: int) -> tuple[str, str]:
    """The preview workspace a bound workspace's pull request got."""
    return f"WS#{parent_workspace_id}", f"GHPREVIEW#{pull_request}"


def github_report_key(key: str) -> tuple[str, str]:
    """A pull request's comment or a check run Runplane posted (``domain.pr_comments``)."""
    return f"GHREPORT#{key}", "GHREPORT"


def github_delivery_key(delivery_id: str) -> tuple[str, str]:
    return f"GHDELIVERY#{delivery_id}", "GHDELIVERY"


def source_key(source_id: str) -> tuple[str, str]:
    return f"SRC#{source_id}", "SRC"


class GitHubBindingItem(TableItem):
    """A workspace's GitHub binding; also stored under the repository as its route."""

    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    repository = UnicodeAttribute()
    branch = UnicodeAttribute()
    working_directory = UnicodeAttribute(default="")
    installation_id = NumberAttribute()
    push_kind = UnicodeAttribute()
    # Absent on bindings made before preview workspaces existed: false.
    pull_request_workspaces = BooleanAttribute(null=True)
    pull_request_auto_apply_destroy = BooleanAttribute(null=True)
    # Path filters (absent on bindings made before they existed: none).
    trigger_patterns = JSONAttribute(null=True)
    ignore_patterns = JSONAttribute(null=True)
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()


def gitlab_binding_key(workspace_id: str) -> tuple[str, str]:
    return f"WS#{workspace_id}", "GITLAB"


class GitLabBindingItem(TableItem):
    """A workspace's GitLab binding: its project access token sealed (wrapped data key
    and ciphertext), its webhook token only as the digest of the secret part."""

    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    base_url = UnicodeAttribute()
    project = UnicodeAttribute()
    branch = UnicodeAttribute()
    working_directory = UnicodeAttribute(default="")
    push_kind = UnicodeAttribute()
    access_token_wrapped_key = BinaryAttribute(legacy_encoding=False)
    access_token_sealed = BinaryAttribute(legacy_encoding=False)
    hook_secret_sha256 = UnicodeAttribute()
    # Path filters (absent on bindings made before they existed: none).
    trigger_patterns = JSONAttribute(null=True)
    ignore_patterns = JSONAttribute(null=True)
    updated_at = UTCDateTimeAttribute()


class GitHubPreviewItem(TableItem):
    """The preview workspace a bound workspace's pull request got (kept under the bound
    workspace, one per pull request), and when the pull request closed."""

    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    parent_workspace_id = UnicodeAttribute()
    repository = UnicodeAttribute()
    pull_request = NumberAttribute()
    created_by = UnicodeAttribute()
    created_at = UTCDateTimeAttribute()
    workspace_created = BooleanAttribute(default=False)
    closed_at = UTCDateTimeAttribute(null=True)


class GitHubDeliveryItem(TableItem):
    """One webhook delivery, put once by its delivery ID; a repeat returns ``outcome``."""

    delivery_id = UnicodeAttribute()
    event = UnicodeAttribute()
    body_sha256 = UnicodeAttribute()
    received_at = UTCDateTimeAttribute()
    status_code = NumberAttribute()
    outcome = JSONAttribute(default=dict)
    source_id = UnicodeAttribute(null=True)


class SourceIngestionItem(TableItem):
    """A commit fetched from GitHub for one delivery, and the runs it created.

    ``targets``: one entry per bound workspace, with the configuration version,
    artifact and run recorded for it. Never holds tokens or repository content."""

    source_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    delivery_id = UnicodeAttribute()
    event = UnicodeAttribute()
    action = UnicodeAttribute(null=True)
    repository = UnicodeAttribute()
    branch = UnicodeAttribute()
    ref = UnicodeAttribute()
    commit_sha = UnicodeAttribute()
    installation_id = NumberAttribute()
    pull_request = NumberAttribute(null=True)
    # Who sent the delivery and what the commit or pull request says: for policies
    # and the review (``domain.github.SourceEvent``).
    sender = UnicodeAttribute(null=True)
    commit_message = UnicodeAttribute(null=True)
    pull_request_title = UnicodeAttribute(null=True)
    pull_request_author = UnicodeAttribute(null=True)
    status = UnicodeAttribute()
    workflow_id = UnicodeAttribute()
    archive_sha256 = UnicodeAttribute(null=True)
    archive_size = NumberAttribute(null=True)
    targets = JSONAttribute(default=list)
    reason = UnicodeAttribute(null=True)
    # A push's previous head and whether it was forced; what each bound workspace's
    # path filters decided (``domain.path_filters.PathDecision``).
    before_sha = UnicodeAttribute(null=True)
    forced = BooleanAttribute(null=True)
    path_decisions = JSONAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()


class GitHubReportItem(TableItem):
    """A comment or check run posted on GitHub, claimed before it is posted so two
    reporters never post two; ``github_id`` once GitHub answered."""

    org_id = UnicodeAttribute()
    claimed_at = UTCDateTimeAttribute()
    github_id = NumberAttribute(null=True)
    source_id = UnicodeAttribute(null=True)
    source_created_at = UTCDateTimeAttribute(null=True)
