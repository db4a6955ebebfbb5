"""The dashboard: server-rendered pages over the same services as the run API.

Pages are reached with a cookie session opened by a one-time login link; every
POST must carry the session's CSRF token and come from this origin.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from functions.dashboard import (
    actions,
    assets,
    attention,
    auto_destroy,
    cloud,
    drift,
    github,
    plan,
    run_logs,
    sign_in,
    teams_page,
    workspace_config,
    workspace_config_forms,
    workspace_page,
)
from functions.dashboard.pages import Session, render
from functions.dashboard.web import (
    ID,
    Page,
    PageResolver,
    Request,
    current_request,
    page_not_found,
    redirect,
    reply,
)
from functions.isolation import ResolverPool
from functions.observability import observed
from runplane.domain.capabilities import Phase
from runplane.domain.cloud_settings import (
    AZURE_DEFAULT_AUDIENCE,
    DEFAULT_SESSION_SECONDS,
    settings_view,
)
from runplane.domain.errors import NotFound, RunplaneError
from runplane.domain.github_connect import CONNECT_PATH
from runplane.domain.identity import STEP_UP_WINDOW, Permission, Principal, Unauthenticated
from runplane.domain.run import RunStatus
from runplane.domain.sign_in import CALLBACK_PATH
from runplane.domain.web_session import (
    cleared_cookie,
    session_cookie,
)
from runplane.wiring import services

SIGN_IN = "/ui/sign-in"
# The fields of the approval binding a form sends back: what the person reviewed.
BINDING_FIELDS = (
    "plan_sha256",
    "predecessor_state_version_id",
    "policy_input_digest",
    "policy_result_digest",
)
# A request refused on a run's page, or on any path under it, links back to that page.
_RUN_PATH = re.compile(f"/ui/runs/{ID}")


# -- pages ---------------------------------------------------------------------------------


def sign_in_page(request: Request) -> Page:
    """Sign-in through the hosted UI where it is configured, else the notice (one-time
    login links sign in)."""
    flow = sign_in.configured_flow()
    if flow is None:
        return render(401, "sign_in.html", session=None)
    return sign_in.start(request, flow)


def sign_in_callback(request: Request) -> Page:
    flow = sign_in.configured_flow()
    if flow is None:
        # Without the hosted UI there is no sign-in to finish: no such page.
        raise page_not_found(request)
    return sign_in.callback(request, flow)


def login(request: Request) -> Page:
    signed_in = services().web_sessions.sign_in(
        request.query.get("code", ""), request.source_address
    )
    max_age = int((signed_in.valid_until - services().clock.now()).total_seconds())
    cookie = session_cookie(signed_in.secret, secure=request.scheme == "https", max_age=max_age)
    return redirect("/", cookies=[cookie])


def logout(request: Request) -> Page:
    session = Session(request)
    session.check_post(request, request.form())
    assert session.secret is not None
    services().web_sessions.sign_out(session.secret)
    cookie = cleared_cookie(secure=request.scheme == "https")
    return redirect(sign_in.signed_out_location(), cookies=[cookie])


def workspaces(request: Request) -> Page:
    session = Session(request)
    if not session.principal.may_somewhere(Permission.WORKSPACE_READ):
        # Signed in, but no team or role gives a workspace yet: say so, not a 403.
        return render(200, "workspaces.html", session=session, rows=[], no_access=True)
    shown = services().workspace_overview.page(
        session.principal, workspace_page.page_number(request, "page")
    )
    return render(200, "workspaces.html", session=session, rows=shown.items, listing=shown)


def workspace(request: Request, workspace_id: str) -> Page:
    session = Session(request)
    s = services()
    ws = s.workspaces.by_id(session.principal, workspace_id)
    cloud = settings_view(ws.id, s.cloud_settings.get(session.principal, ws.id))
    granted = session.principal.permissions_in(ws.id)
    return render(
        200,
        "workspace.html",
        session=session,
        workspace=ws,
        cloud=cloud,
        # As the run API's workspace view has it: None until a schedule checked.
        drift=s.schedules.drift_of(ws.id),
        auto_destroy=s.auto_destroys.of(ws),
        may_postpone=Permission.WORKSPACE_UPDATE in granted,
        # The remediation buttons only for those who may create runs: the service
        # refuses anyone else anyway.
        may_remediate=Permission.RUN_CREATE in granted,
        # The form only for those who may change the settings: the service refuses
        # anyone else anyway.
        may_manage_cloud=Permission.CREDENTIALS_MANAGE in granted,
        # Shown as placeholders: an empty field is the default.
        default_session_seconds=DEFAULT_SESSION_SECONDS,
        azure_default_audience=AZURE_DEFAULT_AUDIENCE,
        **workspace_config.context(session, ws),
        **workspace_page.context(session, request, ws),
    )


def _log(principal: Principal, run_id: str, phase: Phase) -> dict[str, Any] | None:
    return run_logs.shown(principal, run_id, phase)


def run_page(request: Request, run_id: str) -> Page:
    session = Session(request)
    s = services()
    review = s.runs.review(session.principal, run_id)
    ws = s.workspaces.by_id(session.principal, review["workspace_id"])
    approval = review.get("approval") or {}
    open_for_decision = review["status"] == "awaiting_approval"
    expires_at = approval.get("expires_at")
    deadline_passed = isinstance(expires_at, str) and (
        datetime.fromisoformat(expires_at) <= s.clock.now()
    )
    logs = {phase.value: _log(session.principal, run_id, phase) for phase in Phase}
    granted = session.principal.permissions_in(ws.id)
    return render(
        200,
        "run.html",
        session=session,
        workspace=ws,
        review=review,
        approval=approval,
        binding=approval.get("binding") or {},
        can_decide=open_for_decision and not deadline_passed,
        # Only the buttons the user may press: the services refuse the rest anyway.
        may_decide=Permission.RUN_APPROVE in granted,
        may_cancel=Permission.RUN_CANCEL in granted,
        deadline_passed=deadline_passed,
        active=not RunStatus(review["status"]).is_terminal,
        logs=logs,
        signed_in_recently=_signed_in_recently(session.principal),
        **plan.context(session.principal, review),
    )


def _signed_in_recently(principal: Principal) -> bool:
    """Whether the recovery form can be sent without signing in again (the service
    checks it anyway; the page only says so up front)."""
    signed_in = principal.auth_time
    return signed_in is not None and services().clock.now() - signed_in <= STEP_UP_WINDOW


def terraform_run_link(organization: str, workspace: str, run_id: str) -> Page:
    """Where Terraform's remote backend and cloud block send people: they print
    ``https://HOST/app/ORGANIZATION/WORKSPACE/runs/RUN``. Always the run page, whose
    sign-in and permission checks decide what is shown; whether the run exists is not
    looked up here, so the answer says nothing about it."""
    return redirect(f"/ui/runs/{run_id}", status=302)


def decide(request: Request, run_id: str, decision: str) -> Page:
    session = Session(request)
    form = request.form()
    session.check_post(request, form)
    s = services()
    binding = {name: form[name] for name in BINDING_FIELDS if form.get(name)}
    comment = form.get("comment") or None
    s.runs.decide(session.principal, run_id, decision, comment, binding)
    return redirect(f"/ui/runs/{run_id}")


def static(file_name: str) -> Page:
    found = assets.asset(file_name)
    if found is None:
        raise NotFound("page", file_name)
    return reply(200, found.body, content_type=found.content_type)


def favicon() -> Page:
    """Browsers ask for /favicon.ico whatever a page links: the same icon, no sign-in."""
    return static("favicon.svg")


# -- routing ------------------------------------------------------------------------------

Route = Callable[..., Page]


def with_request(page: Callable[..., Page]) -> Route:
    """The route of ``page(request, **path_parameters)``."""

    def route(**path_parameters: str) -> Page:
        return page(current_request(), **path_parameters)

    return route


def with_session(page: Callable[..., Page]) -> Route:
    """The route of ``page(request, session, **path_parameters)``: signed-in callers only."""

    def route(**path_parameters: str) -> Page:
        request = current_request()
        return page(request, Session(request), **path_parameters)

    return route


def build_app() -> PageResolver:
    """Every page, form and file of the dashboard on one resolver."""
    app = PageResolver()
    app.get("/")(with_request(workspaces))
    app.get("/ui")(with_request(workspaces))
    app.get("/ui/login")(with_request(login))
    app.get(SIGN_IN)(with_request(sign_in_page))
    app.get(CALLBACK_PATH)(with_request(sign_in_callback))
    app.post("/ui/logout")(with_request(logout))
    app.get("/ui/static/<file_name>")(static)
    app.get("/favicon.ico")(favicon)
    app.get("/ui/workspaces/<workspace_id>")(with_request(workspace))
    app.post("/ui/workspaces/<workspace_id>/cloud-settings")(with_session(cloud.put))
    app.post("/ui/workspaces/<workspace_id>/cloud-settings/clear")(with_session(cloud.clear))
    app.post("/ui/workspaces/<workspace_id>/drift/remediate")(with_session(drift.remediate))
    app.post("/ui/workspaces/<workspace_id>/auto-destroy/postpone")(
        with_session(auto_destroy.postpone)
    )
    _configuration_forms(app)
    app.get("/ui/workspaces/<workspace_id>/state-versions/<state_version_id>/download")(
        with_session(workspace_page.download_state)
    )
    app.post("/ui/workspaces/<workspace_id>/lock")(with_session(workspace_page.lock))
    app.post("/ui/workspaces/<workspace_id>/unlock")(with_session(workspace_page.unlock))
    app.post("/ui/workspaces/<workspace_id>/force-unlock")(
        with_session(workspace_page.force_unlock)
    )
    app.post("/ui/workspaces/<workspace_id>/settings")(with_session(workspace_page.update_settings))
    app.get("/ui/runs/<run_id>")(with_request(run_page))
    app.post("/ui/runs/<run_id>/<decision>")(with_request(decide))
    app.post("/ui/runs/<run_id>/recover")(with_session(actions.recover))
    app.post("/ui/runs/<run_id>/cancel")(with_session(actions.cancel))
    app.get("/ui/runs/<run_id>/logs/<phase>")(with_session(actions.live_log))
    app.get("/ui/runs/<run_id>/plan")(with_session(plan.page))
    app.get("/app/<organization>/<workspace>/runs/<run_id>")(terraform_run_link)
    app.get(teams_page.PAGE_PATH)(with_session(teams_page.page))
    app.post(teams_page.PAGE_PATH)(with_session(teams_page.create))
    app.post(f"{teams_page.PAGE_PATH}/<team_id>/delete")(with_session(teams_page.delete))
    app.post(f"{teams_page.PAGE_PATH}/<team_id>/members")(with_session(teams_page.add_member))
    app.post(f"{teams_page.PAGE_PATH}/<team_id>/members/remove")(
        with_session(teams_page.remove_member)
    )
    app.post(f"{teams_page.PAGE_PATH}/<team_id>/access")(with_session(teams_page.set_access))
    app.post(f"{teams_page.PAGE_PATH}/<team_id>/access/remove")(
        with_session(teams_page.remove_access)
    )
    app.get(github.PAGE_PATH)(with_session(github.page))
    app.get(attention.PAGE_PATH)(with_session(attention.page))
    app.post(f"{github.PAGE_PATH}/connect")(with_session(github.connect))
    app.get(CONNECT_PATH)(with_request(github.callback))
    app.post(f"{github.PAGE_PATH}/installations/<installation_id>/release")(
        with_session(github.release)
    )
    app.exception_handler(Unauthenticated)(unauthenticated)
    app.exception_handler(RunplaneError)(error_page)
    app.not_found(no_such_page)
    return app


def _configuration_forms(app: PageResolver) -> None:
    """The workspace page's configuration forms (workspace_config_forms)."""
    forms = workspace_config_forms
    base = "/ui/workspaces/<workspace_id>"
    app.post(f"{base}/variables")(with_session(forms.set_variable))
    app.post(f"{base}/variables/delete")(with_session(forms.delete_variable))
    app.post(f"{base}/schedules")(with_session(forms.create_schedule))
    app.post(f"{base}/schedules/pause")(with_session(forms.pause_schedule))
    app.post(f"{base}/schedules/delete")(with_session(forms.delete_schedule))
    app.post(f"{base}/run-triggers")(with_session(forms.add_run_trigger))
    app.post(f"{base}/run-triggers/remove")(with_session(forms.remove_run_trigger))
    app.post(f"{base}/notifications")(with_session(forms.create_destination))
    app.post(f"{base}/notifications/delete")(with_session(forms.delete_destination))


def unauthenticated(_: Unauthenticated) -> Page:
    if current_request().method == "GET":
        return redirect(SIGN_IN)
    return render(
        401,
        "error.html",
        session=None,
        code="UNAUTHENTICATED",
        message="sign in to use the dashboard",
    )


def error_page(error: RunplaneError) -> Page:
    back = _RUN_PATH.match(current_request().path)
    return render(
        error.http_status,
        "error.html",
        session=None,
        code=error.code,
        message=error.message,
        back=back[0] if back else None,
    )


def no_such_page(_: NotFoundError) -> Page:
    return error_page(page_not_found(current_request()))


@lru_cache(maxsize=1)
def resolvers() -> ResolverPool:
    return ResolverPool(build_app)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return resolvers().resolve(event, context)
