"""Runs from GitLab end to end: a workspace bound with the CLI, the project webhook
through the embedded stack's gateway (secret token checked), the source workflow's ASL
in moto, a fake GitLab over real HTTP (archive and statuses answered only with the
project access token), and the real engine planning the commit."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.cli import main
from runplane.client import Client, Connection
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cli import connect
from tests.e2e.test_dashboard import signed_in
from tests.e2e.test_github import (
    eventually,
    main_tf,
    sha_of,
    table_items,
    webhook_footprint,
)
from tests.gitlab_fake import FakeGitLab, Project

PUSH = "Push Hook"
MERGE_REQUEST = "Merge Request Hook"


@pytest.fixture(scope="module")
def fake_gitlab() -> Iterator[FakeGitLab]:
    fake = FakeGitLab().start()
    try:
        yield fake
    finally:
        fake.stop()


_ids = iter(range(1000, 10**6))


def project(fake: FakeGitLab, name: str) -> Project:
    return fake.add_project(
        next(_ids), f"acme/{name}-{uuid.uuid4().hex[:6]}", f"glpat-{uuid.uuid4().hex}"
    )


def bind_with_cli(
    local: Local,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeGitLab,
    held: Project,
    *,
    kind: str = "plan_only",
    auth: list[str] | None = None,
) -> tuple[str, str]:
    """A new workspace bound to ``held`` with ``runplane workspace gitlab``, the access
    token on stdin; its ID and the webhook token the binding answered once."""
    name = unique("gl")
    capsys.readouterr()
    assert main(["workspace", "create", name, *(auth or connect(local))]) == 0
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(held.token + "\n"))
    code = main(
        [
            "workspace", "gitlab", name,
            "--base-url", fake.url,
            "--project", held.path,
            "--branch", "main",
            "--push-run-kind", kind,
            *(auth or connect(local)),
            "--json",
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    bound = json.loads(out)
    assert held.token not in out + err
    return bound["workspace_id"], bound["webhook_token"]


def post_hook(
    local: Local, event: str, payload: dict[str, Any] | bytes, token: str, uuid_: str | None = None
) -> tuple[int, dict[str, Any], str]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    event_uuid = uuid_ or str(uuid.uuid4())
    request = urllib.request.Request(  # noqa: S310 - the loopback stack
        f"{local.url}/webhooks/gitlab",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-Gitlab-Event": event,
            "X-Gitlab-Event-UUID": event_uuid,
            "X-Gitlab-Token": token,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            return response.status, json.loads(response.read()), event_uuid
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), event_uuid


def push(held: Project, sha: str, age: timedelta = timedelta()) -> dict[str, Any]:
    at = datetime.now(UTC) - age
    return {
        "object_kind": "push",
        "ref": "refs/heads/main",
        "after": sha,
        "user_username": "alice",
        "project": {"id": held.id, "path_with_namespace": held.path},
        "commits": [{"id": sha, "message": "Plan me", "timestamp": at.isoformat()}],
    }


def merge_request(held: Project, sha: str, iid: int) -> dict[str, Any]:
    return {
        "object_kind": "merge_request",
        "user": {"username": "bob"},
        "project": {"id": held.id, "path_with_namespace": held.path},
        "object_attributes": {
            "iid": iid,
            "action": "open",
            "title": "Change the output",
            "target_branch": "main",
            "source_project_id": held.id,
            "updated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "last_commit": {"id": sha},
        },
    }


def test_a_push_runs_the_bound_workspace_once_and_no_token_appears_anywhere(
    local: Local,
    fake_gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="runplane")
    # Given a workspace bound (plan and apply) to a GitLab project, and another
    # organization's workspace bound to its own project on the same instance
    held = project(fake_gitlab, "infra")
    ws, hook_token = bind_with_cli(
        local, capsys, monkeypatch, fake_gitlab, held, kind="plan_and_apply"
    )
    org, admin = local.other_organization(unique("org"))
    theirs = project(fake_gitlab, "theirs")
    other_auth = ["--url", local.url, "--token", admin, "--organization", org]
    foreign, foreign_token = bind_with_cli(
        local, capsys, monkeypatch, fake_gitlab, theirs, auth=other_auth
    )
    sha = sha_of(held.path + "push")
    fake_gitlab.add_commit(held, sha, {"main.tf": main_tf("gitlab"), "README.md": "x"})

    # When GitLab delivers the push with the workspace's webhook token
    delivered = push(held, sha)
    status, body, event_uuid = post_hook(local, PUSH, delivered, hook_token)

    # Then one run plans the commit with the real engine and waits for approval
    assert status == 202, body
    runs = eventually(lambda: local.client.list_runs(ws), what="the push's run")
    waiting = local.client.watch(runs[0]["id"], until=["awaiting_approval"], timeout=180)
    assert (waiting["kind"], waiting["status"]) == ("plan_and_apply", "awaiting_approval")
    assert waiting["plan"]["summary"]["output_changes"] == {"where": "create"}
    # And it was fetched with the project's token, and a push posts no commit status
    assert fake_gitlab.downloads == [*fake_gitlab.downloads[:-1], (held.path, sha)]
    assert fake_gitlab.statuses_for(sha) == []
    # And it is applied once approved
    local.client.decide(waiting["id"], "approve")
    applied = local.client.watch(waiting["id"], timeout=180)
    assert applied["status"] == "succeeded"
    # And the provenance names the project, the commit and the delivery
    source = applied["source"]
    assert source["repository"].endswith(held.path.lower())
    assert (source["commit_sha"], source["ref"]) == (sha, "refs/heads/main")
    assert event_uuid in source["delivery_id"]
    assert (source["provider"], source["event"]) == ("gitlab", "push")
    # And the run page names GitLab, the project and the commit, never the token
    page = signed_in(local).get(f"{local.url}/ui/runs/{applied['id']}", timeout=30)
    header = page.text.split('id="run-source"', 1)[1].split("</dd>", 1)[0]
    for shown in ("GitLab", held.path.lower(), "push to", sha[:12], event_uuid):
        assert shown in header, shown
    assert held.token not in page.text
    # And the workspace page's source section names the project and its instance
    overview = signed_in(local).get(f"{local.url}/ui/workspaces/{ws}", timeout=30)
    bound = overview.text.split('id="source-binding"', 1)[1].split("</dl>", 1)[0]
    assert "GitLab project" in bound
    assert held.path.lower() in bound
    assert held.token not in overview.text

    # When the same delivery arrives again: the first outcome, nothing more
    before = webhook_footprint(local, ws)
    again, repeat, _ = post_hook(local, PUSH, delivered, hook_token, event_uuid)
    assert (again, repeat["duplicate"]) == (202, True)
    assert repeat["source_id"] == body["source_id"]
    assert len(webhook_footprint(local, ws)) == len(before)
    # And one workspace's token never starts another organization's workspace's runs
    status, refused, _ = post_hook(local, PUSH, push(theirs, sha), hook_token)
    assert (status, refused["status"]) == (200, "ignored")
    foreign_client = Client(Connection(local.url, admin, org))
    assert foreign_client.list_runs(foreign) == []
    assert foreign_token != hook_token

    # And no access token appears in the table, the logs or any reply
    assert local.client.gitlab_binding(ws)["project"] == held.path.lower()
    everything = [
        json.dumps(table_items(local), default=str),
        caplog.text,
        json.dumps(local.client.gitlab_binding(ws)),
        json.dumps(applied),
    ]
    leaked = [t[:10] for t in (held.token, theirs.token) for text in everything if t in text]
    assert leaked == []
    # (rpgl_<workspace>_<secret>: the secret is base64url and may itself hold "_")
    assert hook_token.split("_", 2)[2] not in everything[0]


def test_a_merge_request_plans_speculatively_with_pending_then_success(
    local: Local,
    fake_gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a workspace bound to a project's main branch
    held = project(fake_gitlab, "app")
    ws, hook_token = bind_with_cli(
        local, capsys, monkeypatch, fake_gitlab, held, kind="plan_and_apply"
    )
    sha = sha_of(held.path + "mr")
    fake_gitlab.add_commit(held, sha, {"main.tf": main_tf("mr")})

    # When a merge request against main is opened
    status, body, _ = post_hook(local, MERGE_REQUEST, merge_request(held, sha, 7), hook_token)

    # Then a speculative run plans it and the commit gets pending, then success
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(ws), what="the merge request's run")[0]
    assert run["kind"] == "speculative"
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "succeeded"
    assert done["source"]["ref"] == "refs/merge-requests/7/head"
    assert (done["source"]["event"], done["source"]["pull_request"]) == ("merge_request", 7)
    eventually(
        lambda: [s for s in fake_gitlab.statuses_for(sha) if s["state"] != "pending"],
        what="the final commit status",
    )
    reported = fake_gitlab.statuses_for(sha)
    assert [s["state"] for s in reported] == ["pending", "success"]
    assert {s["name"] for s in reported} == {f"runplane/{ws}"}
    assert reported[-1]["target_url"].endswith(f"/api/v1/runs/{run['id']}")
    # And the merge request has one note, created with the run and edited as it ended
    notes = eventually(
        lambda: [b for b in fake_gitlab.notes_of(held, 7).values() if "| succeeded |" in b],
        what="the note showing the finished run",
    )
    assert len(fake_gitlab.notes_of(held, 7)) == 1
    writes = [w[0] for w in fake_gitlab.note_writes if w[1] == held.path]
    assert writes[0] == "create"
    assert set(writes[1:]) == {"edit"}
    assert "merge request &#33;7" in notes[0]
    assert f"/ui/runs/{run['id']}" in notes[0]
    assert held.token not in notes[0]


def test_every_refused_delivery_writes_nothing(
    local: Local,
    fake_gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = project(fake_gitlab, "refused")
    ws, hook_token = bind_with_cli(local, capsys, monkeypatch, fake_gitlab, held)
    sha = sha_of(held.path)
    before = len(webhook_footprint(local, ws))
    wrong = hook_token[:-4] + ("aaaa" if not hook_token.endswith("aaaa") else "bbbb")

    # A wrong or missing token, or another workspace's ID in it: 401
    for token in (wrong, "", "rpgl_ws-nothere_" + "a" * 43):
        status, body, _ = post_hook(local, PUSH, push(held, sha), token)
        assert (status, body["code"]) == (401, "WEBHOOK_TOKEN_INVALID"), token[:8]
    # A body over the size limit, even with the right token: 413
    status, body, _ = post_hook(local, PUSH, b" " * (1024 * 1024 + 1), hook_token)
    assert (status, body["code"]) == (413, "WEBHOOK_TOO_LARGE")
    # Not JSON: 400
    status, body, _ = post_hook(local, PUSH, b"{not json", hook_token)
    assert (status, body["code"]) == (400, "INVALID_BODY")
    # An event older than the replay window: 409
    old = push(held, sha, age=timedelta(days=2))
    status, body, _ = post_hook(local, PUSH, old, hook_token)
    assert (status, body["code"]) == (409, "WEBHOOK_REPLAY_REFUSED")
    assert len(webhook_footprint(local, ws)) == before

    # An event that starts nothing is recorded once, answered with a reason
    status, body, event_uuid = post_hook(local, "Issue Hook", {"object_kind": "issue"}, hook_token)
    assert (status, body["status"]) == (200, "ignored")
    after = len(webhook_footprint(local, ws))
    # The same event UUID again, with the same body: the first outcome, nothing written
    status, body, _ = post_hook(
        local, "Issue Hook", {"object_kind": "issue"}, hook_token, event_uuid
    )
    assert (status, body["duplicate"]) == (200, True)
    # The same event UUID with another body is a replay: 409, nothing written
    status, body, _ = post_hook(local, "Issue Hook", {"object_kind": "x"}, hook_token, event_uuid)
    assert (status, body["code"]) == (409, "WEBHOOK_REPLAY_REFUSED")
    assert len(webhook_footprint(local, ws)) == after == before + 1
    # And nothing was fetched from GitLab for any of them
    assert all(path != held.path for path, _ in fake_gitlab.downloads)


def test_the_cli_shows_and_removes_a_binding_without_its_token(
    local: Local,
    fake_gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = project(fake_gitlab, "cli")
    ws, _ = bind_with_cli(local, capsys, monkeypatch, fake_gitlab, held)
    # Shown: the binding, never a token
    assert main(["workspace", "gitlab", ws, *connect(local)]) == 0
    shown = capsys.readouterr().out
    assert (held.path.lower() in shown, fake_gitlab.url in shown) == (True, True)
    assert ("glpat" in shown, "webhook token" in shown) == (False, False)
    # An https-less base URL that is not loopback is refused, naming the field
    monkeypatch.setattr("sys.stdin", io.StringIO(held.token))
    code = main(
        [
            "workspace", "gitlab", ws, "--base-url", "http://gitlab.example.com",
            "--project", held.path, "--branch", "main", *connect(local),
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code != 0
    assert "base_url" in err
    assert held.token not in out + err
    # Unbound: then 404
    assert main(["workspace", "gitlab", ws, "--unbind", *connect(local)]) == 0
    capsys.readouterr()
    assert main(["workspace", "gitlab", ws, *connect(local)]) != 0
    assert "not found" in capsys.readouterr().err.lower()
