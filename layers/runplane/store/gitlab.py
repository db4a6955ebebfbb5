"""GitLab bindings in the table (one item per workspace, beside its GitHub binding)."""

from __future__ import annotations

from datetime import UTC, datetime

from runplane.domain.errors import Conflict
from runplane.domain.gitlab import GitLabBinding
from runplane.domain.run import RunKind
from runplane.store.models import GitLabBindingItem, gitlab_binding_key
from runplane.store.transaction import Item, OnRefused, Transaction


def _binding(item: GitLabBindingItem) -> GitLabBinding:
    return GitLabBinding(
        workspace_id=item.workspace_id,
        organization_id=item.org_id,
        base_url=item.base_url,
        project=item.project,
        branch=item.branch,
        working_directory=item.working_directory or "",
        push_kind=RunKind(item.push_kind),
        access_token_wrapped_key=bytes(item.access_token_wrapped_key),
        access_token_sealed=bytes(item.access_token_sealed),
        hook_secret_sha256=item.hook_secret_sha256,
        trigger_patterns=tuple(str(p) for p in item.trigger_patterns or []),
        ignore_patterns=tuple(str(p) for p in item.ignore_patterns or []),
    )


def _changed(workspace_id: str) -> OnRefused:
    def refuse(current: Item | None) -> Exception:
        return Conflict(
            f"the GitLab binding of workspace {workspace_id} changed meanwhile; read it again"
        )

    return refuse


class DynamoGitLabBindings:
    """``GitLabBindingStore`` (``services.repositories.gitlab``): conditional writes."""

    def binding(self, workspace_id: str) -> GitLabBinding | None:
        try:
            item = GitLabBindingItem.get(*gitlab_binding_key(workspace_id), consistent_read=True)
        except GitLabBindingItem.DoesNotExist:
            return None
        return _binding(item)

    def put(self, binding: GitLabBinding, previous: GitLabBinding | None) -> None:
        item = GitLabBindingItem(
            *gitlab_binding_key(binding.workspace_id),
            workspace_id=binding.workspace_id,
            org_id=binding.organization_id,
            base_url=binding.base_url,
            project=binding.project,
            branch=binding.branch,
            working_directory=binding.working_directory,
            push_kind=binding.push_kind.value,
            access_token_wrapped_key=binding.access_token_wrapped_key,
            access_token_sealed=binding.access_token_sealed,
            hook_secret_sha256=binding.hook_secret_sha256,
            trigger_patterns=list(binding.trigger_patterns) or None,
            ignore_patterns=list(binding.ignore_patterns) or None,
            updated_at=datetime.now(UTC),
        )
        condition = (
            GitLabBindingItem.pk.does_not_exist()
            if previous is None
            else GitLabBindingItem.hook_secret_sha256 == previous.hook_secret_sha256
        )
        Transaction().put(
            item, condition=condition, on_refused=_changed(binding.workspace_id)
        ).commit()

    def delete(self, binding: GitLabBinding) -> None:
        Transaction().delete(
            GitLabBindingItem(*gitlab_binding_key(binding.workspace_id)),
            condition=GitLabBindingItem.hook_secret_sha256 == binding.hook_secret_sha256,
            on_refused=_changed(binding.workspace_id),
        ).commit()
