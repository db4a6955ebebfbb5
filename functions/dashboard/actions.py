"""The run page's actions and its live view: recovery, cancellation, log paging.

Handlers only read the form and call the same services as the run API, with the
signed-in principal; the services hold every rule (permissions, step-up, evidence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from functions.dashboard import run_logs
from functions.dashboard.pages import Session
from functions.dashboard.web import Page, Request, json_reply, redirect
from runplane.domain.capabilities import Phase
from runplane.domain.errors import InvalidInput, NotFound
from runplane.wiring import services

if TYPE_CHECKING:
    from runplane.domain.recovery import RecoveryRequest

# A poll reads at most this much of a log; the page asks again from where it stopped.
LIVE_READ_BYTES = 256 * 1024


def recovery_request(form: dict[str, str], files: dict[str, bytes]) -> RecoveryRequest:
    """The recovery form as the service's request: evidence exactly as the page showed it."""
    # Recovery's rules load with the first recovery, not with every page.
    from runplane.domain.recovery import ClaimedUpload, RecoveryRequest, Resolution

    try:
        resolution = Resolution(form.get("resolution", ""))
    except ValueError:
        raise InvalidInput("choose a resolution", "/resolution") from None
    claimed = None
    if form.get("discard_claimed_upload"):
        upload_id, _, claimed_at = form["discard_claimed_upload"].partition(" ")
        claimed = ClaimedUpload(upload_id, claimed_at)
    return RecoveryRequest(
        resolution=resolution,
        reason=form.get("reason", ""),
        confirm_authority_revocation=form.get("confirm_authority_revocation") == "yes",
        # The page shows "none" when the workspace has no state: it sends it back empty.
        current_state_version_id=form.get("current_state_version_id") or None,
        emergency_state=files.get("emergency_state"),
        emergency_state_sha256=form.get("emergency_state_sha256", "").strip().lower() or None,
        discard_claimed_upload=claimed,
        acknowledge_state_loss=form.get("acknowledge_state_loss") == "yes",
        takeover=form.get("takeover") == "yes",
    )


def recover(request: Request, session: Session, run_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    s = services()
    s.recoveries.recover(
        session.principal, run_id, recovery_request(form, request.files()), s.launcher
    )
    return redirect(f"/ui/runs/{run_id}#recovery-panel")


def cancel(request: Request, session: Session, run_id: str) -> Page:
    session.check_post(request, request.form())
    s = services()
    s.runs.cancel(session.principal, run_id, s.launcher)
    return redirect(f"/ui/runs/{run_id}")


def live_log(request: Request, session: Session, run_id: str, phase: str) -> Page:
    """The run's status and the next bytes of a phase's log from ``offset``: what the
    page needs to follow an active run without reloading (``run_logs.followed``)."""
    s = services()
    run = s.runs.get(session.principal, run_id)
    raw = request.query.get("offset", "0")
    if not raw.isdigit():
        raise InvalidInput("offset is a byte position (0 or more)", "/offset")
    body: dict[str, Any] = {"status": run.status.value, "terminal": run.status.is_terminal}
    try:
        read = run_logs.followed(session.principal, run.id, Phase(phase), int(raw), LIVE_READ_BYTES)
    except NotFound:
        # The phase has not started: nothing to show yet, ask again later.
        return json_reply(200, {**body, "started": False})
    return json_reply(200, {**body, "started": True, **read})
