"""Workspace cloud settings over the in-memory store: who may read and change them, the
audit event of each change, two organizations, refusals writing nothing, the external
ID never shown, and the credential decisions each new run pins (unchanged for a run
created before a change)."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from runplane.domain.cloud_settings import (
    CloudSettings,
    CloudSettingsChange,
    CredentialDecisions,
    PinnedCredentials,
    StoredCloudSettings,
    settings_view,
)
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import ConcurrentChange, InvalidInput, NotFound
from runplane.domain.identity import ROLES, Forbidden, Permission, Principal
from runplane.domain.parts import RunInput
from runplane.domain.run import RunKind
from runplane.services.cloud_settings import CLEARED_EVENT, SET_EVENT
from tests.service.conftest import Tier

PLAN = "arn:aws:iam::123456789012:role/plan"
APPLY = "arn:aws:iam::123456789012:role/apply"
OTHER = "arn:aws:iam::210987654321:role/other"
SECRET = "ext-5c1e0a77"
GCP = "//iam.googleapis.com/projects/7/locations/global/workloadIdentityPools/p/providers/x"
GUID_A = "11111111-2222-3333-4444-555555555555"
GUID_B = "66666666-7777-8888-9999-000000000000"

FULL = CloudSettingsChange(
    aws_plan_role_arn=PLAN,
    aws_apply_role_arn=APPLY,
    aws_external_id=SECRET,
    aws_session_duration=1800,
    gcp_audience=GCP,
    azure_client_id=GUID_A,
    azure_tenant_id=GUID_B,
)


def _workspace(tier: Tier, org_name: str = "acme") -> tuple[Principal, Workspace]:
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    return admin, tier.workspaces.create(admin, org_name, "network")


def _as(admin: Principal, role: str, name: str = "bob") -> Principal:
    return replace(admin, id=name, display=name, permissions=ROLES[role])


def _run(tier: Tier, admin: Principal, ws: Workspace, kind: RunKind) -> Run:
    cv_id = f"cv-{ws.id}-{len(tier.run_reader.runs_of_workspace(ws.id))}"
    tier.configurations.add_uploaded(cv_id, ws.organization_id, ws.id, tier.clock.now())
    return tier.runs.create(
        admin,
        ws.id,
        kind=kind,
        configuration_version_id=cv_id,
        engine_version=None,
        variables={},
    )


def _pinned(tier: Tier, run: Run) -> PinnedCredentials:
    return RunInput.from_body(tier.run_reader.parts(run.id)["input"].body).credentials


# -- reading and changing them ---------------------------------------------------------------


def test_settings_are_set_read_back_without_the_external_id_and_audited(tier: Tier) -> None:
    # Given a workspace that never had cloud settings
    admin, ws = _workspace(tier)
    assert tier.cloud_settings.get(admin, ws.id) is None
    assert settings_view(ws.id, None)["version"] == 0
    # When an admin sets every one of them
    stored = tier.cloud_settings.put(admin, ws.id, FULL)
    # Then they read back at version 1 with Azure's default audience, the external ID
    # only as set, and the sealed value opens to what was given
    assert stored is not None
    read = tier.cloud_settings.get(admin, ws.id)
    assert read == stored
    assert read.version == 1
    assert read.settings == CloudSettings(
        aws_plan_role_arn=PLAN,
        aws_apply_role_arn=APPLY,
        aws_external_id_set=True,
        aws_session_duration=1800,
        gcp_audience=GCP,
        azure_audience="api://AzureADTokenExchange",
        azure_client_id=GUID_A,
        azure_tenant_id=GUID_B,
    )
    view = settings_view(ws.id, read)
    assert SECRET not in repr(view)
    assert view["aws_external_id_set"] is True
    assert view["updated_by"] == admin.ref
    assert read.external_id is not None
    assert SECRET.encode() not in read.external_id.ciphertext
    # And one audit event names the actor and what changed, never the external ID
    [event] = tier.cloud_store.audit
    assert (event.type, event.actor, event.subject_id) == (SET_EVENT, admin.ref, ws.id)
    assert event.details["changed"] == (
        "aws_plan_role_arn,aws_apply_role_arn,aws_external_id,aws_session_duration,"
        "gcp_audience,azure_audience,azure_client_id,azure_tenant_id"
    )
    assert event.details["aws_plan_role_arn"] == PLAN
    assert event.details["aws_external_id"] == "set"
    assert SECRET not in repr(event)


def test_a_replacement_names_only_what_changed_and_can_keep_the_external_id(tier: Tier) -> None:
    # Given settings with an external ID
    admin, ws = _workspace(tier)
    first = tier.cloud_settings.put(admin, ws.id, FULL)
    assert first is not None
    # When they are replaced with another plan role, keeping the external ID
    kept = replace(FULL, aws_plan_role_arn=OTHER, aws_external_id=None, keep_aws_external_id=True)
    second = tier.cloud_settings.put(admin, ws.id, kept)
    # Then the version moved, the external ID is the same sealed value, and the event
    # names the plan role alone
    assert second is not None
    assert (second.version, second.settings.aws_plan_role_arn) == (2, OTHER)
    assert second.external_id == first.external_id
    assert tier.cloud_store.audit[-1].details == {
        "changed": "aws_plan_role_arn",
        "version": "2",
        "aws_plan_role_arn": OTHER,
    }
    # And a whole replacement that leaves settings out unsets them (the external ID too)
    third = tier.cloud_settings.put(admin, ws.id, CloudSettingsChange(aws_plan_role_arn=OTHER))
    assert third is not None
    assert third.settings == CloudSettings(aws_plan_role_arn=OTHER)
    assert third.external_id is None
    assert tier.cloud_store.audit[-1].details["aws_external_id"] == ""


def test_a_change_that_changes_nothing_writes_nothing(tier: Tier) -> None:
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, CloudSettingsChange(aws_plan_role_arn=PLAN))
    before = copy.deepcopy((tier.cloud_store.settings, tier.cloud_store.audit))
    again = tier.cloud_settings.put(admin, ws.id, CloudSettingsChange(aws_plan_role_arn=PLAN))
    assert again is not None
    assert again.version == 1
    assert (tier.cloud_store.settings, tier.cloud_store.audit) == before


def test_a_clear_removes_every_setting_at_the_next_version_and_a_second_writes_nothing(
    tier: Tier,
) -> None:
    # Given settings
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, FULL)
    # When they are cleared, twice
    cleared = tier.cloud_settings.clear(admin, ws.id)
    again = tier.cloud_settings.clear(admin, ws.id)
    # Then none is left, at version 2 (versions never go back), and one event was added
    assert cleared is not None
    assert (cleared.version, cleared.settings, cleared.external_id) == (2, CloudSettings(), None)
    assert again == cleared
    assert [e.type for e in tier.cloud_store.audit] == [SET_EVENT, CLEARED_EVENT]
    # And clearing a workspace that never had any writes nothing either
    fresh_admin, fresh = _workspace(tier, "fresh")
    assert tier.cloud_settings.clear(fresh_admin, fresh.id) is None
    assert fresh.id not in tier.cloud_store.settings
    assert len(tier.cloud_store.audit) == 2


@pytest.mark.parametrize("role", ["reader", "developer", "operator"])
def test_only_an_admin_may_change_them_and_every_role_may_read_them(tier: Tier, role: str) -> None:
    # Given settings, and someone of the organization with a role short of admin
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, FULL)
    who = _as(admin, role)
    before = copy.deepcopy((tier.cloud_store.settings, tier.cloud_store.audit))
    # When they read, set and clear
    # Then the read works, and the changes are Forbidden (403) and change nothing
    assert tier.cloud_settings.get(who, ws.id) == tier.cloud_settings.get(admin, ws.id)
    with pytest.raises(Forbidden) as refused:
        tier.cloud_settings.put(who, ws.id, CloudSettingsChange(aws_plan_role_arn=OTHER))
    assert refused.value.permission is Permission.CREDENTIALS_MANAGE
    with pytest.raises(Forbidden):
        tier.cloud_settings.clear(who, ws.id)
    assert (tier.cloud_store.settings, tier.cloud_store.audit) == before


def test_the_admin_role_alone_holds_credentials_manage() -> None:
    assert [r for r, held in ROLES.items() if Permission.CREDENTIALS_MANAGE in held] == ["admin"]


def test_another_organizations_workspace_is_not_found_and_nothing_is_written(tier: Tier) -> None:
    # Given two organizations, the other one's workspace with settings
    admin, _ = _workspace(tier)
    theirs_admin, theirs = _workspace(tier, "other")
    tier.cloud_settings.put(theirs_admin, theirs.id, FULL)
    before = copy.deepcopy((tier.cloud_store.settings, tier.cloud_store.audit))
    # When acme's admin reads, sets or clears them
    # Then each is NotFound, as for an unknown workspace, and nothing changed
    with pytest.raises(NotFound):
        tier.cloud_settings.get(admin, theirs.id)
    with pytest.raises(NotFound):
        tier.cloud_settings.put(admin, theirs.id, FULL)
    with pytest.raises(NotFound):
        tier.cloud_settings.clear(admin, theirs.id)
    with pytest.raises(NotFound):
        tier.cloud_settings.get(admin, "ws-unknown")
    assert (tier.cloud_store.settings, tier.cloud_store.audit) == before


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        (CloudSettingsChange(aws_plan_role_arn="arn:aws:iam::1:role/x"), "/aws_plan_role_arn"),
        (
            CloudSettingsChange(aws_plan_role_arn="arn:aws-cn:iam::123456789012:role/x"),
            "/aws_plan_role_arn",
        ),
        (CloudSettingsChange(aws_plan_role_arn=PLAN, aws_session_duration=60), None),
        (CloudSettingsChange(aws_plan_role_arn=PLAN, aws_external_id="has space"), None),
        (CloudSettingsChange(aws_plan_role_arn=PLAN, aws_region="cn-north-1"), None),
        (CloudSettingsChange(aws_apply_role_arn=APPLY), "/aws_plan_role_arn"),
        (CloudSettingsChange(gcp_audience="x" * 300), None),
        (CloudSettingsChange(azure_client_id=GUID_A), "/azure_tenant_id"),
    ],
)
def test_a_refused_change_writes_nothing(
    tier: Tier, change: CloudSettingsChange, pointer: str | None
) -> None:
    # Given settings and their audit event
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, FULL)
    before = copy.deepcopy((tier.cloud_store.settings, tier.cloud_store.audit))
    # When a change breaks a rule
    with pytest.raises(InvalidInput) as refused:
        tier.cloud_settings.put(admin, ws.id, change)
    # Then it names a field (the one given, when the error is about a value), never the
    # external ID, and nothing was written
    assert refused.value.pointer is not None
    if pointer is not None:
        assert refused.value.pointer == pointer
    assert "has space" not in refused.value.message
    assert (tier.cloud_store.settings, tier.cloud_store.audit) == before


def test_a_change_at_a_version_no_longer_current_is_refused_and_writes_nothing(
    tier: Tier,
) -> None:
    # Given settings read at version 1, then changed by another admin
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, FULL)
    tier.cloud_settings.put(admin, ws.id, CloudSettingsChange(aws_plan_role_arn=OTHER))
    before = copy.deepcopy((tier.cloud_store.settings, tier.cloud_store.audit))
    # When a change or a clear names version 1
    with pytest.raises(ConcurrentChange):
        tier.cloud_settings.put(admin, ws.id, FULL, expected_version=1)
    with pytest.raises(ConcurrentChange):
        tier.cloud_settings.clear(admin, ws.id, expected_version=1)
    # Then nothing changed; at the current version the change goes through
    assert (tier.cloud_store.settings, tier.cloud_store.audit) == before
    changed = tier.cloud_settings.put(admin, ws.id, FULL, expected_version=2)
    assert changed is not None
    assert changed.version == 3


def test_a_write_racing_another_between_read_and_write_is_refused(tier: Tier) -> None:
    # Given an admin's change that reads the settings, then another admin's lands first
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, FULL)
    store, read = tier.cloud_store, tier.cloud_store.get

    def read_then_lose_the_race(workspace_id: str) -> StoredCloudSettings | None:
        seen = read(workspace_id)
        assert seen is not None
        store.settings[workspace_id] = replace(seen, version=seen.version + 1)
        return seen

    store.get = read_then_lose_the_race  # type: ignore[method-assign]
    events = len(store.audit)
    # When the first change is written
    with pytest.raises(ConcurrentChange):
        tier.cloud_settings.put(admin, ws.id, CloudSettingsChange(aws_plan_role_arn=OTHER))
    # Then it wrote nothing of its own
    store.get = read  # type: ignore[method-assign]
    current = store.get(ws.id)
    assert current is not None
    assert current.settings.aws_plan_role_arn == PLAN
    assert len(store.audit) == events


# -- what runs pin ---------------------------------------------------------------------------


def test_a_run_created_before_any_settings_pins_no_cloud_credentials(tier: Tier) -> None:
    admin, ws = _workspace(tier)
    run = _run(tier, admin, ws, RunKind.PLAN_AND_APPLY)
    assert _pinned(tier, run) == PinnedCredentials(CredentialDecisions())
    review = tier.runs.review(admin, run.id)
    assert review["input"]["credentials"] == CredentialDecisions().to_body()
    assert review["input"]["credentials"]["aws"] is None


def test_each_run_pins_the_settings_of_its_creation_and_keeps_them(tier: Tier) -> None:
    # Given a workspace with settings, and a plan-and-apply run and a plan-only run
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, FULL)
    applying = _run(tier, admin, ws, RunKind.PLAN_AND_APPLY)
    planning = _run(tier, admin, ws, RunKind.PLAN_ONLY)
    # When the settings change afterwards, and a new run is created
    tier.cloud_settings.put(
        admin, ws.id, CloudSettingsChange(aws_plan_role_arn=OTHER, aws_region="eu-west-1")
    )
    later = _run(tier, admin, ws, RunKind.PLAN_AND_APPLY)
    # Then the first run keeps both roles, the external ID as set, and the deployment's
    # region; the plan-only run only the plan role; the later run the new settings
    first = tier.runs.review(admin, applying.id)["input"]["credentials"]
    assert first["settings_version"] == 1
    assert first["aws"] == {
        "plan_role_arn": PLAN,
        "apply_role_arn": APPLY,
        "external_id_set": True,
        "session_duration": 1800,
        "region": "us-east-1",
    }
    assert first["gcp"] == {"audience": GCP}
    assert first["azure"] == {
        "audience": "api://AzureADTokenExchange",
        "client_id": GUID_A,
        "tenant_id": GUID_B,
    }
    assert first["digest"] == _pinned(tier, applying).decisions.digest
    only_plan = tier.runs.review(admin, planning.id)["input"]["credentials"]["aws"]
    assert (only_plan["plan_role_arn"], only_plan["apply_role_arn"]) == (PLAN, None)
    newer = tier.runs.review(admin, later.id)["input"]["credentials"]
    assert newer["settings_version"] == 2
    assert newer["aws"] == {
        "plan_role_arn": OTHER,
        "apply_role_arn": None,
        "external_id_set": False,
        "session_duration": 3600,
        "region": "eu-west-1",
    }
    assert (newer["gcp"], newer["azure"]) == (None, None)
    # And the first run's external ID is the one sealed at its creation, opening to the
    # value given then, though the workspace has none now; the review never shows it
    assert tier.cloud_settings.external_id(ws.id, _pinned(tier, applying)) == SECRET
    assert tier.cloud_settings.external_id(ws.id, _pinned(tier, later)) is None
    assert SECRET not in repr(tier.runs.review(admin, applying.id))


def test_a_run_after_the_settings_were_cleared_pins_none_at_the_cleared_version(
    tier: Tier,
) -> None:
    admin, ws = _workspace(tier)
    tier.cloud_settings.put(admin, ws.id, FULL)
    tier.cloud_settings.clear(admin, ws.id)
    decisions = _pinned(tier, _run(tier, admin, ws, RunKind.PLAN_AND_APPLY)).decisions
    assert decisions.none
    assert decisions.settings_version == 2
