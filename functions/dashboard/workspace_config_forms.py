"""The forms of the workspace page's configuration sections (docs/dashboard.md,
"Workspace configuration"): variables, schedules, run triggers and notification
destinations.

Each handler checks the form's origin and CSRF token, reads the form into what the
run API's body would say, calls the same service as the API with the signed-in
principal (which holds every rule: permissions, names, limits, tenancy) and sends the
browser back to its section. A refusal writes nothing and is the error page.

A sensitive variable's value is write-only: the page never holds it, and an empty
value field keeps the one stored (as the cloud settings form keeps the external ID).
"""

from __future__ import annotations

from dataclasses import dataclass

from functions.dashboard.pages import Session
from functions.dashboard.web import Page, Request, redirect
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.run import RunKind
from runplane.domain.run_events import NOTIFIABLE
from runplane.domain.variables import VariableCategory, category_of
from runplane.wiring import services

# As the run API's bodies bound them (its schema checks these before the services do).
MAX_DESTINATION_NAME = 100
MAX_DESTINATION_URL = 2048
MAX_ID = 64
_TRIGGER_KINDS = {
    "": None,
    "plan_and_apply": RunKind.PLAN_AND_APPLY,
    "plan_only": RunKind.PLAN_ONLY,
}


def _posted(request: Request, session: Session) -> dict[str, str]:
    form = request.form()
    session.check_post(request, form)
    return form


def _back(workspace_id: str, section: str) -> Page:
    return redirect(f"/ui/workspaces/{workspace_id}#{section}")


def _required(form: dict[str, str], field: str, what: str, longest: int = MAX_ID) -> str:
    value = form.get(field, "").strip()
    if not value or len(value) > longest:
        raise InvalidInput(f"{what} (at most {longest} characters)", f"/{field}")
    return value


# -- variables -------------------------------------------------------------------------------


@dataclass(frozen=True)
class VariableForm:
    name: str
    category: VariableCategory
    # None: keep the sensitive value stored.
    value: str | None
    sensitive: bool
    description: str | None

    def __repr__(self) -> str:
        # Never the value: a repr ends up in logs and tracebacks.
        return f"VariableForm({self.name!r}, {self.category.value}, sensitive={self.sensitive})"


def variable_form(form: dict[str, str]) -> VariableForm:
    """The form as the variable API's body: an empty value of a sensitive variable
    keeps the stored one."""
    sensitive = form.get("sensitive") == "yes"
    # Browsers send a text area's line breaks as CRLF; a value holds LF only.
    value = form.get("value", "").replace("\r\n", "\n")
    return VariableForm(
        name=form.get("name", "").strip(),
        category=category_of(form.get("category", ""), "/category"),
        value=None if sensitive and not value else value,
        sensitive=sensitive,
        description=form.get("description", "").strip() or None,
    )


def set_variable(request: Request, session: Session, workspace_id: str) -> Page:
    """Add a variable, or change one (its name and category say which)."""
    change = variable_form(_posted(request, session))
    services().workspace_variables.set(
        session.principal,
        workspace_id,
        change.name,
        change.value,
        sensitive=change.sensitive,
        description=change.description,
        category=change.category,
    )
    return _back(workspace_id, "variables")


def delete_variable(request: Request, session: Session, workspace_id: str) -> Page:
    form = _posted(request, session)
    category = category_of(form.get("category", ""), "/category")
    services().workspace_variables.delete(
        session.principal, workspace_id, form.get("name", ""), category
    )
    return _back(workspace_id, "variables")


# -- schedules -------------------------------------------------------------------------------


def create_schedule(request: Request, session: Session, workspace_id: str) -> Page:
    form = _posted(request, session)
    expression = _required(form, "expression", "type a cron or rate expression", 200)
    services().schedules.create(
        session.principal, workspace_id, expression, form.get("kind", "plan_only")
    )
    return _back(workspace_id, "schedules")


def _schedule_of(session: Session, workspace_id: str, form: dict[str, str]) -> str:
    """The form's schedule, if it is this workspace's (the path names the workspace)."""
    schedule_id = _required(form, "schedule_id", "the form names no schedule")
    schedule = services().schedules.get(session.principal, schedule_id)
    if schedule.workspace_id != workspace_id:
        raise NotFound("schedule", schedule_id)
    return schedule.id


def pause_schedule(request: Request, session: Session, workspace_id: str) -> Page:
    """Pause a schedule (``paused=yes``) or resume it (``paused=no``)."""
    form = _posted(request, session)
    paused = {"yes": True, "no": False}.get(form.get("paused", ""))
    if paused is None:
        raise InvalidInput("paused must be yes or no", "/paused")
    schedule_id = _schedule_of(session, workspace_id, form)
    services().schedules.set_paused(session.principal, schedule_id, paused)
    return _back(workspace_id, "schedules")


def delete_schedule(request: Request, session: Session, workspace_id: str) -> Page:
    form = _posted(request, session)
    schedule_id = _schedule_of(session, workspace_id, form)
    services().schedules.delete(session.principal, schedule_id)
    return _back(workspace_id, "schedules")


# -- run triggers ----------------------------------------------------------------------------


def add_run_trigger(request: Request, session: Session, workspace_id: str) -> Page:
    form = _posted(request, session)
    source = _required(form, "source_workspace_id", "choose a source workspace")
    kind = form.get("run_kind", "")
    if kind not in _TRIGGER_KINDS:
        raise InvalidInput("run_kind must be plan_and_apply or plan_only", "/run_kind")
    services().run_triggers.add(session.principal, workspace_id, source, _TRIGGER_KINDS[kind])
    return _back(workspace_id, "run-triggers")


def remove_run_trigger(request: Request, session: Session, workspace_id: str) -> Page:
    form = _posted(request, session)
    source = _required(form, "source_workspace_id", "the form names no source workspace")
    services().run_triggers.remove(session.principal, workspace_id, source)
    return _back(workspace_id, "run-triggers")


# -- notification destinations ---------------------------------------------------------------


def chosen_events(form: dict[str, str]) -> list[str]:
    """The ticked event boxes (each its own field: a form keeps one value a name)."""
    return sorted(e.value for e in NOTIFIABLE if form.get(f"event_{e.value}") == "yes")


def create_destination(request: Request, session: Session, workspace_id: str) -> Page:
    """Add a destination. Its signing secret is not shown: a page never holds a secret
    (the run API returns it once, to whoever creates the destination there)."""
    form = _posted(request, session)
    name = _required(form, "name", "name the destination", MAX_DESTINATION_NAME)
    url = _required(form, "url", "type the destination's URL", MAX_DESTINATION_URL)
    services().notifications.create(
        session.principal,
        workspace_id,
        name=name,
        kind=form.get("kind", "webhook"),
        url=url,
        events=chosen_events(form),
    )
    return _back(workspace_id, "notifications")


def delete_destination(request: Request, session: Session, workspace_id: str) -> Page:
    form = _posted(request, session)
    destination = _required(form, "destination_id", "the form names no destination")
    services().notifications.delete(session.principal, workspace_id, destination)
    return _back(workspace_id, "notifications")
