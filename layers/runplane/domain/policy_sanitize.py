"""The sanitized plan derivative policies are evaluated against, and its digest.

Pure: standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from runplane.domain.plan_summary import tally
from runplane.domain.plan_values import Mark, Mismatch, marked
from runplane.domain.run_options import RunOptions

SENSITIVE_MARKER: Final = "(sensitive)"
UNKNOWN_MARKER: Final = "(known after apply)"
POLICY_INPUT_FORMAT: Final = "runplane-policy-input/1"


def canonical_json(doc: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, no NaN or infinities."""
    return json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def input_digest(doc: Any) -> str:
    """``sha256:<hex>`` of ``canonical_json(doc)``: the policy input digest."""
    return "sha256:" + hashlib.sha256(canonical_json(doc)).hexdigest()


def _clean(value: Any, sensitive: Any, unknown: Any) -> Any:
    """The value with sensitive and unknown places replaced by their text markers."""
    return _markers(marked(value, sensitive, unknown, unknown_first=False))


def _markers(value: Any) -> Any:
    if isinstance(value, Mark):
        return SENSITIVE_MARKER if value.sensitive else UNKNOWN_MARKER
    if isinstance(value, dict):
        return {key: _markers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_markers(item) for item in value]
    return value


def _redacted(change: Mapping[str, Any], which: str, *, unknown: bool) -> Any:
    """The change's ``before``/``after`` with sensitive values and unknowns marked.

    Fail closed: a non-null value without its ``*_sensitive`` structure, or with one that
    is malformed or does not mirror it, is replaced whole by the sensitive marker.
    """
    value = change.get(which)
    unknowns = change.get("after_unknown", False) if unknown else False
    if value is None and unknowns is not True:
        return None
    mask_key = f"{which}_sensitive"
    if value is not None and mask_key not in change:
        return SENSITIVE_MARKER
    try:
        return _clean(value, change.get(mask_key, False), unknowns)
    except Mismatch:
        return SENSITIVE_MARKER


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def _resource_change(entry: Mapping[str, Any]) -> dict[str, Any]:
    raw_change = entry.get("change")
    change: Mapping[str, Any] = raw_change if isinstance(raw_change, Mapping) else {}
    out: dict[str, Any] = {}
    for key in ("address", "module_address", "mode", "type", "name", "provider_name"):
        value = entry.get(key)
        if isinstance(value, str):
            out[key] = value
        elif key not in ("module_address",):
            out[key] = None
    index = entry.get("index")
    if isinstance(index, str | int) and not isinstance(index, bool):
        out["index"] = index
    for key in ("deposed", "action_reason"):
        value = entry.get(key)
        if isinstance(value, str):
            out[key] = value
    out["actions"] = _strings(change.get("actions"))
    out["before"] = _redacted(change, "before", unknown=False)
    out["after"] = _redacted(change, "after", unknown=True)
    return out


def _output_change(name: str, change: Mapping[str, Any]) -> dict[str, Any]:
    flags = (change.get("sensitive"), change.get("before_sensitive"), change.get("after_sensitive"))
    sensitive = any(flag is True for flag in flags)
    if sensitive:
        before: Any = SENSITIVE_MARKER if change.get("before") is not None else None
        after: Any = (
            SENSITIVE_MARKER
            if change.get("after") is not None or change.get("after_unknown") is True
            else None
        )
    else:
        before = _redacted(change, "before", unknown=False)
        after = _redacted(change, "after", unknown=True)
    return {
        "name": name,
        "actions": _strings(change.get("actions")),
        "sensitive": sensitive,
        "before": before,
        "after": after,
    }


def sanitize_plan(
    plan: Mapping[str, Any],
    *,
    workspace: str,
    run_kind: str,
    engine_version: str,
    options: RunOptions | None = None,
) -> dict[str, Any]:
    """The sanitized plan derivative that policies are evaluated against.

    From the engine's ``show -json`` document it keeps the resource changes (address,
    module address, mode, type, name, index, provider, actions, action reason, and
    ``before``/``after`` with every value the engine marks sensitive replaced by
    ``"(sensitive)"`` and every value unknown until apply by ``"(known after apply)"``)
    and the output changes (a sensitive output's values are both ``"(sensitive)"``),
    plus the run's metadata and a count of actions. A ``true`` anywhere in a sensitivity
    structure hides that whole subtree; a value whose sensitivity structure is missing,
    malformed or shaped differently from it is hidden whole. Nothing else is copied: no
    prior state, configuration, planned values, variables or drift. Deterministic: the
    same plan and metadata always give the same document (and digest).
    """
    raw_resources = plan.get("resource_changes")
    resources = [
        _resource_change(entry)
        for entry in (raw_resources if isinstance(raw_resources, list) else [])
        if isinstance(entry, Mapping)
    ]
    raw_outputs = plan.get("output_changes")
    output_map: Mapping[Any, Any] = raw_outputs if isinstance(raw_outputs, Mapping) else {}
    outputs = [
        _output_change(name, change if isinstance(change, Mapping) else {})
        for name, change in sorted(
            (item for item in output_map.items() if isinstance(item[0], str)),
            key=lambda item: item[0],
        )
    ]
    run = {"workspace": workspace, "kind": str(run_kind), "engine_version": engine_version}
    # A destroy, a refresh-only plan, targets and replacements: a policy may judge them.
    # Only a run that asked for any carries them, so a plain run's document (and the
    # digest its policy check is bound to) is the one it always was.
    if options is not None and not options.default:
        run |= options.to_body()
    return {
        "format": POLICY_INPUT_FORMAT,
        "run": run,
        "resource_changes": resources,
        "output_changes": outputs,
        # The shared count under the policy input's own names (see domain/plan_summary.py).
        "summary": tally(entry["actions"] for entry in resources).policy_input(),
    }
