"""The audit export Lambda: one export step per scheduled invocation (docs/audit.md,
"Export"). The event carries nothing; a step that finds nothing settled writes nothing."""

from __future__ import annotations

from typing import Any

from functions.observability import observed
from runplane.wiring import services


@observed
def export(event: dict[str, Any], context: Any) -> dict[str, Any]:
    result = services().audit_export.export()
    return {
        "records": result.records,
        "objects": result.objects,
        "lost_race": result.lost_race,
    }
