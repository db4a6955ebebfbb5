"""The GitLab binding store's promises, held by the DynamoDB store (moto) and the
in-memory one alike: a binding reads back whole, path filters included, and a binding
made without them reads as having none."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runplane.domain.gitlab import GitLabBinding
from runplane.domain.run import RunKind
from runplane.services.repositories.gitlab import GitLabBindingStore
from runplane.store.gitlab import DynamoGitLabBindings
from tests.fakes_gitlab import InMemoryGitLabBindings

BINDING = GitLabBinding(
    workspace_id="ws-gl1",
    organization_id="org-1",
    base_url="https://gitlab.example.com",
    project="acme/infra",
    branch="main",
    working_directory="envs/prod",
    push_kind=RunKind.PLAN_ONLY,
    access_token_wrapped_key=b"wrapped",
    access_token_sealed=b"sealed",
    hook_secret_sha256="a" * 64,
)


@pytest.fixture(params=["dynamodb", "memory"])
def bindings(request: pytest.FixtureRequest) -> GitLabBindingStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoGitLabBindings()
    return InMemoryGitLabBindings()


def test_a_binding_reads_back_with_its_path_filters(bindings: GitLabBindingStore) -> None:
    # Given a binding with trigger and ignore patterns
    filtered = replace(
        BINDING, trigger_patterns=("modules/**/*.tf", "*.tf"), ignore_patterns=("**/*.md",)
    )
    # When it is stored
    bindings.put(filtered, None)
    # Then it reads back whole, the patterns in their order
    assert bindings.binding(BINDING.workspace_id) == filtered


def test_a_binding_without_filters_reads_as_having_none(bindings: GitLabBindingStore) -> None:
    # Given a binding with no path filters
    bindings.put(BINDING, None)
    # When it is read, Then it has none
    found = bindings.binding(BINDING.workspace_id)
    assert found is not None
    assert (found.trigger_patterns, found.ignore_patterns) == ((), ())
    assert not found.path_filters.active
