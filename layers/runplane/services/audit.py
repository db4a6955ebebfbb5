"""The security audit trail: reading an organization's records, and recording the
refusals that have nothing else to write (a webhook delivery refused, a sign-in
refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runplane.domain.audit import (
    DEPLOYMENT_TRAIL,
    AuditAction,
    AuditOutcome,
    AuditPage,
    AuditQuery,
    AuditRecord,
)
from runplane.domain.clock import Clock
from runplane.domain.errors import InvalidInput
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.paging import MAX_PAGE_SIZE

if TYPE_CHECKING:
    from runplane.services.repositories.audit import SecurityTrailStore


class AuditTrail:
    def __init__(self, clock: Clock, ids: IdGenerator, store: SecurityTrailStore) -> None:
        self._clock = clock
        self._ids = ids
        self._store = store

    def page(self, principal: Principal, query: AuditQuery) -> AuditPage:
        """A page of the caller's organization's records, oldest first."""
        principal.require(Permission.AUDIT_READ)
        if not 1 <= query.size <= MAX_PAGE_SIZE:
            raise InvalidInput(f"1 <= page[size] <= {MAX_PAGE_SIZE}", "/page[size]")
        if query.since and query.until and query.until <= query.since:
            raise InvalidInput("until must be later than since", "/until")
        return self._store.page(principal.organization_id, query)

    def webhook_refused(
        self,
        provider: str,
        reason: str,
        *,
        organization_id: str | None,
        object_kind: str,
        object_id: str,
        delivery_id: str | None,
        source_address: str | None,
    ) -> None:
        """One refused record of a webhook delivery: under the organization its target
        names, else the deployment's trail. Its reason and delivery ID, never its body."""
        details = {"provider": provider, "reason": reason}
        if delivery_id:
            details["delivery_id"] = delivery_id[:200]
        self._store.append(
            AuditRecord(
                id=self._ids.new(IdKind.AUDIT_EVENT),
                organization_id=organization_id or DEPLOYMENT_TRAIL,
                at=self._clock.now(),
                action=AuditAction.WEBHOOK_REFUSED,
                actor=f"webhook:{provider}",
                actor_display=f"{provider} webhook delivery",
                source_address=source_address,
                object_kind=object_kind,
                object_id=object_id,
                outcome=AuditOutcome.REFUSED,
                details=details,
            )
        )
