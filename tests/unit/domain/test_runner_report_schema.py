"""The runner report's documented schema says what its one reader, ``from_wire``,
accepts: every variant's wire form validates, and a field is documented required
exactly when ``from_wire`` refuses its absence."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runplane.domain.errors import InvalidInput
from runplane.domain.runner_reports import RunnerReport, from_wire, result_schema, wire_schema
from tests.unit.domain.test_runner_reports import PLANNED, VARIANTS

SCHEMA = wire_schema()
VALIDATOR = Draft202012Validator(SCHEMA)


def variant_schema(outcome: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        v for v in SCHEMA["oneOf"] if v["properties"]["outcome"]["const"] == outcome
    )
    return found


def refused(body: dict[str, Any]) -> bool:
    try:
        from_wire(body)
    except InvalidInput:
        return True
    return False


@pytest.mark.parametrize("report", VARIANTS, ids=lambda r: type(r).__name__)
def test_every_variant_wire_form_matches_exactly_one_documented_outcome(
    report: RunnerReport,
) -> None:
    # Given a report as the runner sends it
    wire = report.to_wire()
    # Then the documented schema accepts it, as one outcome only
    VALIDATOR.validate(wire)
    matching = [v for v in SCHEMA["oneOf"] if Draft202012Validator(v).is_valid(wire)]
    assert [v["properties"]["outcome"]["const"] for v in matching] == [report.OUTCOME]


@pytest.mark.parametrize("report", VARIANTS, ids=lambda r: type(r).__name__)
def test_a_field_is_documented_required_exactly_when_the_reader_refuses_its_absence(
    report: RunnerReport,
) -> None:
    # Given every field the variant may carry (optional ones filled in)
    documented = variant_schema(report.OUTCOME)
    wire = {**report.to_wire(), **_optional_values(report.OUTCOME)}
    assert not refused(wire)
    assert set(wire) == set(documented["properties"])
    # When each one is left out, then the reader refuses exactly the documented required
    refused_without = {name for name in wire if refused(_without(wire, name))}
    assert refused_without == set(documented["required"])
    # And a null reads as absent, as the optional fields' types say
    for name in set(wire) - refused_without:
        assert not refused({**wire, name: None})
        assert "null" in documented["properties"][name]["type"]


def test_the_plan_summary_documents_its_required_fields_as_the_reader_reads_them() -> None:
    wire = PLANNED.to_wire()
    summary = variant_schema("planned")["properties"]["summary"]
    full = {**wire, "summary": {**wire["summary"], "drifted": 0}}
    assert set(full["summary"]) == set(summary["properties"])
    refused_without = {
        name
        for name in full["summary"]
        if refused({**full, "summary": _without(full["summary"], name)})
    }
    assert refused_without == set(summary["required"])


@pytest.mark.parametrize(
    "body",
    [
        {**PLANNED.to_wire(), "surprise": 1},
        {**PLANNED.to_wire(), "plan_sha256": "A" * 64},
        {"outcome": "applied"},
        {"outcome": "failed", "reason": ""},
        {"outcome": "exploded", "reason": "x"},
    ],
    ids=["unknown-field", "bad-digest", "missing-log", "empty-reason", "unknown-outcome"],
)
def test_what_the_reader_refuses_the_schema_does_not_document(body: dict[str, Any]) -> None:
    assert refused(body)
    assert not VALIDATOR.is_valid(body)


def test_the_served_document_describes_the_report_with_this_schema() -> None:
    # Given the run API's OpenAPI document as served
    import json

    from functions.api import schema as oas
    from functions.api.app import build_app

    document = json.loads(oas.with_runner_report(build_app().get_openapi_json_schema()))
    # Then the runner result's body is the wire schema with the uploads a result may
    # carry, and a refusal is a documented 422
    operation = document["paths"]["/api/v1/runner/result"]["post"]
    served = operation["requestBody"]["content"]["application/json"]["schema"]
    assert served["oneOf"] == result_schema()["oneOf"]
    for variant, report in zip(served["oneOf"], SCHEMA["oneOf"], strict=True):
        assert {**report["properties"], "uploads": variant["properties"]["uploads"]} == (
            variant["properties"]
        )
    assert "422" in operation["responses"]


def _without(body: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != name}


def _optional_values(outcome: str) -> dict[str, Any]:
    by_outcome: dict[str, dict[str, Any]] = {
        "planned": {"engine_version": "1.0.3", "engine_seconds": 1.0},
        "applied": {"engine_seconds": 1.0},
    }
    return by_outcome.get(outcome, {"log_artifact_id": "art-log", "engine_seconds": 1.0})
