"""Lambda entry point of the Cloud API."""

from __future__ import annotations

from typing import Any

from functions.cloud_api.app import resolve
from functions.observability import observed


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return resolve(event, context)
