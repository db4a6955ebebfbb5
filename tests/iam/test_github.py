"""A GitHub pull request, from its signed delivery to the commit's final status, each
handler under its deployed role: the run API (webhook secret, source workflow), the
source workflow's tasks (the App's key, the archive, the runs), the event worker."""

from __future__ import annotations

import uuid

from tests.e2e.test_github import (
    bound_workspace,
    eventually,
    main_tf,
    post_webhook,
    pull_request,
    sha_of,
)
from tests.github_fake import FakeGitHub
from tests.iam.conftest import Enforced
from tests.iam.observed import Scenario, as_harness, watch

SOURCE_TASKS = (
    "functions.tasks.source_handlers.ingest_source",
    "functions.tasks.source_handlers.create_source_runs",
    "functions.tasks.source_handlers.report_commit_status",
)


def test_a_pull_request_ingested_planned_and_reported_needs_nothing_its_roles_do_not_allow(
    enforced: Enforced, fake_github: FakeGitHub
) -> None:
    local = enforced.local
    # Given a workspace bound to a repository through a connected installation
    repository = f"acme/iam-{uuid.uuid4().hex[:6]}"
    workspace = as_harness(bound_workspace, local, repository, "main", "", "plan_and_apply")
    sha = sha_of(repository + "pr")
    fake_github.add_commit(repository, sha, {"main.tf": main_tf("iam")})
    # (Secrets cached by earlier tests are read from their store again, so that this
    # scenario sees each function read them.)
    assert local.stack.services is not None
    local.stack.services.secrets._cache.clear()
    scenario = Scenario(enforced)

    # When GitHub delivers a signed pull request against that branch
    status, body, _ = post_webhook(local, "pull_request", pull_request(repository, sha, 9))

    # Then its commit is ingested and planned, and reported pending, then success
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(workspace), what="the PR's run")[0]
    done = watch(enforced, run["id"])
    assert (done["kind"], done["status"]) == ("speculative", "succeeded"), done
    eventually(
        lambda: [s for s in fake_github.statuses_for(sha) if s["state"] == "success"],
        what="the final commit status",
    )
    assert [s["state"] for s in fake_github.statuses_for(sha)] == ["pending", "success"]

    # And nothing any handler called was refused or unattributed
    scenario.assert_clean()
    # And each step called under its own function's role: the webhook's secret read by
    # the run API and the App's key by each source task (each function keeps its own
    # cache), the archive stored by the ingestion, the report's workflow started by the
    # worker
    handlers = (*SOURCE_TASKS, "functions.api.app.handler", "functions.events.handler.handler")
    assert scenario.signed(*handlers) == dict.fromkeys(handlers, True)
    assert "s3:PutObject" in scenario.actions("functions.tasks.source_handlers.ingest_source")
    assert "states:StartExecution" in scenario.actions("functions.events.handler.handler")
    for reader in (*SOURCE_TASKS, "functions.api.app.handler"):
        assert "secretsmanager:GetSecretValue" in scenario.actions(reader), reader
    # And the source workflow invoked its tasks under its own role
    assert scenario.principals()[enforced.invoker_roles["runplane-IngestSource"]] > 0
