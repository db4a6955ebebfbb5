"""In-memory GitLab bindings (runplane.services.repositories.gitlab): a dict keeping
the DynamoDB store's promises (tests/integration/test_gitlab_store_contract.py)."""

from __future__ import annotations

from runplane.domain.errors import Conflict
from runplane.domain.gitlab import GitLabBinding


class InMemoryGitLabBindings:
    def __init__(self) -> None:
        self.bindings: dict[str, GitLabBinding] = {}

    def binding(self, workspace_id: str) -> GitLabBinding | None:
        return self.bindings.get(workspace_id)

    def put(self, binding: GitLabBinding, previous: GitLabBinding | None) -> None:
        current = self.bindings.get(binding.workspace_id)
        if (current is None) != (previous is None) or (
            current is not None
            and previous is not None
            and current.hook_secret_sha256 != previous.hook_secret_sha256
        ):
            raise Conflict(f"the GitLab binding of workspace {binding.workspace_id} changed")
        self.bindings[binding.workspace_id] = binding

    def delete(self, binding: GitLabBinding) -> None:
        current = self.bindings.get(binding.workspace_id)
        if current is None or current.hook_secret_sha256 != binding.hook_secret_sha256:
            raise Conflict(f"the GitLab binding of workspace {binding.workspace_id} changed")
        del self.bindings[binding.workspace_id]
