"""A result call may carry the phase's uploads to register first: read as strictly as
the report, documented with it, and a ticket never echoed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runplane.domain.errors import InvalidInput
from runplane.domain.runner_reports import UploadReport, read_result, result_schema
from tests.unit.domain.test_runner_reports import PLANNED, VARIANTS

TICKET = "tkt-secret-value"
UPLOAD = UploadReport("art-plan", TICKET, 12, "c" * 64)


def test_a_result_with_its_uploads_reads_back_as_sent() -> None:
    # Given a plan's report with its three uploads, as the runner sends it
    uploads = [UPLOAD, UploadReport("art-json", TICKET, 3, "d" * 64)]
    wire = json.loads(json.dumps({**PLANNED.to_wire(), "uploads": [u.to_wire() for u in uploads]}))

    # When it is read
    report, read = read_result(wire)

    # Then the report and the uploads are what was sent, and the ticket is not shown
    assert report == PLANNED
    assert read == tuple(uploads)
    assert TICKET not in repr(read)


@pytest.mark.parametrize("report", VARIANTS, ids=lambda r: type(r).__name__)
def test_a_result_without_uploads_is_its_report_alone(report: Any) -> None:
    # Given any report sent without uploads (or with them null)
    for wire in (report.to_wire(), {**report.to_wire(), "uploads": None}):
        # When it is read / Then it is the report, with nothing to register
        assert read_result(wire) == (report, ())


@pytest.mark.parametrize(
    ("uploads", "pointer"),
    [
        ([], "/uploads"),
        ([UPLOAD.to_wire()] * 9, "/uploads"),
        ({"art-plan": UPLOAD.to_wire()}, "/uploads"),
        ([UPLOAD.to_wire(), UPLOAD.to_wire()], "/uploads"),
        (["art-plan"], "/uploads/0"),
        ([{**UPLOAD.to_wire(), "sha256": "C" * 64}], "/uploads/0/sha256"),
        ([{**UPLOAD.to_wire(), "size": -1}], "/uploads/0/size"),
        ([{**UPLOAD.to_wire(), "ticket": ""}], "/uploads/0/ticket"),
        ([{**UPLOAD.to_wire(), "url": "https://x"}], "/uploads/0/url"),
    ],
)
def test_bad_uploads_are_refused_with_a_pointer_and_no_ticket(uploads: Any, pointer: str) -> None:
    # Given a report whose uploads are malformed
    wire = {**PLANNED.to_wire(), "uploads": uploads}

    # When it is read / Then it is invalid, pointing at the fault, without the ticket
    with pytest.raises(InvalidInput) as refused:
        read_result(wire)
    assert refused.value.pointer == pointer
    assert TICKET not in str(refused.value)


def test_the_documented_result_takes_uploads_on_every_outcome() -> None:
    # Given the result call's documented schema
    validator = Draft202012Validator(result_schema())

    # When each report is sent with an upload / Then each validates
    for report in VARIANTS:
        wire = {**report.to_wire(), "uploads": [UPLOAD.to_wire()]}
        assert not list(validator.iter_errors(wire)), type(report).__name__
    # And an upload with a field the reader refuses does not
    bad = {**PLANNED.to_wire(), "uploads": [{**UPLOAD.to_wire(), "url": "https://x"}]}
    assert list(validator.iter_errors(bad))
