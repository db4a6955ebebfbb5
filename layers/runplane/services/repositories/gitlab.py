"""The seam of GitLab bindings (one per workspace). Deliveries and ingestions are the
GitHub source records (``services.repositories.github``), shared by both providers.

The DynamoDB implementation is ``store.gitlab.DynamoGitLabBindings``; the in-memory one
``tests/fakes_gitlab.py``; ``tests/integration/test_gitlab_store_contract.py`` holds both
to the same cases.
"""

from __future__ import annotations

from typing import Protocol

from runplane.domain.gitlab import GitLabBinding


class GitLabBindingStore(Protocol):
    """- ``binding`` is a workspace's GitLab binding, or None.
    - ``put`` replaces it only if it is still exactly ``previous`` (None: no binding;
      else the same webhook secret digest), else ``Conflict``, writing nothing.
    - ``delete`` removes it only if it is still ``binding`` (same digest), else
      ``Conflict``."""

    def binding(self, workspace_id: str) -> GitLabBinding | None: ...

    def put(self, binding: GitLabBinding, previous: GitLabBinding | None) -> None: ...

    def delete(self, binding: GitLabBinding) -> None: ...
