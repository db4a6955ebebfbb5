"""Run logs, read by offset while a phase runs and after."""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.api import schema as oas
from functions.api.edge import Reply, principal, query_int
from runplane.domain.capabilities import Phase
from runplane.domain.logs import END_OF_TEXT
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


@router.get(
    "/api/v1/runs/<run_id>/logs/<phase>",
    responses=oas.text_responses(*oas.READ),
    security=oas.PEOPLE,
)
def run_log(run_id: str, phase: Literal["plan", "apply"]) -> Reply:
    read = services().logs.read(
        principal(),
        run_id,
        Phase(phase),
        offset=query_int("offset") or 0,
        limit=query_int("limit"),
    )
    text = read.data.decode("utf-8", "replace") + (END_OF_TEXT if read.at_end else "")
    return Response(
        status_code=200,
        content_type="text/plain; charset=utf-8",
        body=text,
        headers={
            "Runplane-Log-Offset": str(read.offset),
            "Runplane-Log-Next-Offset": str(read.next_offset),
            "Runplane-Log-Length": str(read.length),
            "Runplane-Log-Complete": "true" if read.complete else "false",
            "Runplane-Log-Source": read.source,
        },
    )
