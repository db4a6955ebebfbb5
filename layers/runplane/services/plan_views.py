"""A run's plan as a person reads it: the dashboard's plan view and the run API's
``GET /runs/{id}/plan``, one set of rules for both.

Whoever may read the run's review may read its plan view (``Runs.get``: ``run:read`` and
the run's workspace visible to the caller; another organization's run is not found).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runplane.domain.artifacts import ArtifactKind
from runplane.domain.errors import ArtifactCorrupt, InvalidInput, NotFound
from runplane.domain.identity import Principal
from runplane.domain.parts import PlanEvidence
from runplane.domain.plan_secrets import Secrets, without_secrets
from runplane.domain.plan_view import (
    MAX_PLAN_JSON_BYTES,
    PAGE_SIZE,
    PlanUnreadable,
    PlanView,
    build_view,
    parse,
)
from runplane.services.artifacts import ArtifactStore
from runplane.services.run_secrets import sensitive_values
from runplane.services.runs import Runs
from runplane.services.unit_of_work import UnitsOfWork


class PlanState(StrEnum):
    SHOWN = "shown"
    NOT_YET = "not_yet"
    """The run has not made its plan yet."""
    NONE = "none"
    """The run ended without a plan."""
    UNAVAILABLE = "unavailable"
    """The plan exists but cannot be shown (too large, or not a readable plan)."""


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    state: PlanState
    view: PlanView | None = None
    message: str | None = None
    """Why there is no view, in words."""


class PlanViews:
    def __init__(self, runs: Runs, artifacts: ArtifactStore, units: UnitsOfWork) -> None:
        self._runs = runs
        self._artifacts = artifacts
        self._units = units

    def of(
        self, principal: Principal, run_id: str, page: int = 1, page_size: int = PAGE_SIZE
    ) -> RunPlan:
        """Page ``page`` (from 1; past the last, the last) of the run's plan view."""
        if page < 1:
            raise InvalidInput("the page number must be 1 or more", "/page")
        run = self._runs.get(principal, run_id)
        with self._units() as uow:
            part = uow.parts.get(run.id, "plan")
            run_input = uow.parts.get(run.id, "input")
        if part is None:
            if run.status.is_terminal:
                return RunPlan(run.id, PlanState.NONE, message="This run ended without a plan.")
            return RunPlan(run.id, PlanState.NOT_YET, message="The plan has not been made yet.")
        evidence = PlanEvidence.from_body(part.body)
        try:
            document = self._document(run.organization_id, evidence.plan_json_artifact_id)
            secrets = self._secrets(run.organization_id, run_input.body if run_input else {})
            view = build_view(without_secrets(document, secrets), page, page_size)
        except RecursionError:
            return RunPlan(
                run.id,
                PlanState.UNAVAILABLE,
                message="The plan cannot be shown: the plan document is nested too deeply.",
            )
        except PlanUnreadable as error:
            return RunPlan(
                run.id, PlanState.UNAVAILABLE, message=f"The plan cannot be shown: {error}."
            )
        return RunPlan(run.id, PlanState.SHOWN, view)

    def _secrets(self, organization_id: str, run_input: Mapping[str, Any]) -> Secrets:
        """The run's sensitive values, to be taken out of its plan (``PlanUnreadable`` if
        they cannot be read: a plan is never shown unchecked)."""
        try:
            return sensitive_values(self._artifacts.read, organization_id, run_input)
        except (NotFound, ArtifactCorrupt, ValueError) as error:
            raise PlanUnreadable("the run's sensitive values cannot be checked") from error

    def _document(self, organization_id: str, artifact_id: str) -> Mapping[str, Any]:
        """The plan's ``show -json`` document, parsed (``PlanUnreadable`` if it is missing,
        tampered with, too large or not a plan)."""
        try:
            artifact = self._artifacts.describe(organization_id, artifact_id)
            if artifact.kind is not ArtifactKind.PLAN_JSON:
                raise PlanUnreadable("the plan's record names no plan document")
            if artifact.size is not None and artifact.size > MAX_PLAN_JSON_BYTES:
                raise PlanUnreadable("the plan is too large to show here")
            return parse(self._artifacts.read(organization_id, artifact_id))
        except (NotFound, ArtifactCorrupt) as error:
            raise PlanUnreadable("the stored plan document cannot be read") from error
