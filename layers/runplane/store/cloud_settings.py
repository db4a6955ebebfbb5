"""A workspace's cloud settings in the table: one item per workspace (``WS#<id>`` /
``CLOUD``) at a version, replaced whole by each write, conditioned on the version read
and committed with its organization audit event (``services.repositories.cloud_settings``).

The external ID is stored only sealed (a KMS-wrapped data key and AES-GCM ciphertext
bound to the workspace); the audit event names the settings that changed, never it.
"""

from __future__ import annotations

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)

from runplane.domain.audit import AuditRecord
from runplane.domain.cloud_settings import (
    CloudSettings,
    SealedExternalId,
    StoredCloudSettings,
)
from runplane.domain.entities import AuditEvent
from runplane.domain.errors import ConcurrentChange
from runplane.store import audit
from runplane.store.models import TableItem, cloud_settings_key
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.security_records import security_record
from runplane.store.transaction import Item, Transaction


class CloudSettingsItem(TableItem):
    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    version = NumberAttribute()
    aws_plan_role_arn = UnicodeAttribute(null=True)
    aws_apply_role_arn = UnicodeAttribute(null=True)
    aws_external_id_set = BooleanAttribute(default=False)
    external_id_wrapped_key = BinaryAttribute(null=True, legacy_encoding=False)
    external_id_sealed = BinaryAttribute(null=True, legacy_encoding=False)
    aws_session_duration = NumberAttribute()
    aws_region = UnicodeAttribute(null=True)
    gcp_audience = UnicodeAttribute(null=True)
    azure_audience = UnicodeAttribute(null=True)
    azure_client_id = UnicodeAttribute(null=True)
    azure_tenant_id = UnicodeAttribute(null=True)
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()


def _stored(item: CloudSettingsItem) -> StoredCloudSettings:
    """The settings an item holds (the inverse of ``_item``)."""
    sealed = (
        SealedExternalId(item.external_id_wrapped_key, item.external_id_sealed)
        if item.external_id_wrapped_key is not None and item.external_id_sealed is not None
        else None
    )
    return StoredCloudSettings(
        workspace_id=item.workspace_id,
        settings=CloudSettings(
            aws_plan_role_arn=item.aws_plan_role_arn,
            aws_apply_role_arn=item.aws_apply_role_arn,
            aws_external_id_set=bool(item.aws_external_id_set),
            aws_session_duration=int(item.aws_session_duration),
            aws_region=item.aws_region,
            gcp_audience=item.gcp_audience,
            azure_audience=item.azure_audience,
            azure_client_id=item.azure_client_id,
            azure_tenant_id=item.azure_tenant_id,
        ),
        version=int(item.version),
        updated_at=item.updated_at,
        updated_by=item.updated_by,
        external_id=sealed,
    )


def _item(stored: StoredCloudSettings, org_id: str) -> CloudSettingsItem:
    """The item holding ``stored`` (the inverse of ``_stored``)."""
    settings, sealed = stored.settings, stored.external_id
    return CloudSettingsItem(
        *cloud_settings_key(stored.workspace_id),
        workspace_id=stored.workspace_id,
        org_id=org_id,
        version=stored.version,
        aws_plan_role_arn=settings.aws_plan_role_arn,
        aws_apply_role_arn=settings.aws_apply_role_arn,
        aws_external_id_set=settings.aws_external_id_set,
        external_id_wrapped_key=sealed.wrapped_key if sealed else None,
        external_id_sealed=sealed.ciphertext if sealed else None,
        aws_session_duration=settings.aws_session_duration,
        aws_region=settings.aws_region,
        gcp_audience=settings.gcp_audience,
        azure_audience=settings.azure_audience,
        azure_client_id=settings.azure_client_id,
        azure_tenant_id=settings.azure_tenant_id,
        updated_at=stored.updated_at,
        updated_by=stored.updated_by,
    )


def get(workspace_id: str, *, reads: IdentityMap) -> StoredCloudSettings | None:
    """The workspace's settings (a consistent read), or None if it never had any; served
    from ``reads`` (the request's identity map) when a run's creation read it there."""
    known, raw = reads.take_known(cloud_settings_key(workspace_id))
    if known:
        return None if raw is None else _stored(CloudSettingsItem.from_raw_data(raw))
    try:
        return _stored(
            CloudSettingsItem.get(*cloud_settings_key(workspace_id), consistent_read=True)
        )
    except CloudSettingsItem.DoesNotExist:
        return None


def put(
    stored: StoredCloudSettings, *, org_id: str, previous_version: int, event: AuditEvent
) -> Transaction:
    """Replace the workspace's settings with ``stored`` (at ``previous_version + 1``)
    only while they are at ``previous_version`` (0: none yet), with ``event``."""
    condition = (
        CloudSettingsItem.pk.does_not_exist()
        if previous_version == 0
        else CloudSettingsItem.version == previous_version
    )

    def changed(current: Item | None) -> Exception:
        return ConcurrentChange(
            f"the cloud settings of workspace {stored.workspace_id} changed meanwhile; "
            "nothing was written: read them again"
        )

    return (
        Transaction()
        .put(_item(stored, org_id), condition=condition, on_refused=changed)
        .extend([audit.recorded(event)])
    )


class DynamoCloudSettingsStore:
    """``services.repositories.cloud_settings.CloudSettingsStore`` on the table."""

    def __init__(self, scope: RequestScope = REQUEST) -> None:
        # Reads are served from the request's identity map, taken at each call.
        self._scope = scope

    def get(self, workspace_id: str) -> StoredCloudSettings | None:
        return get(workspace_id, reads=self._scope.reads())

    def put(
        self,
        stored: StoredCloudSettings,
        *,
        org_id: str,
        previous_version: int,
        event: AuditEvent,
        audit: AuditRecord | None = None,
    ) -> None:
        write = put(stored, org_id=org_id, previous_version=previous_version, event=event)
        if audit is not None:
            write.extend([security_record(audit)])
        write.commit()
