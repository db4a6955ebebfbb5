"""``GET /api/v2/runner/first-reads`` over real HTTP: the reads a phase's engine starts
with (and an apply's lock and unlock, when they confirm its authority), each answered as
its own route answers the same session, and nothing for anyone but a runner session."""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from functions.cloud_api import first_reads
from runplane.client import Client, Connection
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cloud_api_http import call, lock, publish, raw_state, unlock
from tests.e2e.test_forged_reports_http import Captured, session_start
from tests.e2e.test_managed_runs import HELLO, new_workspace, writer_of
from tests.e2e.test_runner_authority_http import apply_session

LINEAGE = "f1a50000-0000-4000-8000-000000000001"


def answers_of(local: Local, token: str, method: str = "GET") -> dict[str, dict[str, Any]]:
    """The first reads' answers to ``method`` calls, by path."""
    response = call(local, "GET", "/api/v2/runner/first-reads", token=token)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    return {answer["path"]: answer for answer in answers if answer["method"] == method}


def session_on_state(local: Local, prefix: str) -> tuple[str, dict[str, Any], str]:
    """A workspace with a published state, a run of it awaiting approval, and an apply
    session of that run: the workspace's ID, the state version, the session's token."""
    ws = new_workspace(local, prefix)
    assert lock(local, ws).status_code == 200
    published = publish(local, ws, 1, LINEAGE, raw_state(1, LINEAGE))
    assert unlock(local, ws).status_code == 200
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    return ws, published, apply_session(local, run["id"])


def test_a_sessions_first_reads_are_its_routes_own_answers(local: Local) -> None:
    # Given a workspace with a state, and a run of it awaiting approval with an apply
    # session
    ws, published, token = session_on_state(local, "first-reads")
    name = local.client.workspace(ws)["name"]

    # When the session asks for its first reads
    answers = answers_of(local, token)

    # Then it has the entitlements, the workspace by name, the state version its run
    # pinned and that state (an apply reads no variables)
    org = local.organization
    assert sorted(answers) == sorted(
        [
            f"organizations/{org}/entitlement-set",
            f"organizations/{org}/workspaces/{name}",
            f"workspaces/{ws}/current-state-version",
            f"state-versions/{published['id']}/download",
        ]
    )
    # And each is what the route itself answers the same session, status and body
    for path, answer in answers.items():
        direct = call(local, "GET", f"/api/v2/{path}", token=token)
        assert answer["status"] == direct.status_code, path
        assert base64.b64decode(answer["body"]) == direct.content, path
        headers = {key.lower(): value for key, value in answer["headers"]}
        assert headers["content-type"] == direct.headers["Content-Type"], path
    state = base64.b64decode(answers[f"state-versions/{published['id']}/download"]["body"])
    assert json.loads(state)["serial"] == 1


def test_only_a_runner_session_has_first_reads(local: Local) -> None:
    # Given a person's token and no token at all
    # When each asks for first reads
    as_person = call(local, "GET", "/api/v2/runner/first-reads")
    anonymous = call(local, "GET", "/api/v2/runner/first-reads", auth=False)

    # Then the person is refused with a reason (403), and no one is let in unnamed (401)
    assert as_person.status_code == 403, as_person.text
    assert as_person.json()["errors"][0]["status"] == "403"
    assert anonymous.status_code == 401


def test_two_organizations_sessions_each_read_only_their_own_first_reads(local: Local) -> None:
    # Given a run awaiting approval in a workspace of each of two organizations, and an
    # apply session of each
    other_org, other_token = local.other_organization(unique("first-reads-org"))
    other = Client(Connection(local.url, other_token, other_org))
    runs = {}
    for org, client in ((local.organization, local.client), (other_org, other)):
        workspace = client.create_workspace(unique("first-reads-tenant"))
        run = client.create_run(workspace["id"], HELLO)
        client.watch(run["id"], until=["awaiting_approval"], timeout=120)
        runs[org] = (workspace, apply_session(local, run["id"]))

    # When both sessions ask for their first reads at once, several times
    with ThreadPoolExecutor(max_workers=4) as pool:
        asked = [(org, pool.submit(answers_of, local, token)) for org, (_, token) in runs.items()]
        asked += [(org, pool.submit(answers_of, local, token)) for org, (_, token) in runs.items()]
        replies = [(org, future.result()) for org, future in asked]

    # Then each got its own organization's entitlements and its own workspace, and nothing
    # that names the other organization or its workspace
    for org, answers in replies:
        workspace, _ = runs[org]
        foreign_org = other_org if org == local.organization else local.organization
        foreign_workspace, _ = runs[foreign_org]
        assert f"organizations/{org}/workspaces/{workspace['name']}" in answers
        assert f"workspaces/{workspace['id']}/current-state-version" in answers
        text = json.dumps(answers) + "".join(
            base64.b64decode(answer["body"]).decode() for answer in answers.values()
        )
        assert foreign_workspace["id"] not in text
        assert f"organizations/{foreign_org}/" not in text


def test_a_state_over_the_bound_is_left_for_the_engine_to_download(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run pinned to a state larger than the first reads carry (the bound lowered
    # to a few bytes), and its apply session
    ws, published, token = session_on_state(local, "first-reads-large")
    monkeypatch.setattr(first_reads, "MAX_BUNDLED_STATE", 16)

    # When the session asks for its first reads
    answers = answers_of(local, token)

    # Then they name the state version but not its state, which its own route still gives
    assert f"workspaces/{ws}/current-state-version" in answers
    download = f"state-versions/{published['id']}/download"
    assert download not in answers
    assert call(local, "GET", f"/api/v2/{download}", token=token).status_code == 200


def applying_session(local: Local, monkeypatch: pytest.MonkeyPatch, prefix: str) -> tuple[str, str]:
    """A workspace and the session of its run's apply, started as the runner starts it
    (the sandbox played by this test): the run applying under the workspace's lock."""
    ws = new_workspace(local, prefix)
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    plan_sha256 = local.client.review(run["id"])["plan"]["plan_sha256"]
    launcher = local.stack.launcher
    assert launcher is not None
    taken = Captured()
    monkeypatch.setattr(launcher, "launch", taken.launch)
    local.client.decide(run["id"], "approve")
    launch = taken.next("apply", run["id"])
    token = str(session_start(local, launch)["token"])
    start = {"handle": launch.apply_start, "request": {"plan_sha256": plan_sha256}}
    started = call(local, "POST", "/api/v1/runner/apply-start", token=token, json=start)
    assert started.status_code == 200, started.text
    assert writer_of(ws)[0] == run["id"]
    return ws, token


def test_an_applys_first_reads_carry_its_lock_and_unlock_as_their_routes_answer(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run applying under its workspace's lock, and its apply session
    ws, token = applying_session(local, monkeypatch, "first-reads-lock")

    # When the session asks for its first reads
    confirmations = answers_of(local, token, method="POST")

    # Then they carry the lock and unlock of its own workspace, and nothing else to POST
    lock_path, unlock_path = (f"workspaces/{ws}/actions/{action}" for action in ("lock", "unlock"))
    assert sorted(confirmations) == [lock_path, unlock_path]
    # And each is what its route answers the same session (status and body: a JSON:API
    # workspace document naming the run's lock), which changed nothing
    for path, answer in confirmations.items():
        direct = call(local, "POST", f"/api/v2/{path}", token=token, json={})
        assert (answer["status"], direct.status_code) == (200, 200), direct.text
        assert base64.b64decode(answer["body"]) == direct.content, path
        document = json.loads(direct.content)["data"]
        assert (document["type"], document["id"]) == ("workspaces", ws)
        assert document["attributes"]["locked"] is True
    assert writer_of(ws)[0] is not None


def test_a_session_without_apply_authority_gets_no_lock_or_unlock(local: Local) -> None:
    # Given an apply session of a run that is not applying (awaiting approval)
    ws, _, token = session_on_state(local, "first-reads-no-lock")

    # When it asks for its first reads
    confirmations = answers_of(local, token, method="POST")

    # Then they carry no lock or unlock: its engine's own calls meet the refusal
    assert confirmations == {}
    refused = call(local, "POST", f"/api/v2/workspaces/{ws}/actions/lock", token=token, json={})
    assert refused.status_code == 409, refused.text
