"""The DynamoDB workspace directory (``services.repositories.WorkspaceDirectory``).

A workspace's read is served from the request's identity map (``scope``) where it was
read ahead."""

from __future__ import annotations

from runplane.domain.audit import AuditRecord
from runplane.domain.entities import AuditEvent, Organization, Workspace
from runplane.domain.second_approval import SecondApprovalRule
from runplane.store import policy_sets
from runplane.store import workspaces as store
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.security_records import security_record


class DynamoWorkspaceDirectory:
    def __init__(self, scope: RequestScope = REQUEST) -> None:
        # Reads are served from the request's identity map, taken at each call.
        self._scope = scope

    def create_organization(self, org: Organization) -> None:
        # Its policy sets' tally counts none from the start: its runs' policy steps
        # skip the sets' query until it has one.
        store.create_organization(org).extend([policy_sets.new_organization(org.id)]).commit()

    def get_organization(self, org_id: str) -> Organization:
        return store.get_organization(org_id)

    def find_organization_id(self, name: str) -> str | None:
        return store.find_organization_id(name)

    def create_workspace(self, workspace: Workspace) -> None:
        store.create_workspace(workspace).commit()

    def get_workspace(self, workspace_id: str) -> Workspace:
        return store.get_workspace(workspace_id, reads=self._scope.reads())

    def find_workspace_id(self, org_id: str, name: str) -> str | None:
        return store.find_workspace_id(org_id, name)

    def list_workspaces(self, org_id: str) -> list[Workspace]:
        return store.list_workspaces(org_id)

    def delete_workspace(self, workspace: Workspace, *, deleted_by: str, event: AuditEvent) -> None:
        store.delete_workspace(workspace, deleted_by=deleted_by, event=event).commit()

    def update_settings(
        self,
        workspace_id: str,
        *,
        terraform_version: str | None = None,
        description: str | None = None,
        tag_names: tuple[str, ...] | None = None,
        approval_window_seconds: int | None = None,
        second_approval: SecondApprovalRule | None = None,
        execution_mode: str | None = None,
        expected_settings_version: int | None = None,
        audit: AuditRecord | None = None,
    ) -> None:
        write = store.update_settings(
            workspace_id,
            terraform_version=terraform_version,
            description=description,
            tag_names=tag_names,
            approval_window_seconds=approval_window_seconds,
            second_approval=second_approval,
            execution_mode=execution_mode,
            expected_settings_version=expected_settings_version,
        )
        if audit is not None and write:
            # The record commits with the change, or neither does.
            write.extend([security_record(audit)])
        write.commit()
