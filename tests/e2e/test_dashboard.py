"""The dashboard over real HTTP: sign-in by one-time link, cookie sessions, CSRF,
and the run page driving an approval to Applied."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from runplane.domain.capabilities import handle_hash
from runplane.domain.identity import ROLES, Permission
from runplane.domain.recovery import Recovery, RecoveryRequest, RecoveryState, Resolution
from runplane.domain.web_session import Grant, WebSession, new_secret
from runplane.store import recovery as recovery_store
from runplane.store import web_sessions as web_store
from tests.e2e.conftest import Local
from tests.e2e.dashboard_listing import every_listing_page
from tests.e2e.test_managed_runs import HELLO, PARTIAL, config, new_workspace, writer_of

_HIDDEN = re.compile(r'<input type="hidden" name="([a-z0-9_]+)" value="([^"]*)">')


def signed_in(local: Local, organization_id: str | None = None) -> requests.Session:
    """A browser-like session signed in through a fresh login link."""
    browser = requests.Session()
    if organization_id is None:
        link = local.stack.login_link()
    else:
        services = local.stack.services
        assert services is not None
        code = services.web_sessions.issue_login_code(
            organization_id, "admin", frozenset(Permission), created_by="tests"
        )
        link = f"{local.url}/ui/login?code={code}"
    answer = browser.get(link, allow_redirects=False, timeout=30)
    assert answer.status_code == 303, answer.text
    return browser


def signed_in_long_ago(local: Local, minutes: int) -> requests.Session:
    """A browser whose session was opened ``minutes`` ago (and is still valid)."""
    services = local.stack.services
    assert services is not None
    now = services.clock.now()
    grant = Grant(
        services.workspaces.organization_id_of(local.organization),
        "admin",
        frozenset(Permission),
        now - timedelta(minutes=minutes),
        now + timedelta(hours=1),
    )
    code, secret = new_secret(), new_secret()
    web_store.put_login_code(handle_hash(code), grant, "tests").commit()
    session = WebSession(f"wss-old-{minutes}", grant)
    web_store.redeem(handle_hash(code), handle_hash(secret), session).commit()
    browser = requests.Session()
    browser.cookies.set("runplane_session", secret)
    return browser


def form_fields(page: str, form_id: str) -> dict[str, str]:
    start = page.index(f'id="{form_id}"')
    form = page[start : page.index("</form>", start)]
    return {name: html.unescape(value) for name, value in _HIDDEN.findall(form)}


def awaiting_run(local: Local, prefix: str) -> dict[str, Any]:
    ws = new_workspace(local, prefix)
    run = local.client.create_run(ws, HELLO)
    return local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)


def test_a_login_link_signs_in_once_with_a_strict_http_only_cookie(local: Local) -> None:
    # Given a login link printed for the admin
    link = local.stack.login_link()

    # When it is opened
    first = requests.get(link, allow_redirects=False, timeout=30)

    # Then it sets a session cookie with the right flags and redirects to the workspaces
    assert first.status_code == 303
    assert first.headers["Location"] == "/"
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith("runplane_session=")
    flags = [flag.strip() for flag in cookie.split(";")[1:]]
    assert {"Path=/", "HttpOnly", "SameSite=Strict"} <= set(flags)
    assert any(flag.startswith("Max-Age=") and int(flag[8:]) > 0 for flag in flags)
    # (plain HTTP on loopback: Secure would stop the browser from sending it back)
    assert "Secure" not in flags
    secret = first.cookies["runplane_session"]
    assert secret is not None
    assert secret not in link
    page = requests.get(
        f"{local.url}/", cookies={"runplane_session": secret}, allow_redirects=False, timeout=30
    )
    assert page.status_code == 200
    assert "<h1>Workspaces</h1>" in page.text

    # And a second use of the same link is refused and opens nothing
    second = requests.get(link, allow_redirects=False, timeout=30)
    assert second.status_code == 403
    assert "LOGIN_LINK_REFUSED" in second.text
    assert "Set-Cookie" not in second.headers


def test_pages_need_a_session_and_sign_out_ends_it(local: Local) -> None:
    # Given no session, or a made-up one
    for cookies in ({}, {"runplane_session": "made-up"}):
        # When a page is requested
        for path in ("/", "/ui/workspaces/ws-x", "/ui/runs/run-x"):
            answer = requests.get(
                f"{local.url}{path}", cookies=cookies, allow_redirects=False, timeout=30
            )
            # Then the browser is sent to the sign-in notice
            assert answer.status_code == 303, path
            assert answer.headers["Location"] == "/ui/sign-in"
    notice = requests.get(f"{local.url}/ui/sign-in", timeout=30)
    assert notice.status_code == 401
    assert 'id="sign-in-notice"' in notice.text

    # Given a signed-in browser
    browser = signed_in(local)
    page = browser.get(f"{local.url}/", timeout=30).text
    token = form_fields(page, "logout-form")["csrf"]
    # When it signs out
    out = browser.post(
        f"{local.url}/ui/logout", data={"csrf": token}, allow_redirects=False, timeout=30
    )
    # Then the session is gone on the server, not only in the browser
    assert out.status_code == 303
    assert "Max-Age=0" in out.headers["Set-Cookie"]
    again = browser.get(f"{local.url}/", allow_redirects=False, timeout=30)
    assert again.status_code == 303


def test_approving_through_the_run_page_applies_the_run(local: Local) -> None:
    # Given a run awaiting approval and a signed-in browser on its page
    run = awaiting_run(local, "dash-approve")
    browser = signed_in(local)
    page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text

    # Then the page shows the header's source identity and the approval bar
    binding = run["approval"]["binding"]
    assert 'id="approval-bar"' in page
    assert f'<code id="plan-digest">{binding["plan_sha256"]}</code>' in page
    assert run["input"]["configuration_sha256"] in page
    assert run["approval"]["expires_at"] in page
    assert page.index('id="run-header"') < page.index('id="stage-timeline"')
    # And names its creator by the token's name, the reference on hover
    assert run["created_by_display"] == "User admin"
    assert f'<span class="person" title="{run["created_by"]}">admin (API token)</span>' in page
    fields = form_fields(page, "approve-form")
    assert fields["plan_sha256"] == binding["plan_sha256"]
    assert '<button type="submit" class="primary">Approve</button>' in page
    assert 'id="plan-log"' in page

    # When the approve form is sent, from this origin
    answer = browser.post(
        f"{local.url}/ui/runs/{run['id']}/approve",
        data=fields,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )

    # Then the run applies, and its page reads Applied with both logs
    assert answer.status_code == 303, answer.text
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "succeeded"
    assert done["approval"]["status"] == "approved"
    final = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text
    assert 'id="run-label">Applied</span>' in final
    assert 'id="apply-log"' in final
    assert "Apply complete!" in final
    assert 'id="approve-form"' not in final


def test_a_post_without_the_right_csrf_token_or_from_elsewhere_changes_nothing(
    local: Local,
) -> None:
    # Given a run awaiting approval and a signed-in browser holding its approve form
    run = awaiting_run(local, "dash-csrf")
    browser = signed_in(local)
    page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text
    fields = form_fields(page, "approve-form")
    url = f"{local.url}/ui/runs/{run['id']}/approve"
    without = {k: v for k, v in fields.items() if k != "csrf"}

    # When it is sent without the token, with a wrong one, or from another origin
    attempts = [
        (without, {}),
        ({**fields, "csrf": "0" * 64}, {}),
        ({**fields, "csrf": fields["csrf"][:-1] + "é"}, {}),
        (fields, {"Origin": "https://evil.example"}),
        (fields, {"Origin": "null"}),
    ]
    for data, headers in attempts:
        answer = browser.post(url, data=data, headers=headers, allow_redirects=False, timeout=30)
        # Then each is refused with a typed code
        assert answer.status_code == 403, (data, headers)
        assert "CSRF_REFUSED" in answer.text

    # And the run is unchanged
    after = local.client.review(run["id"])
    assert after["status"] == "awaiting_approval"
    assert after["approval"]["status"] == "waiting"
    local.client.cancel(run["id"])


def test_another_organizations_run_and_workspace_are_not_found(local: Local) -> None:
    # Given a run of the default organization, and a browser signed in to another one
    ws = new_workspace(local, "dash-tenant")
    run = local.client.create_run(ws, HELLO, kind="plan_only")
    other, _ = local.other_organization("dash-other")
    assert local.stack.services is not None
    browser = signed_in(local, local.stack.services.workspaces.organization_id_of(other))

    # When it asks for them, or tries to approve the run
    run_page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30)
    ws_page = browser.get(f"{local.url}/ui/workspaces/{ws}", timeout=30)
    token = form_fields(browser.get(f"{local.url}/", timeout=30).text, "logout-form")["csrf"]
    decide = browser.post(
        f"{local.url}/ui/runs/{run['id']}/approve", data={"csrf": token}, timeout=30
    )

    # Then each is answered exactly like a missing one
    for answer in (run_page, ws_page, decide):
        assert answer.status_code == 404
        assert "NOT_FOUND" in answer.text
    # And its own workspace list does not show the other organization's workspace
    assert ws not in every_listing_page(browser, local.url)
    local.client.watch(run["id"], timeout=180)


def test_html_in_a_workspace_description_and_a_log_line_is_escaped(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace whose description and run log carry markup
    ws = new_workspace(local, "dash-escape")
    services = local.stack.services
    assert services is not None
    admin = services.identity.authenticate(f"Bearer {local.admin_token}")
    marker = "<script>alert('description')</script>"
    services.workspaces.update(admin, services.workspaces.by_id(admin, ws), description=marker)
    # (variable values are redacted in logs: the markup is a literal of the configuration)
    text = (HELLO / "main.tf").read_text(encoding="utf-8")
    assert '"platform team"' in text
    markup = config(tmp_path, text.replace('"platform team"', '"<img src=x onerror=alert(1)>"'))
    run = local.client.create_run(ws, markup, kind="plan_only")
    local.client.watch(run["id"], timeout=180)
    browser = signed_in(local)

    # When the workspace list, the workspace and the run page are read
    pages = [
        browser.get(f"{local.url}{path}", timeout=30).text
        for path in ("/", f"/ui/workspaces/{ws}", f"/ui/runs/{run['id']}")
    ]

    # Then the markup is shown as text, never as markup
    for page in pages[:2]:
        assert marker not in page
        assert "&lt;script&gt;alert(" in page
    assert "<img" not in pages[2]
    assert "hello, &lt;img src=x onerror=alert(1)&gt;" in pages[2]


def test_a_run_past_its_approval_deadline_shows_the_expiry_and_no_decision(
    local: Local,
) -> None:
    # Given a run whose approval window of 3 seconds ran out
    ws = new_workspace(local, "dash-expired")
    local.client.set_approval_window(ws, 3)
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    expired = local.client.watch(run["id"], timeout=60)
    assert expired["status"] == "expired"
    browser = signed_in(local)

    # When its page is read
    page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text

    # Then it shows the deadline as passed and offers no decision
    assert 'id="deadline-passed"' in page
    assert expired["approval"]["expires_at"] in page
    assert 'id="approve-form"' not in page
    closed = page[page.index('id="decision-closed"') :]
    assert closed.index('<button type="button" disabled>Approve</button>') < closed.index("</p>")
    assert 'id="run-label">Expired</span>' in page


def failed_apply_holding_the_workspace(local: Local, tmp_path: Path, prefix: str) -> dict[str, Any]:
    """A run whose apply failed after publishing part of its state: it keeps the
    workspace's writer authority until an operator recovers it."""
    ws = new_workspace(local, prefix)
    run = local.client.create_run(ws, config(tmp_path, PARTIAL))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "apply_failed", done["status_reason"]
    assert writer_of(ws)[0] == run["id"]
    return done


def test_recovering_through_the_run_page_releases_the_workspace_and_refusals_write_nothing(
    local: Local, tmp_path: Path
) -> None:
    # Given a run holding its workspace for recovery, and its page in a fresh session
    run = failed_apply_holding_the_workspace(local, tmp_path, "dash-recover")
    ws = run["workspace_id"]
    browser = signed_in(local)
    url = f"{local.url}/ui/runs/{run['id']}"
    page = browser.get(url, timeout=30).text

    # Then the panel compares the pre-apply and current state pointers and offers the form
    panel = run["recovery"]
    assert panel["status"] == "required"
    assert page.index('id="approval-bar"') < page.index('id="recovery-panel"')
    assert page.index('id="recovery-panel"') < page.index('id="stage-timeline"')
    assert f"<code>{panel['current_state_version_id']}</code> (moved)" in page
    assert 'id="recover-form"' in page
    assert 'id="step-up-note"' not in page
    fields = form_fields(page, "recover-form")
    assert fields["current_state_version_id"] == panel["current_state_version_id"]
    valid = {
        **fields,
        "resolution": "current_state_verified",
        "reason": "the provider shows only the good thing",
        "confirm_authority_revocation": "yes",
    }
    # (a browser sends an empty file part when no file is chosen)
    no_file = {"emergency_state": ("", b"", "application/octet-stream")}
    refusals: list[tuple[requests.Session, dict[str, str], dict[str, str], int, str]] = [
        # When the confirmation is missing
        (browser, {**valid, "confirm_authority_revocation": ""}, {}, 422, "INVALID_INPUT"),
        # When the reason is blank
        (browser, {**valid, "reason": "  "}, {}, 422, "INVALID_INPUT"),
        # When the form comes from another origin
        (browser, valid, {"Origin": "https://evil.example"}, 403, "CSRF_REFUSED"),
        # When the session was opened more than 15 minutes ago
        (signed_in_long_ago(local, 20), {}, {}, 403, "STEP_UP_REQUIRED"),
    ]
    for who, data, headers, status, code in refusals:
        if who is not browser:
            stale = who.get(url, timeout=30).text
            assert 'id="step-up-note"' in stale
            data = {**valid, "csrf": form_fields(stale, "recover-form")["csrf"]}
        answer = who.post(
            f"{url}/recover",
            data=data,
            files=no_file,
            headers=headers,
            allow_redirects=False,
            timeout=30,
        )
        # Then each is refused with a readable typed error, and a way back to the run
        assert answer.status_code == status, answer.text
        assert f"<strong>{code}</strong>" in answer.text
        assert f'<a href="/ui/runs/{run["id"]}" id="back-to-run">' in answer.text
        # And nothing was written: the run still holds the workspace, recovery not begun
        assert writer_of(ws)[0] == run["id"]
        assert local.client.review(run["id"])["recovery"]["status"] == "required"

    # When the operator sends the form with a reason and the confirmation
    answer = browser.post(
        f"{url}/recover",
        data=valid,
        files=no_file,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )

    # Then the workspace is released and the page shows the completed recovery
    assert answer.status_code == 303, answer.text
    assert writer_of(ws) == (None, None)
    after = local.client.review(run["id"])
    assert (after["status"], after["recovery"]["status"]) == ("apply_failed", "completed")
    final = browser.get(url, timeout=30).text
    assert 'id="recovery-result"' in final
    assert "the provider shows only the good thing" in final
    assert 'id="recover-form"' not in final


def test_canceling_through_the_run_page_ends_the_run(local: Local) -> None:
    # Given a run awaiting approval, and its page offering to cancel it
    run = awaiting_run(local, "dash-cancel")
    browser = signed_in(local)
    page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text
    fields = form_fields(page, "cancel-form")

    # When the cancel form is sent without its token, then with it
    url = f"{local.url}/ui/runs/{run['id']}/cancel"
    refused = browser.post(url, data={}, allow_redirects=False, timeout=30)
    assert refused.status_code == 403
    assert local.client.review(run["id"])["status"] == "awaiting_approval"
    answer = browser.post(
        url, data=fields, headers={"Origin": local.url}, allow_redirects=False, timeout=30
    )

    # Then the run is canceled, and its page offers no more actions
    assert answer.status_code == 303, answer.text
    assert local.client.review(run["id"])["status"] == "canceled"
    final = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text
    assert 'id="cancel-form"' not in final
    assert 'id="approve-form"' not in final
    # And canceling again is refused with the run's real outcome
    again = browser.post(url, data=fields, allow_redirects=False, timeout=30)
    assert again.status_code == 409, again.text


def test_the_live_log_endpoint_pages_a_log_by_offset(local: Local) -> None:
    # Given a finished plan-only run
    ws = new_workspace(local, "dash-live")
    run = local.client.create_run(ws, HELLO, kind="plan_only")
    local.client.watch(run["id"], timeout=180)
    full = local.client.log(run["id"], "plan")
    browser = signed_in(local)
    base = f"{local.url}/ui/runs/{run['id']}/logs"

    # When the page reads the plan log from the start, then from the middle
    first = browser.get(f"{base}/plan?offset=0", timeout=30).json()
    middle = len(full.encode()) // 2
    rest = browser.get(f"{base}/plan?offset={middle}", timeout=30).json()

    # Then each read carries the bytes from its offset, where to go on, and the end
    assert (first["status"], first["terminal"]) == ("succeeded", True)
    assert first["text"] == full
    assert first["next_offset"] == first["length"] == len(full.encode())
    assert first["at_end"] is True
    assert rest["offset"] == middle
    assert rest["text"] == full.encode()[middle:].decode()
    # And a phase that never started, a bad offset, and no session are answered plainly
    assert browser.get(f"{base}/apply?offset=0", timeout=30).json()["started"] is False
    bad = browser.get(f"{base}/plan?offset=-1", timeout=30)
    assert bad.status_code == 422
    anonymous = requests.get(f"{base}/plan?offset=0", allow_redirects=False, timeout=30)
    assert anonymous.status_code == 303


def prepared_by_someone_else(local: Local, run: dict[str, Any], lease_left: timedelta) -> str:
    """A recovery of ``run`` another operator prepared (current state verified) and left,
    its lease running for ``lease_left`` more (negative: it ran out)."""
    services = local.stack.services
    assert services is not None
    now = services.clock.now()
    verified = run["recovery"]["current_state_version_id"]
    evidence = RecoveryRequest(Resolution.CURRENT_STATE_VERIFIED, "night shift", True, verified)
    holder = "user:night-shift"
    recovery_store.prepare(
        Recovery(
            id=f"rcv-{run['id'][4:]}",
            run_id=run["id"],
            organization_id=services.workspaces.organization_id_of(local.organization),
            workspace_id=run["workspace_id"],
            state=RecoveryState.PREPARED,
            holder=holder,
            generation=1,
            fingerprint=evidence.fingerprint(),
            lease_expires_at=now + lease_left,
            target_artifact_id=None,
            body={
                "resolution": evidence.resolution.value,
                "reason": evidence.reason,
                "prepared_by": holder,
                "current_state_version_id": verified,
                "pre_apply_state_version_id": run["input"]["predecessor_state_version_id"],
                "takeovers": [],
            },
            created_at=now - timedelta(minutes=20),
            updated_at=now - timedelta(minutes=20),
        )
    ).commit()
    return holder


def test_a_recovery_left_by_another_operator_is_taken_over_through_the_page_once_its_lease_ran_out(
    local: Local, tmp_path: Path
) -> None:
    # Given a run needing recovery that another operator prepared and left
    run = failed_apply_holding_the_workspace(local, tmp_path, "dash-takeover")
    holder = prepared_by_someone_else(local, run, timedelta(minutes=5))
    browser = signed_in(local)
    url = f"{local.url}/ui/runs/{run['id']}"

    # Then while their lease runs, the page offers no takeover and a submission is refused
    page = browser.get(url, timeout=30).text
    assert holder in page
    assert re.search(r'<input type="checkbox" name="takeover"[^>]* disabled', page)
    fields = form_fields(page, "recover-form")
    valid = {
        **fields,
        "resolution": "current_state_verified",
        "reason": "picking up the night shift's recovery",
        "confirm_authority_revocation": "yes",
        "takeover": "yes",
    }
    no_file = {"emergency_state": ("", b"", "application/octet-stream")}
    leased = browser.post(
        f"{url}/recover", data=valid, files=no_file, headers={"Origin": local.url}, timeout=30
    )
    assert leased.status_code == 409, leased.text
    assert "<strong>RECOVERY_LEASED</strong>" in leased.text
    assert writer_of(run["workspace_id"])[0] == run["id"]

    # When the lease has run out (the other operator never came back)
    recovery_store_lease_ran_out(local, run["id"])
    page = browser.get(url, timeout=30).text
    assert not re.search(r'<input type="checkbox" name="takeover"[^>]* disabled', page)
    # And the operator sends the form without confirming the takeover
    unconfirmed = {k: v for k, v in valid.items() if k != "takeover"}
    unconfirmed["csrf"] = form_fields(page, "recover-form")["csrf"]
    refused = browser.post(
        f"{url}/recover", data=unconfirmed, files=no_file, headers={"Origin": local.url}, timeout=30
    )
    # Then it is refused, naming the takeover, and nothing is written
    assert refused.status_code == 409, refused.text
    assert "confirm the takeover" in refused.text
    assert writer_of(run["workspace_id"])[0] == run["id"]

    # When the takeover is confirmed
    taken = browser.post(
        f"{url}/recover",
        data={**valid, "csrf": unconfirmed["csrf"]},
        files=no_file,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )

    # Then the recovery completes, released the workspace, and the takeover is on record
    assert taken.status_code == 303, taken.text
    assert writer_of(run["workspace_id"]) == (None, None)
    panel = local.client.review(run["id"])["recovery"]
    assert panel["status"] == "completed"
    assert [t["from"] for t in panel["takeovers"]] == [holder]


def recovery_store_lease_ran_out(local: Local, run_id: str) -> None:
    """Move the prepared recovery's lease into the past, as time would."""
    services = local.stack.services
    assert services is not None
    recovery = recovery_store.get(run_id)
    assert recovery is not None
    past = services.clock.now() - timedelta(seconds=1)
    recovery_store.lease(recovery, recovery.holder, past, recovery.body, past).commit()


def signed_in_as(local: Local, role: str) -> requests.Session:
    """A browser signed in to the stack's organization with ``role``'s permissions."""
    services = local.stack.services
    assert services is not None
    organization_id = services.workspaces.organization_id_of(local.organization)
    code = services.web_sessions.issue_login_code(
        organization_id, role, ROLES[role], created_by="tests"
    )
    browser = requests.Session()
    answer = browser.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    assert answer.status_code == 303, answer.text
    return browser


def test_the_run_page_shows_only_the_actions_the_signed_in_user_may_take(local: Local) -> None:
    # Given a run awaiting approval
    run = awaiting_run(local, "dash-roles")
    page = f"{local.url}/ui/runs/{run['id']}"

    # When a reader, a developer and an operator open its page
    reader = signed_in_as(local, "reader").get(page, timeout=30)
    developer = signed_in_as(local, "developer").get(page, timeout=30)
    operator = signed_in_as(local, "operator").get(page, timeout=30)

    # Then the reader sees the run but no button to approve, reject or cancel it
    assert reader.status_code == 200, reader.text
    assert run["id"] in reader.text
    for form in ("approve-form", "reject-form", "cancel-form"):
        assert f'id="{form}"' not in reader.text
    assert ">Approve<" not in reader.text
    assert ">Reject<" not in reader.text
    # And the developer may cancel but not decide
    assert 'id="cancel-form"' in developer.text
    assert 'id="approve-form"' not in developer.text
    # And the operator (an approver) has every one of them
    for form in ("approve-form", "reject-form", "cancel-form"):
        assert f'id="{form}"' in operator.text
