"""The rules of a workspace's cloud settings and of the credential decisions a run pins
from them (domain/cloud_settings.py): each class of bad input refused naming its field,
never repeating the external ID."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from runplane.domain.cloud_settings import (
    AZURE_DEFAULT_AUDIENCE,
    DEFAULT_SESSION_SECONDS,
    AwsDecision,
    CloudSettings,
    CloudSettingsChange,
    CredentialDecisions,
    PinnedCredentials,
    SealedExternalId,
    check_cloud_settings,
    partition_of,
)
from runplane.domain.errors import InvalidInput

PLAN = "arn:aws:iam::123456789012:role/plan"
APPLY = "arn:aws:iam::123456789012:role/deploy/apply"
GUID_A = "11111111-2222-3333-4444-555555555555"
GUID_B = "66666666-7777-8888-9999-000000000000"
GCP = "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/x"
SECRET = "ext-7f3a9c"


def _check(region: str = "us-east-1", stored: bool = False, **fields: Any) -> CloudSettings:
    return check_cloud_settings(
        CloudSettingsChange(**fields), deployment_region=region, external_id_stored=stored
    )


def _refused(region: str = "us-east-1", **fields: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        _check(region, **fields)
    return refused.value


# -- what is accepted ------------------------------------------------------------------------


def test_nothing_set_is_no_settings() -> None:
    assert _check() == CloudSettings()
    assert _check().empty


def test_every_setting_is_kept_and_azure_ids_are_lowercased() -> None:
    settings = _check(
        aws_plan_role_arn=PLAN,
        aws_apply_role_arn=APPLY,
        aws_external_id=SECRET,
        aws_session_duration=900,
        aws_region="eu-west-3",
        gcp_audience=GCP,
        azure_client_id=GUID_A.upper(),
        azure_tenant_id=GUID_B,
        azure_audience="api://custom",
    )
    assert settings == CloudSettings(
        aws_plan_role_arn=PLAN,
        aws_apply_role_arn=APPLY,
        aws_external_id_set=True,
        aws_session_duration=900,
        aws_region="eu-west-3",
        gcp_audience=GCP,
        azure_audience="api://custom",
        azure_client_id=GUID_A,
        azure_tenant_id=GUID_B,
    )
    # The settings never hold the external ID itself, nor does a change's repr show it
    assert SECRET not in repr(settings)
    assert SECRET not in repr(CloudSettingsChange(aws_external_id=SECRET))


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::123456789012:role/a",
        "arn:aws:iam::123456789012:role/" + "n" * 64,
        "arn:aws:iam::123456789012:role/with+=,.@_-chars",
        "arn:aws:iam::123456789012:role/path/to/role",
        "arn:aws:iam::123456789012:role/" + "p/" * 255 + "r",  # a 511-character path
        "arn:aws:iam::123456789012:role/aws-service-role/ecs.amazonaws.com/Role",
    ],
)
def test_role_arns_iam_allows_are_accepted(arn: str) -> None:
    assert _check(aws_plan_role_arn=arn).aws_plan_role_arn == arn


def test_the_azure_audience_defaults_once_azure_is_enabled() -> None:
    settings = _check(azure_client_id=GUID_A, azure_tenant_id=GUID_B)
    assert settings.azure_audience == AZURE_DEFAULT_AUDIENCE
    assert (settings.azure_enabled, settings.aws_enabled, settings.gcp_enabled) == (
        True,
        False,
        False,
    )


@pytest.mark.parametrize(
    ("region", "partition"),
    [
        ("us-east-1", "aws"),
        ("eu-west-3", "aws"),
        ("ap-southeast-2", "aws"),
        ("cn-north-1", "aws-cn"),
        ("cn-northwest-1", "aws-cn"),
        ("us-gov-west-1", "aws-us-gov"),
        ("us-iso-east-1", "aws-iso"),
        ("us-isob-east-1", "aws-iso-b"),
    ],
)
def test_a_regions_partition(region: str, partition: str) -> None:
    assert partition_of(region) == partition


@pytest.mark.parametrize(
    ("deployment", "arn", "region"),
    [
        ("cn-north-1", "arn:aws-cn:iam::123456789012:role/plan", "cn-northwest-1"),
        ("us-gov-west-1", "arn:aws-us-gov:iam::123456789012:role/plan", "us-gov-east-1"),
    ],
)
def test_roles_and_regions_of_the_deployments_own_partition_are_accepted(
    deployment: str, arn: str, region: str
) -> None:
    settings = _check(deployment, aws_plan_role_arn=arn, aws_region=region)
    assert (settings.aws_plan_role_arn, settings.aws_region) == (arn, region)


def test_keeping_the_external_id_keeps_it_only_if_one_is_stored() -> None:
    assert _check(
        stored=True, aws_plan_role_arn=PLAN, keep_aws_external_id=True
    ).aws_external_id_set
    assert not _check(aws_plan_role_arn=PLAN, keep_aws_external_id=True).aws_external_id_set
    # Without keeping it, a new settings document has none
    assert not _check(stored=True, aws_plan_role_arn=PLAN).aws_external_id_set


# -- what is refused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arn",
    [
        "not-an-arn",
        "arn:aws:iam::12345678901:role/short-account",
        "arn:aws:iam::1234567890123:role/long-account",
        "arn:aws:iam::12345678901a:role/letter-in-account",
        "arn:aws:iam:us-east-1:123456789012:role/regional",
        "arn:aws:iam::123456789012:user/not-a-role",
        "arn:aws:sts::123456789012:assumed-role/plan/session",
        "arn:aws:iam::123456789012:role/",
        "arn:aws:iam::123456789012:role/" + "n" * 65,
        "arn:aws:iam::123456789012:role/has space",
        "arn:aws:iam::123456789012:role/has*star",
        "arn:aws:iam::123456789012:role/rôle",
        "arn:aws:iam::123456789012:role//empty-segment",
        "arn:aws:iam::123456789012:role/path/",
        "arn:aws:iam::123456789012:role/" + "p/" * 256 + "r",  # a 513-character path
        "ARN:AWS:IAM::123456789012:ROLE/upper",
        " arn:aws:iam::123456789012:role/leading-space",
    ],
)
@pytest.mark.parametrize("field", ["aws_plan_role_arn", "aws_apply_role_arn"])
def test_a_malformed_role_arn_is_refused_naming_its_field(arn: str, field: str) -> None:
    fields = {"aws_plan_role_arn": PLAN, field: arn}
    refused = _refused(**fields)
    assert refused.pointer == f"/{field}"
    assert "not an IAM role ARN" in refused.message


@pytest.mark.parametrize(
    ("deployment", "arn"),
    [
        ("us-east-1", "arn:aws-cn:iam::123456789012:role/plan"),
        ("us-east-1", "arn:aws-us-gov:iam::123456789012:role/plan"),
        ("cn-north-1", "arn:aws:iam::123456789012:role/plan"),
        ("us-gov-west-1", "arn:aws:iam::123456789012:role/plan"),
        ("eu-west-1", "arn:aws-invented:iam::123456789012:role/plan"),
    ],
)
def test_a_role_of_another_partition_is_refused(deployment: str, arn: str) -> None:
    refused = _refused(deployment, aws_plan_role_arn=arn)
    assert refused.pointer == "/aws_plan_role_arn"
    assert "partition" in refused.message


@pytest.mark.parametrize(
    ("deployment", "region"),
    [
        ("us-east-1", "nowhere"),
        ("us-east-1", "US-EAST-1"),
        ("us-east-1", "us-east"),
        ("us-east-1", "us-east-123"),
        ("us-east-1", "us_east_1"),
        ("us-east-1", "cn-north-1"),
        ("us-east-1", "us-gov-west-1"),
        ("cn-north-1", "eu-west-1"),
    ],
)
def test_a_malformed_region_or_one_of_another_partition_is_refused(
    deployment: str, region: str
) -> None:
    arn = f"arn:{partition_of(deployment)}:iam::123456789012:role/plan"
    refused = _refused(deployment, aws_plan_role_arn=arn, aws_region=region)
    assert refused.pointer == "/aws_region"


@pytest.mark.parametrize("seconds", [0, 899, 43201, -3600, 10**9])
def test_a_session_duration_outside_stss_range_is_refused(seconds: int) -> None:
    refused = _refused(aws_plan_role_arn=PLAN, aws_session_duration=seconds)
    assert refused.pointer == "/aws_session_duration"
    assert "900 to 43200" in refused.message


@pytest.mark.parametrize("seconds", [900, 3600, 43200])
def test_a_session_duration_in_range_is_kept(seconds: int) -> None:
    assert _check(aws_plan_role_arn=PLAN, aws_session_duration=seconds).aws_session_duration == (
        seconds
    )


@pytest.mark.parametrize("value", [True, "3600", 3600.0])
def test_a_session_duration_that_is_no_whole_number_is_refused(value: Any) -> None:
    assert _refused(aws_plan_role_arn=PLAN, aws_session_duration=value).pointer == (
        "/aws_session_duration"
    )


@pytest.mark.parametrize(
    "external_id",
    [
        "Q",  # too short
        "Q" * 1225,  # too long
        "has space",
        "has*star",
        "has#hash",
        "ünïcode",
        "semi;colon",
    ],
)
def test_a_bad_external_id_is_refused_without_repeating_it(external_id: str) -> None:
    refused = _refused(aws_plan_role_arn=PLAN, aws_external_id=external_id)
    assert refused.pointer == "/aws_external_id"
    assert external_id not in refused.message


@pytest.mark.parametrize("external_id", ["ab", "x" * 1224, "a+=,.@:/_-Z9"])
def test_an_external_id_of_the_allowed_characters_and_length_is_accepted(
    external_id: str,
) -> None:
    assert _check(aws_plan_role_arn=PLAN, aws_external_id=external_id).aws_external_id_set


@pytest.mark.parametrize(
    "field",
    [
        "aws_plan_role_arn",
        "aws_apply_role_arn",
        "aws_external_id",
        "aws_region",
        "gcp_audience",
        "azure_audience",
        "azure_client_id",
        "azure_tenant_id",
    ],
)
@pytest.mark.parametrize("control", ["\x00", "\n", "\r", "\t", "\x1b", "\x7f", "\x85"])
def test_a_control_character_in_any_field_is_refused_naming_the_field(
    field: str, control: str
) -> None:
    fields = {
        "aws_plan_role_arn": PLAN,
        "azure_client_id": GUID_A,
        "azure_tenant_id": GUID_B,
        field: f"{SECRET}{control}x",
    }
    refused = _refused(**fields)
    assert refused.pointer == f"/{field}"
    assert f"U+{ord(control):04X}" in refused.message
    assert SECRET not in refused.message


@pytest.mark.parametrize(
    "field",
    [
        "aws_plan_role_arn",
        "aws_apply_role_arn",
        "aws_external_id",
        "aws_region",
        "gcp_audience",
        "azure_audience",
        "azure_client_id",
        "azure_tenant_id",
    ],
)
def test_an_empty_string_is_refused_rather_than_taken_for_unset(field: str) -> None:
    refused = _refused(**{"aws_plan_role_arn": PLAN, field: ""})
    assert refused.pointer == f"/{field}"
    assert "empty" in refused.message


@pytest.mark.parametrize("field", ["gcp_audience", "azure_audience"])
@pytest.mark.parametrize("audience", ["a" * 257, "has space", "tab\u2003em-space"])
def test_an_audience_too_long_or_with_spaces_is_refused(field: str, audience: str) -> None:
    fields = {"azure_client_id": GUID_A, "azure_tenant_id": GUID_B, field: audience}
    assert _refused(**fields).pointer == f"/{field}"


@pytest.mark.parametrize("field", ["azure_client_id", "azure_tenant_id"])
@pytest.mark.parametrize(
    "guid",
    [
        "not-a-guid",
        "11111111222233334444555555555555",
        "{11111111-2222-3333-4444-555555555555}",
        "11111111-2222-3333-4444-55555555555g",
        "11111111-2222-3333-4444-5555555555555",
    ],
)
def test_an_azure_id_that_is_no_guid_is_refused(field: str, guid: str) -> None:
    fields = {"azure_client_id": GUID_A, "azure_tenant_id": GUID_B, field: guid}
    assert _refused(**fields).pointer == f"/{field}"


@pytest.mark.parametrize(
    ("fields", "pointer"),
    [
        # An apply role alone: plans would get no role
        ({"aws_apply_role_arn": APPLY}, "/aws_plan_role_arn"),
        # What applies to AWS roles, without one
        ({"aws_external_id": SECRET}, "/aws_external_id"),
        ({"aws_region": "eu-west-1"}, "/aws_region"),
        ({"aws_session_duration": 7200}, "/aws_session_duration"),
        # Azure's IDs go together, and its audience needs them
        ({"azure_client_id": GUID_A}, "/azure_tenant_id"),
        ({"azure_tenant_id": GUID_B}, "/azure_client_id"),
        ({"azure_audience": "api://x"}, "/azure_client_id"),
        # An external ID given and kept at once
        (
            {"aws_plan_role_arn": PLAN, "aws_external_id": SECRET, "keep_aws_external_id": True},
            "/keep_aws_external_id",
        ),
    ],
)
def test_settings_that_need_another_setting_are_refused_naming_what_to_fix(
    fields: dict[str, Any], pointer: str
) -> None:
    refused = _refused(**fields)
    assert refused.pointer == pointer
    assert SECRET not in refused.message


def test_the_default_session_duration_needs_no_role() -> None:
    assert _check(aws_session_duration=DEFAULT_SESSION_SECONDS) == CloudSettings()


# -- the settings' changes -------------------------------------------------------------------


def test_changed_names_the_settings_that_differ_and_the_external_id_by_whether_it_is_set() -> None:
    before = CloudSettings(aws_plan_role_arn=PLAN, aws_external_id_set=True)
    after = CloudSettings(aws_plan_role_arn=APPLY, aws_region="eu-west-1")
    assert after.changed_from(before) == ["aws_plan_role_arn", "aws_external_id", "aws_region"]
    assert before.changed_from(before) == []


# -- the decisions a run pins ----------------------------------------------------------------

SETTINGS = CloudSettings(
    aws_plan_role_arn=PLAN,
    aws_apply_role_arn=APPLY,
    aws_external_id_set=True,
    aws_session_duration=1800,
    gcp_audience=GCP,
    azure_audience=AZURE_DEFAULT_AUDIENCE,
    azure_client_id=GUID_A,
    azure_tenant_id=GUID_B,
)


def test_a_run_that_may_apply_pins_both_roles_and_the_deployments_region() -> None:
    decisions = CredentialDecisions.decide(
        SETTINGS, 4, may_apply=True, deployment_region="eu-central-1"
    )
    assert decisions.aws == AwsDecision(PLAN, APPLY, True, 1800, "eu-central-1")
    assert (decisions.aws_role_for("plan"), decisions.aws_role_for("apply")) == (PLAN, APPLY)
    assert decisions.gcp_audience == GCP
    assert decisions.azure is not None
    assert decisions.azure.client_id == GUID_A
    assert (decisions.settings_version, decisions.none) == (4, False)


def test_a_run_that_never_applies_pins_no_apply_role() -> None:
    decisions = CredentialDecisions.decide(
        SETTINGS, 4, may_apply=False, deployment_region="us-east-1"
    )
    assert decisions.aws is not None
    assert (decisions.aws_role_for("plan"), decisions.aws_role_for("apply")) == (PLAN, None)


def test_no_settings_pin_no_cloud_credentials() -> None:
    decisions = CredentialDecisions.decide(None, 0, may_apply=True, deployment_region="us-east-1")
    assert decisions.none
    assert decisions == CredentialDecisions()
    assert decisions.aws_role_for("plan") is None
    # A run created before runs recorded decisions reads the same
    assert CredentialDecisions.from_body(None) == CredentialDecisions()


@pytest.mark.parametrize("may_apply", [True, False])
def test_decisions_read_back_from_their_body_with_a_digest_of_what_they_decide(
    may_apply: bool,
) -> None:
    decisions = CredentialDecisions.decide(
        SETTINGS, 2, may_apply=may_apply, deployment_region="us-east-1"
    )
    body = decisions.to_body()
    assert CredentialDecisions.from_body(body) == decisions
    assert body["digest"] == decisions.digest
    assert body["aws"]["external_id_set"] is True
    # Any other decision has another digest
    other = replace(decisions, aws=replace(decisions.aws, session_duration=3600))  # type: ignore[type-var]
    assert other.digest != decisions.digest


def test_a_pinned_external_id_travels_only_sealed_and_reads_back() -> None:
    decisions = CredentialDecisions.decide(
        SETTINGS, 1, may_apply=True, deployment_region="us-east-1"
    )
    sealed = SealedExternalId(b"\x00\x01wrapped", b"cipher\xff")
    pinned = PinnedCredentials(decisions, sealed)
    fields = pinned.input_fields()
    assert set(fields) == {"credentials", "aws_external_id_sealed"}
    assert PinnedCredentials.from_input(fields) == pinned
    assert PinnedCredentials.from_input({}) == PinnedCredentials(CredentialDecisions())
