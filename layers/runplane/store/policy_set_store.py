"""The DynamoDB policy sets (``services.repositories.PolicySetStore``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.errors import ConcurrentChange
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.store import policy_sets as store
from runplane.store.request_reads import REQUEST, RequestScope

# A creation's tries: its increment, then (an organization with no tally) the tally
# created from the count, then (another creation created it first) the increment again.
_TALLY_TRIES = 3


class DynamoPolicySetStore:
    def __init__(self, scope: RequestScope = REQUEST) -> None:
        # The organization's tally is served from the request's identity map, taken at
        # each call.
        self._scope = scope

    def get(self, org_id: str, name: str) -> PolicySetHead:
        return store.get(org_id, name)

    def find(self, org_id: str, name: str) -> PolicySetHead | None:
        return store.find(org_id, name)

    def all_of(self, org_id: str) -> list[PolicySetHead]:
        return store.all_of(org_id)

    def counted_none(self, org_id: str) -> bool:
        return store.counted_none(org_id, reads=self._scope.reads())

    def version_artifact_id(self, org_id: str, name: str, digest: str) -> str | None:
        earlier = store.version(org_id, name, digest)
        return None if earlier is None else str(earlier.artifact_id)

    def publish(
        self,
        org_id: str,
        name: str,
        digest: str,
        artifact_id: str,
        policies: list[dict[str, Any]],
        *,
        previous: PolicySetHead | None,
        by: str,
        now: datetime,
        version_exists: bool = False,
    ) -> None:
        counted: int | None = None
        for _ in range(_TALLY_TRIES):
            try:
                store.publish(
                    org_id,
                    name,
                    digest,
                    artifact_id,
                    policies,
                    previous=previous,
                    by=by,
                    now=now,
                    version_exists=version_exists,
                    counted=counted,
                ).commit()
                return
            except store.TallyMissing:
                counted = store.count_heads(org_id)
            except store.TallyPresent:
                counted = None
        raise ConcurrentChange(
            f"policy set {name}: other sets were created meanwhile; publish again"
        )

    def attach(
        self,
        head: PolicySetHead,
        workspaces: list[str],
        all_workspaces: bool,
        *,
        by: str,
        now: datetime,
    ) -> None:
        store.attach(head, workspaces, all_workspaces, by=by, now=now).commit()
