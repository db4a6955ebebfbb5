"""The pure rules a state version, a name and a tag must pass before anything is stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runplane.domain.entities import valid_name, valid_tags
from runplane.domain.errors import InvalidInput, StateRejected
from runplane.domain.state import (
    MAX_SERIAL,
    check_declaration,
    check_json_state,
    check_state,
    output_id,
    outputs_of,
    parse_output_id,
    simple_type,
)

LINEAGE = "9d0c3a4e-5b1f-4c2d-8e3a-0123456789ab"
MD5 = "0" * 32


def state(**changes: Any) -> bytes:
    document: dict[str, Any] = {"version": 4, "serial": 1, "lineage": LINEAGE, "outputs": {}}
    document.update(changes)
    return json.dumps(document).encode()


@pytest.mark.parametrize("serial", [0, 1, MAX_SERIAL])
def test_serials_the_engines_can_hold_are_accepted(serial: int) -> None:
    # Given / When / Then: no error
    check_declaration(serial, MD5, LINEAGE)


@pytest.mark.parametrize("serial", [MAX_SERIAL + 1, 10**40, -1, 1.0, True, "1", None])
def test_other_serials_are_refused_pointing_at_the_serial(serial: object) -> None:
    # Given a declaration with that serial
    # When it is checked
    with pytest.raises(InvalidInput) as refused:
        check_declaration(serial, MD5, LINEAGE)

    # Then the refusal points at the serial
    assert refused.value.pointer == "/data/attributes/serial"


@pytest.mark.parametrize(
    "lineage", [LINEAGE + "\n", "", "a b", "x" * 65, "-leading-dash", "ünïcode", 7]
)
def test_lineages_that_are_not_uuid_like_are_refused(lineage: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_declaration(1, MD5, lineage)
    assert refused.value.pointer == "/data/attributes/lineage"


@pytest.mark.parametrize("md5", ["0" * 31 + "\n", "A" * 32, "0" * 33, "g" * 32])
def test_md5s_are_fullmatched(md5: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_declaration(1, md5, LINEAGE)
    assert refused.value.pointer == "/data/attributes/md5"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (state(version=3), "/version"),
        (state(version=4.0), "/version"),
        (state(version=True), "/version"),
        (state(serial=1.0), "/serial"),
        (state(serial=True), "/serial"),
        (state(serial=2), "/serial"),
        (state(lineage=None), "/lineage"),
        (state(lineage="other"), "/lineage"),
        (b"[]", "/"),
        (b'{"version": Infinity}', "/"),
        (b"\xff", "/"),
    ],
)
def test_a_state_that_is_not_the_declared_version_4_state_is_refused(
    raw: bytes, field: str
) -> None:
    # Given a state put to an upload URL (the body is the document)
    # When it is checked against serial 1 of the lineage
    with pytest.raises(StateRejected) as refused:
        check_state(raw, serial=1, lineage=LINEAGE, pointer=None)

    # Then the pointer goes into the document; inline, it names the state field
    assert refused.value.pointer == field
    with pytest.raises(StateRejected) as inline:
        check_state(raw, serial=1, lineage=LINEAGE, pointer="/data/attributes/state")
    assert inline.value.pointer == "/data/attributes/state"


def test_the_declared_state_is_accepted() -> None:
    check_state(state(), serial=1, lineage=LINEAGE, pointer=None)


@pytest.mark.parametrize(
    "raw", [b"{}", b"[]", b'{"format_version": 1}', b'{"format_version": "x"}']
)
def test_a_json_state_needs_a_format_version(raw: bytes) -> None:
    with pytest.raises(StateRejected):
        check_json_state(raw)


def test_output_ids_round_trip_and_nothing_else_parses() -> None:
    # Given a state version ID and an output name
    sv_id = "sv-" + "a" * 26

    # When an output ID is derived and parsed back
    derived = output_id(sv_id, "db_password-1")

    # Then it names the same version and output; malformed IDs name nothing
    assert parse_output_id(derived) == (sv_id, "db_password-1")
    assert parse_output_id(derived + "\n") is None
    assert parse_output_id("wsout-short-x") is None
    assert parse_output_id("sv-" + "a" * 26) is None


def test_outputs_keep_their_sensitivity_and_tfe_types() -> None:
    # Given a state with outputs of several types
    parsed = {
        "outputs": {
            "b": {"value": True, "type": "bool"},
            "a": {"value": "s", "type": "string", "sensitive": True},
            "m": {"value": {"k": 1}, "type": ["map", "number"]},
        }
    }

    # When its outputs are read
    found = outputs_of(parsed)

    # Then they come by name, sensitive only when it says true, with TFE's simple types
    assert [(o.name, o.sensitive, simple_type(o.type)) for o in found] == [
        ("a", True, "string"),
        ("b", False, "boolean"),
        ("m", False, "object"),
    ]


@pytest.mark.parametrize("name", ["network\n", "", "a b", "x" * 91, "ws/1"])
def test_names_are_fullmatched(name: str) -> None:
    with pytest.raises(InvalidInput):
        valid_name("workspace", name)


def test_tags_follow_tfe_rules_and_repeats_collapse() -> None:
    assert valid_tags(("env:prod", "team_a-1", "env:prod")) == ("env:prod", "team_a-1")
    for bad in ("Prod", "a b", "x" * 256, "", "env\n"):
        with pytest.raises(InvalidInput) as refused:
            valid_tags(("ok", bad), "/data/attributes/tag-names")
        assert refused.value.pointer == "/data/attributes/tag-names/1"
    with pytest.raises(InvalidInput):
        valid_tags(tuple(f"t{n}" for n in range(51)))
