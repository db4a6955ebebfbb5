"""Drift remediation over the in-memory stores: from a workspace's drift record, a run
that reconciles the infrastructure or accepts it into state, each an ordinary run with
approval; refused (and writing nothing) without drift, by a reader, or across
organizations. Run options pinned at creation are tested here too."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runplane.domain.entities import Workspace
from runplane.domain.errors import InvalidInput, NoDrift, NotFound
from runplane.domain.identity import Forbidden, Principal
from runplane.domain.run import RunKind
from runplane.domain.run_options import RunOptions
from runplane.domain.schedules import Drift
from tests.service.conftest import Tier
from tests.service.scenarios import reader_beside
from tests.service.test_run_creation import _runs_of, _uploaded, _writes

FOUND_AT = datetime(2026, 12, 1, 3, tzinfo=UTC)


def _drifted(tier: Tier, org_name: str = "acme") -> tuple[Principal, Workspace, str]:
    """A workspace with an uploaded configuration whose last scheduled plan drifted."""
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    workspace = tier.workspaces.create(admin, org_name, "network")
    cv_id = _uploaded(tier, workspace)
    tier.schedule_store.drift_records[workspace.id] = Drift(
        workspace_id=workspace.id,
        state="drifted",
        as_of=FOUND_AT,
        run_id="run-drift",
        detected_at=FOUND_AT,
        cleared_at=None,
        body={"schedule_id": "sch-1", "summary": {"changes": 1}},
    )
    return admin, workspace, cv_id


@pytest.mark.parametrize(
    ("remedy", "options"),
    [("reconcile", RunOptions()), ("accept", RunOptions(refresh_only=True))],
)
def test_a_remedy_creates_an_ordinary_run_of_the_latest_configuration(
    tier: Tier, remedy: str, options: RunOptions
) -> None:
    # Given a drifted workspace
    admin, ws, cv_id = _drifted(tier)

    # When its drift is remediated
    run = tier.schedules.remediate(admin, ws.id, remedy)

    # Then a plan-and-apply run of the latest configuration exists, naming the drift,
    # with the remedy's options pinned in its inputs (approval is the lifecycle's)
    assert (run.kind, run.created_by) == (RunKind.PLAN_AND_APPLY, admin.ref)
    snapshot = tier.run_reader.parts(run.id)["input"].body
    assert snapshot["configuration_version_id"] == cv_id
    assert snapshot["remediation"] == {"remedy": remedy, "drift_run_id": "run-drift"}
    assert RunOptions.from_body(snapshot.get("options")) == options
    assert tier.runs.review_of(run)["remediation"]["drift_run_id"] == "run-drift"


def test_no_drift_a_bad_remedy_or_a_reader_is_refused_and_writes_nothing(tier: Tier) -> None:
    # Given a drifted workspace, and one whose last check was clear
    admin, ws, _ = _drifted(tier)
    clear = tier.workspaces.create(admin, "acme", "clear")
    _uploaded(tier, clear)
    reader = reader_beside(admin)
    before = _writes(tier)

    # When remediation is asked where it cannot be given
    with pytest.raises(NoDrift) as none:
        tier.schedules.remediate(admin, clear.id, "reconcile")
    with pytest.raises(InvalidInput) as bad:
        tier.schedules.remediate(admin, ws.id, "ignore")
    with pytest.raises(Forbidden):
        tier.schedules.remediate(reader, ws.id, "accept")

    # Then each says why, and nothing was written
    assert "has not run" in str(none.value)
    assert bad.value.pointer == "/remedy"
    assert _writes(tier) == before
    assert _runs_of(tier, ws.id) == []


def test_another_organizations_drift_is_not_found(tier: Tier) -> None:
    # Given two organizations, the first's workspace drifted
    _, ws, _ = _drifted(tier, "acme")
    other = tier.admin(tier.tenancy.create_organization("globex"))

    # When the second's admin remediates it, then it does not exist for them
    with pytest.raises(NotFound):
        tier.schedules.remediate(other, ws.id, "reconcile")
    assert _runs_of(tier, ws.id) == []


def test_run_options_are_pinned_and_a_refresh_only_run_only_refreshes(tier: Tier) -> None:
    # Given a workspace with an uploaded configuration
    admin, ws, cv_id = _drifted(tier)

    def create(kind: RunKind, options: RunOptions) -> dict[str, object]:
        run = tier.runs.create(
            admin,
            ws.id,
            kind=kind,
            configuration_version_id=cv_id,
            engine_version=None,
            variables={},
            options=options,
        )
        return tier.runs.review_of(run)["input"]["options"]  # type: ignore[no-any-return]

    # When a targeted destroy and a refresh-only run are created
    destroy = create(RunKind.PLAN_AND_APPLY, RunOptions(destroy=True, targets=("module.a",)))
    refresh = create(RunKind.REFRESH_ONLY, RunOptions(targets=("test_thing.a",)))

    # Then their reviews show what they pinned; a refresh_only run is refresh-only
    assert destroy == {
        "destroy": True,
        "refresh_only": False,
        "targets": ["module.a"],
        "replacements": [],
    }
    assert refresh["refresh_only"] is True
    # And a refresh_only run that asks to destroy is refused, writing nothing
    before = _writes(tier)
    with pytest.raises(InvalidInput):
        create(RunKind.REFRESH_ONLY, RunOptions(destroy=True))
    assert _writes(tier) == before
