"""Lambda entry point of the Cloud API."""

from __future__ import annotations

from typing import Any

from functions.observability import observed


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The routes, their JSON:API models and services load with the first request.
    from functions.cloud_api.app import resolve

    return resolve(event, context)
