"""Audit completeness over the embedded stack's real entry points: each security event
the trail lists, performed once (a login link, the team commands of the CLI, a real run
approved, another overridden and rejected, a recovery, cloud settings set and cleared, a
GitLab delivery with a wrong token), writes exactly one typed record with its actor,
source address, organization, object and outcome, nothing else, and no secret; another
organization reads none of them; ``runplane audit list`` shows them by time range."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from runplane.client import Client, Connection
from runplane.domain.capabilities import handle_hash
from runplane.domain.identity import ROLES, Permission
from runplane.domain.web_session import Grant, new_secret
from runplane.store import web_sessions as web_store
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cli import Capture, cli, connect
from tests.e2e.test_gitlab import PUSH, bind_with_cli, post_hook, project, push
from tests.e2e.test_managed_runs import HELLO, PARTIAL, config
from tests.e2e.test_policy import soft_review_policy
from tests.gitlab_fake import FakeGitLab

EXTERNAL_ID = "ext-id-audit-9c41d2"
PLAN_ROLE = "arn:aws:iam::123456789012:role/runplane-plan"
LOOPBACK = "127.0.0.1"


@pytest.fixture(scope="module")
def fake_gitlab() -> Any:
    fake = FakeGitLab().start()
    try:
        yield fake
    finally:
        fake.stop()


def trail(client: Client, **query: str) -> list[dict[str, Any]]:
    """Every record of the client's organization in the range, oldest first, by pages
    of five (the paging is part of what is read)."""
    records: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = client.audit(cursor=cursor, size=5, **query)
        records.extend(page["records"])
        cursor = page["next_cursor"]
        if not cursor:
            return records


def one(records: list[dict[str, Any]], action: str) -> dict[str, Any]:
    """The one record of ``action``: zero or two is a failure of completeness."""
    found = [r for r in records if r["action"] == action]
    assert len(found) == 1, (action, found)
    return found[0]


def organization(local: Local, prefix: str) -> tuple[str, str, str, Client]:
    """A fresh organization (its trail holds only this test's records): its name, ID,
    admin token and a client with that token."""
    name, token = local.other_organization(unique(prefix))
    services = local.stack.services
    assert services is not None
    org_id = services.workspaces.organization_id_of(name)
    return name, org_id, token, Client(Connection(local.url, token, name))


def token_id_of(local: Local, token: str) -> str:
    services = local.stack.services
    assert services is not None
    return services.identity.authenticate(f"Bearer {token}").id


def test_each_security_event_writes_exactly_one_record_with_every_field(
    local: Local,
    tmp_path: Path,
    capsys: Capture,
    monkeypatch: pytest.MonkeyPatch,
    fake_gitlab: FakeGitLab,
) -> None:
    # Given two fresh organizations, the first with a soft-mandatory policy on one
    # workspace and two real runs started (they plan while the rest happens)
    name, org_id, admin_token, admin = organization(local, "complete")
    _, _, _, other = organization(local, "complete-other")
    started = datetime.now(UTC) - timedelta(seconds=1)
    admin_ref = f"token:{token_id_of(local, admin_token)}"
    auth = connect(local, admin_token, name)
    reviewed_ws = admin.create_workspace(unique("reviewed"))["id"]
    partial_ws = admin.create_workspace(unique("partial"))["id"]
    soft = admin.publish_policy_set(soft_review_policy(unique("review")))
    admin.attach_policy_set(soft["name"], [reviewed_ws])
    to_reject = admin.create_run(reviewed_ws, HELLO)
    to_approve = admin.create_run(partial_ws, config(tmp_path, PARTIAL))
    held = project(fake_gitlab, "audited")
    bound_ws, hook_token = bind_with_cli(local, capsys, monkeypatch, fake_gitlab, held, auth=auth)
    # (creating workspaces, publishing and attaching a policy set, binding GitLab and
    # creating runs are not security records)
    assert trail(admin) == []

    # When a person signs in with a login link
    services = local.stack.services
    assert services is not None
    code = services.web_sessions.issue_login_code(
        org_id, "alice", frozenset(Permission), created_by="tests"
    )
    signed = requests.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    assert signed.status_code == 303, signed.text
    session_secret = signed.cookies["runplane_session"]
    assert session_secret

    # And an admin changes a team through the CLI, step by step
    def team(*argv: str) -> str:
        exit_code, out, err = cli(capsys, "team", *argv, *auth)
        assert exit_code == 0, err
        return out

    team("create", "platform")
    team_id = admin.team_id("platform")
    team("update", "platform", "--group", "platform-engineers")
    team("add-member", "platform", "bea")
    team("grant", "platform", "--workspace", reviewed_ws, "--level", "write")
    team_token_out = team("token", "platform", "--name", "pipeline", "--json")
    team_token = json.loads(team_token_out)
    team("remove-member", "platform", "bea")
    team("revoke", "platform", "--workspace", reviewed_ws)
    team("delete", "platform")
    # (a reader's attempt is refused before the service changes anything: not recorded)
    reader = services.identity.issue_token(org_id, "reader", ROLES["reader"], created_by="tests")
    exit_code, _, err = cli(
        capsys, "team", "create", "readers", *connect(local, reader.token, name)
    )
    assert exit_code != 0
    assert "teams:manage" in err

    # And the cloud settings of a workspace are set (with an external ID) and cleared
    settings_url = f"{local.url}/api/v1/workspaces/{reviewed_ws}/cloud-settings"
    bearer = {"Authorization": f"Bearer {admin_token}"}
    put = requests.put(
        settings_url,
        headers=bearer,
        json={"aws_plan_role_arn": PLAN_ROLE, "aws_external_id": EXTERNAL_ID},
        timeout=30,
    )
    assert put.status_code == 200, put.text
    cleared = requests.delete(settings_url, headers=bearer, timeout=30)
    assert cleared.status_code == 200, cleared.text

    # And a GitLab delivery arrives with a wrong token for the bound workspace
    wrong = hook_token[:-4] + ("aaaa" if not hook_token.endswith("aaaa") else "bbbb")
    status, refusal, event_uuid = post_hook(local, PUSH, push(held, "a" * 40), wrong)
    assert (status, refusal["code"]) == (401, "WEBHOOK_TOKEN_INVALID")

    # And the soft failure is overridden and that run rejected; the other is approved,
    # fails mid-apply holding its workspace, and is recovered
    admin.watch(to_reject["id"], until=["awaiting_approval"], timeout=180)
    admin.override_policy(to_reject["id"], "reviewed in the change ticket")
    admin.decide(to_reject["id"], "reject", "not this week")
    admin.watch(to_approve["id"], until=["awaiting_approval"], timeout=180)
    admin.decide(to_approve["id"], "approve")
    failed = admin.watch(to_approve["id"], timeout=180)
    assert failed["status"] == "apply_failed", failed["status_reason"]
    panel = failed["recovery"]
    admin.recover(
        to_approve["id"],
        {
            "resolution": "current_state_verified",
            "reason": "the provider shows only the good thing",
            "confirm_authority_revocation": True,
            "current_state_version_id": panel["current_state_version_id"],
        },
    )
    ended = datetime.now(UTC) + timedelta(seconds=1)

    # Then the trail holds exactly one record of each event, and nothing else
    records = trail(admin, since=started.isoformat())
    assert Counter(r["action"] for r in records) == Counter(
        [
            "session.signed_in",
            "team.created",
            "team.updated",
            "team.member_added",
            "team.access_set",
            "team.token_created",
            "team.member_removed",
            "team.access_removed",
            "team.deleted",
            "cloud_settings.set",
            "cloud_settings.cleared",
            "webhook.refused",
            "policy.overridden",
            "run.rejected",
            "run.approved",
            "run.recovered",
            "state.recovered",
        ]
    )
    # And every record names the organization, the caller's address and an outcome
    assert {r["organization_id"] for r in records} == {org_id}
    assert {r["source_address"] for r in records} == {LOOPBACK}
    # (the webhook's refusal is the only refused one)
    assert {r["action"] for r in records if r["outcome"] != "succeeded"} == {"webhook.refused"}
    assert all(r["actor"] and r["actor_display"] for r in records)

    # And each names its actor and object
    signed_in = one(records, "session.signed_in")
    assert signed_in["actor"] == "user:alice"
    assert signed_in["object"]["kind"] == "session"
    assert signed_in["details"]["method"] == "login_link"
    by_admin = [r for r in records if r["action"] not in {"session.signed_in", "webhook.refused"}]
    assert {r["actor"] for r in by_admin} == {admin_ref}
    for action in (
        "team.created",
        "team.updated",
        "team.member_added",
        "team.access_set",
        "team.member_removed",
        "team.access_removed",
        "team.deleted",
    ):
        assert one(records, action)["object"] == {"kind": "team", "id": team_id}, action
    assert one(records, "team.member_added")["details"]["user"] == "bea"
    assert one(records, "team.updated")["details"]["groups"] == "platform-engineers"
    assert one(records, "team.access_set")["details"]["level"] == "write"
    made_token = one(records, "team.token_created")
    assert made_token["object"] == {"kind": "token", "id": team_token["id"]}
    assert made_token["details"]["team_id"] == team_id
    for action in ("cloud_settings.set", "cloud_settings.cleared"):
        assert one(records, action)["object"] == {"kind": "workspace", "id": reviewed_ws}
    refused = one(records, "webhook.refused")
    assert refused["object"] == {"kind": "workspace", "id": bound_ws}
    assert refused["actor"] == "webhook:gitlab"
    assert refused["details"]["reason"] == "WEBHOOK_TOKEN_INVALID"
    assert refused["details"]["delivery_id"] == event_uuid
    for action, run in (
        ("policy.overridden", to_reject),
        ("run.rejected", to_reject),
        ("run.approved", to_approve),
        ("run.recovered", to_approve),
    ):
        assert one(records, action)["object"] == {"kind": "run", "id": run["id"]}, action
    assert one(records, "state.recovered")["object"] == {"kind": "workspace", "id": partial_ws}
    assert one(records, "policy.overridden")["details"]["reason"] == "reviewed in the change ticket"

    # And no record holds a secret
    text = json.dumps(records)
    for secret in (
        admin_token,
        team_token["token"],
        reader.token,
        code,
        session_secret,
        EXTERNAL_ID,
        hook_token,
        wrong,
        held.token,
    ):
        assert secret not in text

    # And the other organization reads none of them
    assert not {r["id"] for r in trail(other)} & {r["id"] for r in records}

    # And `runplane audit list` shows them in the range, and nothing outside it
    exit_code, out, err = cli(
        capsys,
        "audit",
        "list",
        "--since",
        started.isoformat(),
        "--until",
        ended.isoformat(),
        *auth,
    )
    assert exit_code == 0, err
    for record in records:
        assert f"{record['action']}  {record['outcome']}  {record['actor']}" in out
        assert f"on {record['object']['kind']}:{record['object']['id']}" in out
    exit_code, out, err = cli(capsys, "audit", "list", "--since", ended.isoformat(), *auth)
    assert (exit_code, out.strip()) == (0, "no audit records in that range"), err


def test_an_expired_login_link_is_refused_and_recorded_a_spent_one_is_refused_only(
    local: Local,
) -> None:
    # Given a fresh organization, a login link already used and one past its expiry
    _, org_id, _, admin = organization(local, "links")
    services = local.stack.services
    assert services is not None
    spent = services.web_sessions.issue_login_code(
        org_id, "alice", frozenset(Permission), created_by="tests"
    )
    first = requests.get(f"{local.url}/ui/login?code={spent}", allow_redirects=False, timeout=30)
    assert first.status_code == 303
    now = services.clock.now()
    expired = new_secret()
    web_store.put_login_code(
        handle_hash(expired),
        Grant(org_id, "bob", frozenset(Permission), now - timedelta(hours=1), now),
        "tests",
    ).commit()
    signed_in_before = trail(admin)

    # When each is opened
    answers = [
        requests.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
        for code in (spent, expired)
    ]

    # Then both are refused, and neither opens a session
    for answer in answers:
        assert answer.status_code == 403
        assert "LOGIN_LINK_REFUSED" in answer.text
        assert "Set-Cookie" not in answer.headers
    # And only the expired one, which still names its organization, is recorded: once,
    # refused, naming the person and the address (a spent link names nothing any more)
    new = [r for r in trail(admin) if r not in signed_in_before]
    assert len(new) == 1, new
    (record,) = new
    assert (record["action"], record["outcome"]) == ("session.signed_in", "refused")
    assert record["actor"] == "user:bob"
    assert record["organization_id"] == org_id
    assert record["source_address"] == LOOPBACK
    assert record["details"] == {"method": "login_link", "user": "bob", "reason": "expired"}
    assert record["object"] == {"kind": "session", "id": "-"}
    assert spent not in json.dumps(new)
    assert expired not in json.dumps(new)
