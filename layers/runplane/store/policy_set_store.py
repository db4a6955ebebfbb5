"""The DynamoDB policy sets (``services.repositories.PolicySetStore``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.published_policy_sets import PolicySetHead
from runplane.store import policy_sets as store


class DynamoPolicySetStore:
    def get(self, org_id: str, name: str) -> PolicySetHead:
        return store.get(org_id, name)

    def find(self, org_id: str, name: str) -> PolicySetHead | None:
        return store.find(org_id, name)

    def all_of(self, org_id: str) -> list[PolicySetHead]:
        return store.all_of(org_id)

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
        ).commit()

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
