"""Runs from GitHub end to end: the signed webhook through the embedded stack's gateway,
the source workflow's ASL in moto, a fake GitHub over real HTTP (App JWT checked,
tarball, statuses), and the real engine planning the commit's working directory."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import boto3
import pytest

from runplane.client import ApiError, Client, Connection
from tests.e2e.conftest import Local, unique
from tests.e2e.github_connect import held_once
from tests.e2e.test_dashboard import signed_in
from tests.github_fake import FakeGitHub

INSTALLATION = 4242


def main_tf(where: str) -> str:
    return f'output "where" {{\n  value = "{where}"\n}}\n'


def sha_of(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 - a commit id, not security


def post_webhook(
    local: Local,
    event: str,
    payload: dict[str, Any] | bytes,
    *,
    delivery: str | None = None,
    secret: str | None = None,
) -> tuple[int, dict[str, Any], str]:
    assert local.stack.github is not None
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    key = (secret or local.stack.github.webhook_secret).encode()
    signature = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
    delivery = delivery or str(uuid.uuid4())
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery}
    status, answer = post_delivery(local, body, {**headers, "X-Hub-Signature-256": signature})
    return status, answer, delivery


def signature_of(local: Local, body: bytes) -> str:
    assert local.stack.github is not None
    key = local.stack.github.webhook_secret.encode()
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def post_delivery(local: Local, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    """POST exactly these headers (and a JSON content type) to the webhook."""
    request = urllib.request.Request(  # noqa: S310 - the loopback stack
        f"{local.url}/webhooks/github",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def push(repository: str, sha: str, branch: str = "main", age: timedelta = timedelta()) -> Any:
    at = datetime.now(UTC) - age
    return {
        "ref": f"refs/heads/{branch}",
        "after": sha,
        "deleted": False,
        "repository": {"full_name": repository, "pushed_at": int(at.timestamp())},
        "installation": {"id": INSTALLATION},
        "head_commit": {"id": sha, "timestamp": at.isoformat()},
    }


def pull_request(repository: str, sha: str, number: int, base: str = "main") -> Any:
    return {
        "action": "opened",
        "number": number,
        "pull_request": {
            "number": number,
            "updated_at": datetime.now(UTC).isoformat(),
            "base": {"ref": base},
            "head": {"sha": sha, "ref": "feature", "repo": {"full_name": repository}},
        },
        "repository": {"full_name": repository},
        "installation": {"id": INSTALLATION},
    }


def table_items(local: Local) -> list[dict[str, Any]]:
    assert local.stack.services is not None
    settings = local.stack.services.settings
    dynamodb = boto3.client(
        "dynamodb", region_name=settings.region, endpoint_url=settings.aws_endpoint_url
    )
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=settings.table_name):
        items.extend(page["Items"])
    return items


def webhook_footprint(local: Local, *workspace_ids: str) -> list[dict[str, Any]]:
    """What a webhook delivery starts with: its delivery record, a source ingestion, and
    the runs and configuration versions of the ``workspace_ids`` it is bound to. Other
    runs in the shared stack (earlier tests', finishing their last steps) are left out."""
    named = [{"S": workspace_id} for workspace_id in workspace_ids]
    return [
        item
        for item in table_items(local)
        if item["PK"]["S"].startswith(("GHDELIVERY#", "SRC#"))
        or (item["SK"]["S"] in ("RUN", "CV") and any(value in named for value in item.values()))
    ]


def eventually(probe: Callable[[], Any], timeout: float = 90, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def bound_workspace(
    local: Local, repository: str, branch: str, directory: str, kind: str = "plan_only"
) -> str:
    held_once(local, INSTALLATION, account="acme")
    ws = str(local.client.create_workspace(unique("gh"))["id"])
    local.client.bind_github(
        ws,
        repository=repository,
        branch=branch,
        working_directory=directory,
        installation_id=INSTALLATION,
        push_run_kind=kind,
    )
    return ws


def test_a_push_plans_every_bound_workspace_once_with_provenance_and_no_token_anywhere(
    local: Local, fake_github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="runplane")
    # Given two workspaces bound to acme/infra main (two working directories), one bound
    # to another branch, and another organization's workspace bound to its own repository
    repository = f"acme/infra-{uuid.uuid4().hex[:6]}"
    plan_only = bound_workspace(local, repository, "main", "envs/a")
    applying = bound_workspace(local, repository, "main", "./envs/b/", "plan_and_apply")
    other_branch = bound_workspace(local, repository, "release", "envs/a")
    org, token = local.other_organization(unique("org"))
    other = Client(Connection(local.url, token, org))
    foreign = str(other.create_workspace("foreign")["id"])
    held_once(local, INSTALLATION + 1, account="other", organization=org)
    other.bind_github(
        foreign, repository="other/repo", branch="main", installation_id=INSTALLATION + 1
    )
    files = {"envs/a/main.tf": main_tf("a"), "envs/b/main.tf": main_tf("b"), "README.md": "x"}
    sha = sha_of(repository + "push")
    archive = fake_github.add_commit(repository, sha, files)

    # When GitHub delivers the signed push
    delivered = push(repository, sha)
    status, body, delivery = post_webhook(local, "push", delivered)

    # Then it is accepted, and each bound workspace of that branch gets one run
    assert status == 202, body
    assert body["status"] == "accepted"
    runs = {
        ws: eventually(partial(local.client.list_runs, ws), what=f"a run of {ws}")
        for ws in (plan_only, applying)
    }
    assert {ws: len(found) for ws, found in runs.items()} == {plan_only: 1, applying: 1}
    planned = local.client.watch(runs[plan_only][0]["id"], timeout=180)
    assert (planned["kind"], planned["status"]) == ("plan_only", "succeeded")
    assert planned["plan"]["summary"]["output_changes"] == {"where": "create"}
    waiting = local.client.watch(runs[applying][0]["id"], until=["awaiting_approval"], timeout=180)
    assert (waiting["kind"], waiting["status"]) == ("plan_and_apply", "awaiting_approval")

    # And the review shows the provenance chain, from the persisted records
    source = planned["source"]
    assert source["provider"] == "github"
    assert source["repository"] == repository
    assert (source["commit_sha"], source["ref"]) == (sha, "refs/heads/main")
    assert source["working_directory"] == "envs/a"
    assert source["source_ingestion"] == {"id": body["source_id"], "status": "ready"}
    assert source["workflow_id"] == body["source_id"]
    assert source["delivery_id"] == delivery
    assert source["configuration_version_id"] == planned["input"]["configuration_version_id"]
    assert source["archive_sha256"] == hashlib.sha256(archive).hexdigest()
    assert source["configuration_artifact_id"].startswith("art-")
    assert waiting["source"]["working_directory"] == "envs/b"
    # And no other branch, organization or repository got a run
    assert local.client.list_runs(other_branch) == []
    assert other.list_runs(foreign) == []
    # And the provenance holds identifiers and digests, never storage details
    assert "object_key" not in json.dumps(source)
    # And the run page's header shows the same identity
    page = signed_in(local).get(f"{local.url}/ui/runs/{planned['id']}", timeout=30)
    assert page.status_code == 200
    header = page.text.split('id="run-source"', 1)[1].split("</dd>", 1)[0]
    for shown in (repository, "push to", "main", sha[:12], "envs/a", delivery, body["source_id"]):
        assert shown in header, shown
    assert source["configuration_artifact_id"] not in page.text

    # When the same delivery arrives again
    bound = (plan_only, applying, other_branch)
    before = webhook_footprint(local, *bound)
    again, repeat, _ = post_webhook(local, "push", delivered, delivery=delivery)
    # Then it returns the original outcome and starts nothing
    assert again == 202
    assert (repeat["source_id"], repeat["duplicate"]) == (body["source_id"], True)
    assert len(webhook_footprint(local, *bound)) == len(before)
    assert len(local.client.list_runs(plan_only)) == 1
    assert fake_github.downloads.count(sha) == 1

    # And no installation token appears in the table, the workflow's history or the logs
    tokens = list(fake_github.tokens)
    assert tokens
    assert local.stack.services is not None
    settings = local.stack.services.settings
    sfn = boto3.client(
        "stepfunctions", region_name=settings.region, endpoint_url=settings.aws_endpoint_url
    )
    histories = []
    for arn in (settings.source_state_machine_arn, settings.state_machine_arn):
        for execution in sfn.list_executions(stateMachineArn=str(arn))["executions"]:
            described = sfn.describe_execution(executionArn=execution["executionArn"])
            history = sfn.get_execution_history(executionArn=execution["executionArn"])
            histories.append(json.dumps([described, history["events"]], default=str))
    assert any(body["source_id"] in h for h in histories)
    everything = [json.dumps(table_items(local), default=str), *histories, caplog.text]
    assert local.stack.github is not None
    secrets = [*tokens, local.stack.github.webhook_secret, "PRIVATE KEY"]
    leaked = [s[:8] for s in secrets for text in everything if s in text]
    assert leaked == []


def test_a_pull_request_runs_a_speculative_plan_and_reports_pending_then_success(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given a workspace bound to acme/app main (root directory)
    repository = f"acme/app-{uuid.uuid4().hex[:6]}"
    ws = bound_workspace(local, repository, "main", "", "plan_and_apply")
    sha = sha_of(repository + "pr")
    fake_github.add_commit(repository, sha, {"main.tf": main_tf("pr")})

    # When a pull request against main is opened
    status, body, _ = post_webhook(local, "pull_request", pull_request(repository, sha, 7))

    # Then a speculative run plans it and the commit gets pending, then success
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(ws), what="the PR's run")[0]
    assert run["kind"] == "speculative"
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "succeeded"
    assert done["source"]["ref"] == "refs/pull/7/head"
    assert done["source"]["pull_request"] == 7
    reported = eventually(
        lambda: [s for s in fake_github.statuses_for(sha) if s["state"] != "pending"],
        what="the final commit status",
    )
    states = [s["state"] for s in fake_github.statuses_for(sha)]
    assert states == ["pending", "success"]
    assert reported[0]["context"] == f"runplane/{ws}"
    assert reported[0]["target_url"].endswith(f"/ui/runs/{run['id']}")


def test_refused_deliveries_write_nothing(local: Local) -> None:
    repository = f"acme/refused-{uuid.uuid4().hex[:6]}"
    ws = bound_workspace(local, repository, "main", "")
    sha = sha_of(repository)
    before = len(webhook_footprint(local, ws))

    # A wrong signature: 401, nothing recorded
    status, body, _ = post_webhook(local, "push", push(repository, sha), secret="wrong")
    assert (status, body["code"]) == (401, "WEBHOOK_SIGNATURE_INVALID")
    # A signed body that is not JSON: 400
    status, body, _ = post_webhook(local, "push", b"{not json")
    assert (status, body["code"]) == (400, "INVALID_BODY")
    # An event older than the replay window: 409
    old = push(repository, sha, age=timedelta(days=2))
    status, body, _ = post_webhook(local, "push", old)
    assert (status, body["code"]) == (409, "WEBHOOK_REPLAY_REFUSED")
    # A body over the size limit: 413
    status, body, _ = post_webhook(local, "push", b" " * (1024 * 1024 + 1))
    assert (status, body["code"]) == (413, "WEBHOOK_TOO_LARGE")
    assert len(webhook_footprint(local, ws)) == before

    # An event that starts nothing is acknowledged with a reason (and recorded once)
    status, body, delivery = post_webhook(local, "issues", {"action": "opened"})
    assert (status, body["status"]) == (200, "ignored")
    assert "does not start runs" in body["reason"]
    # The same delivery ID with another body is a replay: 409, nothing more recorded
    after = len(webhook_footprint(local, ws))
    status, body, _ = post_webhook(local, "issues", {"action": "closed"}, delivery=delivery)
    assert (status, body["code"]) == (409, "WEBHOOK_REPLAY_REFUSED")
    assert len(webhook_footprint(local, ws)) == after == before + 1


def test_the_signature_is_checked_before_anything_else_about_the_headers(local: Local) -> None:
    body = json.dumps({"zen": "Design for failure."}).encode()
    delivery = {"X-GitHub-Delivery": str(uuid.uuid4())}
    wrong = {"X-Hub-Signature-256": "sha256=" + "0" * 64}
    signed = {"X-Hub-Signature-256": signature_of(local, body)}
    refused = (401, "WEBHOOK_SIGNATURE_INVALID")
    # Unsigned or badly signed: the signature refusal, whatever else is missing or wrong
    for headers in (
        {},
        delivery,
        wrong,
        {**delivery, **wrong},
        {**delivery, **wrong, "X-GitHub-Event": "e" * 500},
        {"X-GitHub-Event": "ping", "X-Hub-Signature-256": "x" * 500},
    ):
        status, answer = post_delivery(local, body, headers)
        assert (status, answer["code"]) == refused, headers
    # Correctly signed: only now is the missing event header named
    status, answer = post_delivery(local, body, {**delivery, **signed})
    assert (status, answer["code"]) == (422, "INVALID_INPUT")
    assert "X-GitHub-Event" in answer["message"]
    status, answer = post_delivery(local, body, {"X-GitHub-Event": "ping", **signed})
    assert (status, answer["code"]) == (422, "INVALID_INPUT")
    assert "X-GitHub-Delivery" in answer["message"]


def test_bindings_are_scoped_to_their_organization(local: Local) -> None:
    # Given a workspace bound to a repository
    ws = bound_workspace(local, "acme/scoped", "main", "infra")
    assert local.client.github_binding(ws)["working_directory"] == "infra"
    org, token = local.other_organization(unique("org"))
    other = Client(Connection(local.url, token, org))
    theirs = str(other.create_workspace("theirs")["id"])

    # Then another organization can neither see nor bind it: 404
    calls: tuple[Callable[[], object], ...] = (
        lambda: other.github_binding(ws),
        lambda: other.bind_github(ws, repository="x/y", branch="main", installation_id=9),
    )
    for call in calls:
        with pytest.raises(ApiError) as seen:
            call()
        assert seen.value.status == 404
    # And it cannot use the first organization's installation: 409, nothing bound
    with pytest.raises(ApiError) as claimed:
        other.bind_github(
            theirs, repository="acme/scoped", branch="main", installation_id=INSTALLATION
        )
    assert claimed.value.status == 409
    with pytest.raises(ApiError) as unbound:
        other.github_binding(theirs)
    assert unbound.value.status == 404
    # And unbinding removes it
    local.client.unbind_github(ws)
    with pytest.raises(ApiError) as gone:
        local.client.github_binding(ws)
    assert gone.value.status == 404


def test_the_cli_binds_shows_and_unbinds_a_workspace(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.e2e.test_cli import cli, cli_json, connect

    # Given a workspace (and the installation, held by the organization)
    held_once(local, INSTALLATION, account="acme")
    name = unique("cli-gh")
    local.client.create_workspace(name)

    # When it is bound through the CLI, then shown
    bound = cli_json(
        capsys,
        "workspace",
        "github",
        name,
        "--repository",
        "Acme/CLI-Repo",
        "--branch",
        "main",
        "--working-directory",
        "stacks/net",
        "--installation-id",
        str(INSTALLATION),
        "--push-run-kind",
        "plan_only",
        *connect(local),
    )
    code, text, _ = cli(capsys, "workspace", "github", name, *connect(local))

    # Then the binding is stored as validated (repository in lower case)
    assert bound["repository"] == "acme/cli-repo"
    assert (bound["working_directory"], bound["push_run_kind"]) == ("stacks/net", "plan_only")
    assert code == 0
    assert "working directory  stacks/net" in text
    # And a bad binding is one error line, and unbinding removes it
    code, _, err = cli(
        capsys, "workspace", "github", name, "--repository", "x", "--branch", "main",
        "--installation-id", "1", *connect(local),
    )  # fmt: skip
    assert code != 0
    assert len(err.strip().splitlines()) == 1
    assert cli(capsys, "workspace", "github", name, "--unbind", *connect(local))[0] == 0
    assert cli(capsys, "workspace", "github", name, *connect(local))[0] != 0


SPACELIFT_REVIEW = """package spacelift

import rego.v1

deny contains msg if {
	author := input.spacelift.commit.author
	not author in {"alice"}
	msg := sprintf("%s is not trusted to change %s (labels %v)", [
		author, input.spacelift.stack.repository, input.spacelift.stack.labels,
	])
}
"""

SCALR_REVIEW = """package terraform

import rego.v1

deny contains msg if {
	pr := input.tfrun.vcs.pull_request
	msg := sprintf("PR %d %q by %s on %s", [
		pr.id, pr.title, pr.author, input.tfrun.vcs.commit.sha,
	])
}
"""


def _review_set(name: str, shape: str, source: str, query: str) -> dict[str, object]:
    return {
        "name": name,
        "input_shape": shape,
        "modules": [{"name": "review.rego", "source": source}],
        "policies": [{"name": "review", "enforcement": "hard_mandatory", "query": query}],
    }


def test_a_pull_requests_policies_see_who_sent_it_its_commit_and_the_workspaces_tags(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given a workspace tagged aws, bound to a repository, judged by a Spacelift-shaped set
    # reading the commit's author and the stack's labels and a Scalr-shaped one reading
    # the pull request
    repository = f"acme/tagged-{uuid.uuid4().hex[:6]}"
    ws = bound_workspace(local, repository, "main", "", "plan_and_apply")
    updated = local.client.update_workspace(ws, tags=["aws", "team:platform"])
    assert updated["tags"] == ["aws", "team:platform"]
    for name, shape, source, query in (
        (unique("spacelift"), "terraform", SPACELIFT_REVIEW, "data.spacelift.deny"),
        (unique("scalr"), "tfplan", SCALR_REVIEW, "data.terraform.deny"),
    ):
        published = local.client.publish_policy_set(_review_set(name, shape, source, query))
        assert published["warnings"] == []
        local.client.attach_policy_set(name, [ws])
    sha = sha_of(repository + "tagged")
    fake_github.add_commit(repository, sha, {"main.tf": main_tf("tagged")})

    # When carol pushes to bob's pull request
    delivered = pull_request(repository, sha, 12)
    delivered["action"] = "synchronize"
    delivered["sender"] = {"login": "carol"}
    title = 'Bigger disks <script>alert("x")</script>'
    delivered["pull_request"] |= {"title": title, "user": {"login": "bob"}}
    status, body, _ = post_webhook(local, "pull_request", delivered)

    # Then the speculative run's policies saw carol as the author (GitHub authenticated
    # her action), the labels, and the pull request
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(ws), what="the PR's run")[0]
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "policy_failed"
    messages = sorted(m for r in done["policy"]["results"] for m in r["messages"])
    assert messages == [
        f'PR 12 "Bigger disks <script>alert(\\"x\\")</script>" by bob on {sha}',
        f'carol is not trusted to change {repository} (labels ["aws", "team:platform"])',
    ]
    # And the review shows the same facts
    source = done["source"]
    assert (source["sender"], source["pull_request_author"]) == ("carol", "bob")
    assert source["pull_request_title"] == title
    assert source["commit_message"] is None
    # And the run page says who sent it and what the pull request is, escaped
    page = signed_in(local).get(f"{local.url}/ui/runs/{run['id']}", timeout=30)
    header = page.text.split('id="run-source"', 1)[1].split("</dd>", 1)[0]
    assert 'sent by <code id="run-source-sender">carol</code>' in header
    assert "pull request #12" in header
    assert "by <code>bob</code>" in header
    assert "&lt;script&gt;" in header
    assert "<script>" not in header


def test_a_pull_request_gets_a_preview_workspace_destroyed_when_it_closes(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given a workspace bound with pull request workspaces (destroys approved by people)
    held_once(local, INSTALLATION, account="acme")
    repository = f"acme/preview-{uuid.uuid4().hex[:6]}"
    name = unique("gh-prev")
    parent = str(local.client.create_workspace(name)["id"])
    bound = local.client.bind_github(
        parent,
        repository=repository,
        branch="main",
        installation_id=INSTALLATION,
        pull_request_workspaces=True,
    )
    assert (bound["pull_request_workspaces"], bound["pull_request_auto_apply_destroy"]) == (
        True,
        False,
    )
    sha = sha_of(repository + "preview")
    fake_github.add_commit(repository, sha, {"main.tf": main_tf("preview")})

    # When pull request 5 is opened
    status, body, _ = post_webhook(local, "pull_request", pull_request(repository, sha, 5))

    # Then its preview workspace gets a plan_and_apply run awaiting approval, the bound
    # workspace none, and the commit status says so
    assert status == 202, body
    preview = eventually(
        lambda: [w for w in local.client.list_workspaces() if w["name"] == f"{name}-pr-5"],
        what="the preview workspace",
    )[0]["id"]
    run = eventually(lambda: local.client.list_runs(preview), what="the preview's run")[0]
    waiting = local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    assert (waiting["kind"], waiting["status"]) == ("plan_and_apply", "awaiting_approval")
    assert waiting["source"]["pull_request"] == 5
    assert local.client.list_runs(parent) == []
    eventually(
        lambda: [s for s in fake_github.statuses_for(sha) if "awaiting" in s["description"]],
        what="the awaiting-approval status",
    )
    assert {s["context"] for s in fake_github.statuses_for(sha)} == {f"runplane/{preview}"}

    # When the pull request closes
    closed = pull_request(repository, sha, 5)
    closed["action"] = "closed"
    status, body, _ = post_webhook(local, "pull_request", closed)

    # Then the preview's auto-destroy is armed, due within a minute, for people to approve
    assert (status, body["status"]) == (200, "closed"), body
    armed = local.client.auto_destroy(preview)
    assert (armed["armed"], armed["auto_apply"]) == (True, False)
    due = datetime.fromisoformat(armed["due_at"])
    assert timedelta(0) < due - datetime.now(UTC) <= timedelta(minutes=1)
    assert [a["workspace_id"] for a in body["auto_destroy"]] == [preview]
