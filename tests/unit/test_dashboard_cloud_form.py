"""The dashboard's cloud settings form read as the service's change: empty fields
unset, the external ID kept unless replaced or removed, numbers in ASCII digits only,
and refusals that name their field and never repeat the external ID."""

from __future__ import annotations

import pytest

from functions.dashboard.cloud import cloud_settings_change, expected_version
from runplane.domain.cloud_settings import CloudSettingsChange
from runplane.domain.errors import InvalidInput

SECRET = "ext-id-form-77aa"
PLAN = "arn:aws:iam::123456789012:role/runplane-plan"


def test_a_blank_form_unsets_every_setting_and_keeps_the_external_id() -> None:
    # Given a form whose fields are all empty (or missing)
    blank = {"aws_plan_role_arn": "", "aws_session_duration": "", "aws_external_id": ""}

    # When it is read
    change = cloud_settings_change(blank)

    # Then every setting is unset, and the stored external ID is kept
    assert change == CloudSettingsChange(keep_aws_external_id=True)


def test_text_fields_are_trimmed_and_the_duration_is_a_number() -> None:
    # Given a form with spaces around its values, and only white space in one field
    form = {
        "aws_plan_role_arn": f"  {PLAN}\t",
        "aws_region": " ",
        "aws_session_duration": " 7200 ",
        "gcp_audience": "aud",
    }

    # When it is read
    change = cloud_settings_change(form)

    # Then the values are trimmed, the white space unset, the duration a number
    assert change == CloudSettingsChange(
        aws_plan_role_arn=PLAN,
        aws_session_duration=7200,
        gcp_audience="aud",
        keep_aws_external_id=True,
    )


def test_a_typed_external_id_replaces_the_stored_one_and_removal_keeps_none() -> None:
    # When an external ID is typed, or its removal ticked
    typed = cloud_settings_change({"aws_external_id": SECRET})
    removed = cloud_settings_change({"aws_external_id": "", "remove_aws_external_id": "yes"})

    # Then the typed one is sent as typed and the stored one not kept; removal keeps none
    assert (typed.aws_external_id, typed.keep_aws_external_id) == (SECRET, False)
    assert (removed.aws_external_id, removed.keep_aws_external_id) == (None, False)
    # And the change's repr never shows the typed one
    assert SECRET not in repr(typed)


def test_an_external_id_typed_and_removed_at_once_is_refused_without_repeating_it() -> None:
    # When both are asked for
    with pytest.raises(InvalidInput) as refused:
        cloud_settings_change({"aws_external_id": SECRET, "remove_aws_external_id": "yes"})

    # Then the refusal names the field, never the value
    assert refused.value.pointer == "/aws_external_id"
    assert SECRET not in refused.value.message


@pytest.mark.parametrize(
    "duration",
    ["soon", "2h", "1e4", "-900", "3600.5", "\u0663\u0666\u0660\u0660", "9" * 10, "36 00"],
)
def test_a_duration_that_is_not_a_whole_number_of_seconds_is_refused(duration: str) -> None:
    # When the session duration is not ASCII digits (or longer than any valid one)
    with pytest.raises(InvalidInput) as refused:
        cloud_settings_change({"aws_plan_role_arn": PLAN, "aws_session_duration": duration})

    # Then the refusal points at the field and says what it takes
    assert refused.value.pointer == "/aws_session_duration"
    assert refused.value.message == (
        "aws_session_duration must be a whole number of seconds, 900 to 43200"
    )


@pytest.mark.parametrize("version", ["", "x", "-1", "1.0", "\u0661", "1" * 10])
def test_a_form_without_a_readable_version_is_refused(version: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        expected_version({"expected_version": version})
    assert refused.value.pointer == "/expected_version"
    assert "reload the page" in refused.value.message


def test_the_version_the_page_showed_is_read_as_a_number() -> None:
    assert expected_version({"expected_version": "0"}) == 0
    assert expected_version({"expected_version": "12"}) == 12
    with pytest.raises(InvalidInput):
        expected_version({})
