"""The sanitized plan in Terraform's ``show -json`` structure, for the plan-shaped inputs.

Pure: standard library only. Built from the engine's ``show -json`` plan with the same
rules as ``runplane.domain.policy_sanitize.sanitize_plan``: a value the engine marks sensitive is
``"(sensitive)"``, and a value whose sensitivity structure is missing, malformed or
shaped differently is hidden whole. Unlike that document, a value unknown until apply
is left out of ``after`` and marked ``true`` in ``after_unknown``, as the engine does.
Only resource changes, output changes and a sanitized subset of the configuration are
copied (see ``sanitized_configuration``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.domain.plan_values import Mark, Mismatch, marked

SENSITIVE: Final = "(sensitive)"
_MAX_DEPTH: Final = 100


def known_fields(**values: Any) -> dict[str, Any]:
    """The fields whose value is known (not None)."""
    return {key: value for key, value in values.items() if value is not None}


_ABSENT: Final = object()


def _split(value: Any, sensitive: Any, unknown: Any) -> tuple[Any, Any, Any]:
    """``(value, unknown, sensitive)`` with sensitive values hidden and unknown ones left
    out (their place marked ``True`` in the unknown structure); the structures keep only
    what is ``True`` somewhere below, so nothing under a hidden value shows."""
    return _structures(marked(value, sensitive, unknown, unknown_first=True))


def _structures(value: Any) -> tuple[Any, Any, Any]:
    if isinstance(value, Mark):
        if value.unknown:
            return _ABSENT, True, value.sensitive
        return SENSITIVE, False, True
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        u_out: dict[str, Any] = {}
        s_out: dict[str, Any] = {}
        for key, item in value.items():
            v, u, s = _structures(item)
            if v is not _ABSENT:
                out[key] = v
            if u:
                u_out[key] = u
            if s:
                s_out[key] = s
        return out, u_out, s_out
    if isinstance(value, list):
        parts = [_structures(item) for item in value]
        items = [None if v is _ABSENT else v for v, _, _ in parts]
        u_list = [u or False for _, u, _ in parts]
        s_list = [s or False for _, _, s in parts]
        return items, (u_list if any(u_list) else False), (s_list if any(s_list) else False)
    return value, False, False


@dataclass
class _Hidden:
    """Addresses whose ``before``/``after`` were hidden whole (no sensitivity map)."""

    addresses: list[str] = field(default_factory=list)


def _side(
    change: Mapping[str, Any], which: str, unknown: Any, address: str, hidden: _Hidden
) -> tuple[Any, Any, Any]:
    value = change.get(which)
    if value is None:
        return None, unknown is True, False
    mask_key = f"{which}_sensitive"
    if mask_key not in change:
        hidden.addresses.append(f"{address} ({which})")
        return SENSITIVE, False, True
    try:
        v, u, s = _split(value, change.get(mask_key, False), unknown)
    except Mismatch:
        hidden.addresses.append(f"{address} ({which})")
        return SENSITIVE, False, True
    if v is _ABSENT:
        v = None
    if isinstance(v, dict):
        u = u or {}
        s = s or {}
    return v, u, s


def _change(change: Mapping[str, Any], address: str, hidden: _Hidden) -> dict[str, Any]:
    before, _, before_sensitive = _side(change, "before", False, address, hidden)
    after, after_unknown, after_sensitive = _side(
        change, "after", change.get("after_unknown", False), address, hidden
    )
    return {
        "actions": _strings(change.get("actions")),
        "before": before,
        "after": after,
        "after_unknown": after_unknown,
        "before_sensitive": before_sensitive,
        "after_sensitive": after_sensitive,
    }


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _resource_change(entry: Mapping[str, Any], hidden: _Hidden) -> dict[str, Any]:
    raw = entry.get("change")
    change: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    out: dict[str, Any] = {}
    for key in ("address", "module_address", "mode", "type", "name", "provider_name"):
        value = entry.get(key)
        if isinstance(value, str):
            out[key] = value
        elif key != "module_address":
            out[key] = None
    index = entry.get("index")
    if isinstance(index, str | int) and not isinstance(index, bool):
        out["index"] = index
    for key in ("deposed", "action_reason"):
        value = entry.get(key)
        if isinstance(value, str):
            out[key] = value
    out["change"] = _change(change, str(out.get("address")), hidden)
    return out


def _output_change(name: str, change: Mapping[str, Any], hidden: _Hidden) -> dict[str, Any]:
    flags = (change.get("sensitive"), change.get("before_sensitive"), change.get("after_sensitive"))
    if any(flag is True for flag in flags):
        unknown = change.get("after_unknown") is True
        return {
            "actions": _strings(change.get("actions")),
            "before": SENSITIVE if change.get("before") is not None else None,
            "after": SENSITIVE if change.get("after") is not None and not unknown else None,
            "after_unknown": unknown,
            "before_sensitive": True,
            "after_sensitive": True,
        }
    return _change(change, f"output.{name}", hidden)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _provider_config(raw: object) -> dict[str, Any]:
    """Provider configurations: name, alias, version constraint, module, and the names
    of the arguments set (never their values: a constant may be a credential)."""
    out: dict[str, Any] = {}
    for key, entry in sorted(raw.items()) if isinstance(raw, Mapping) else []:
        if not isinstance(key, str) or not isinstance(entry, Mapping):
            continue
        expressions = entry.get("expressions")
        out[key] = known_fields(
            name=_text(entry.get("name")),
            full_name=_text(entry.get("full_name")),
            alias=_text(entry.get("alias")),
            version_constraint=_text(entry.get("version_constraint")),
            module_address=_text(entry.get("module_address")),
            expressions=(
                {k: {} for k in sorted(expressions) if isinstance(k, str)}
                if isinstance(expressions, Mapping)
                else None
            ),
        )
    return out


def _module_calls(module: object, depth: int = 0) -> dict[str, Any]:
    """Module calls, nested: source and version constraint only (no input expressions)."""
    calls = module.get("module_calls") if isinstance(module, Mapping) else None
    out: dict[str, Any] = {}
    if not isinstance(calls, Mapping) or depth > _MAX_DEPTH:
        return out
    for name, call in sorted(calls.items()):
        if not isinstance(name, str) or not isinstance(call, Mapping):
            continue
        entry = known_fields(
            source=_text(call.get("source")),
            version_constraint=_text(call.get("version_constraint")),
        )
        nested = _module_calls(call.get("module"), depth + 1)
        if nested:
            entry["module"] = {"module_calls": nested}
        out[name] = entry
    return out


def sanitized_configuration(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of the plan's ``configuration`` policies may see."""
    raw = plan.get("configuration")
    config: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return {
        "provider_config": _provider_config(config.get("provider_config")),
        "root_module": {"module_calls": _module_calls(config.get("root_module"))},
    }


def sanitized_plan_document(plan: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The Terraform-shaped sanitized plan, and what was hidden whole for want of a
    sensitivity map (``address (before|after)``)."""
    hidden = _Hidden()
    raw_resources = plan.get("resource_changes")
    resources = [
        _resource_change(entry, hidden)
        for entry in (raw_resources if isinstance(raw_resources, list) else [])
        if isinstance(entry, Mapping)
    ]
    raw_outputs = plan.get("output_changes")
    outputs = {
        name: _output_change(name, change if isinstance(change, Mapping) else {}, hidden)
        for name, change in sorted(
            (raw_outputs.items() if isinstance(raw_outputs, Mapping) else []),
            key=lambda item: str(item[0]),
        )
        if isinstance(name, str)
    }
    document = {
        "format_version": _text(plan.get("format_version")) or "",
        "terraform_version": _text(plan.get("terraform_version")) or "",
        "resource_changes": resources,
        "output_changes": outputs,
        "configuration": sanitized_configuration(plan),
    }
    return document, hidden.addresses
