"""The sanitized plan in Terraform's ``show -json`` structure, for the plan-shaped inputs.

Pure: standard library only. Built from the engine's ``show -json`` plan with the same
rules as ``runplane.domain.policy_sanitize.sanitize_plan``: a value the engine marks sensitive is
``"(sensitive)"``, and a value whose sensitivity structure is missing, malformed or
shaped differently is hidden whole. Unlike that document, a value unknown until apply
is left out of ``after`` and marked ``true`` in ``after_unknown``, as the engine does.
The document holds the plan's resource and output changes, its variables (values
masked unless declared and not sensitive), planned values, prior state (values masked
by their ``sensitive_values``), and its configuration with possibly secret constants
masked (``runplane.domain.policy_configuration``); nothing else.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.domain.plan_values import Mark, Mismatch, marked
from runplane.domain.policy_configuration import sanitized_configuration

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


def _values(
    holder: Mapping[str, Any], value_key: str, address: str, hidden: _Hidden
) -> tuple[Any, Any]:
    """A planned or prior object's ``values`` and ``sensitive_values``, sanitized: hidden
    whole without a usable map, as ``before``/``after`` are."""
    value = holder.get(value_key)
    if value is None:
        return None, False
    if "sensitive_values" not in holder:
        hidden.addresses.append(f"{address} ({value_key})")
        return SENSITIVE, True
    try:
        v, _, s = _split(value, holder.get("sensitive_values"), False)
    except Mismatch:
        hidden.addresses.append(f"{address} ({value_key})")
        return SENSITIVE, True
    return v, (s or {}) if isinstance(v, dict) else s


def _state_resource(entry: Mapping[str, Any], hidden: _Hidden) -> dict[str, Any]:
    """One resource of ``planned_values`` or ``prior_state``, in the engine's fields."""
    address = _text(entry.get("address"))
    out: dict[str, Any] = {
        key: _text(entry.get(key)) for key in ("address", "mode", "type", "name", "provider_name")
    }
    index = entry.get("index")
    if isinstance(index, str | int) and not isinstance(index, bool):
        out["index"] = index
    schema_version = entry.get("schema_version")
    if isinstance(schema_version, int) and not isinstance(schema_version, bool):
        out["schema_version"] = schema_version
    for key in ("deposed_key",):
        if isinstance(entry.get(key), str):
            out[key] = entry[key]
    if entry.get("tainted") is True:
        out["tainted"] = True
    depends_on = entry.get("depends_on")
    if isinstance(depends_on, list):
        out["depends_on"] = [item for item in depends_on if isinstance(item, str)]
    out["values"], out["sensitive_values"] = _values(entry, "values", str(address), hidden)
    return out


def _state_module(raw: object, hidden: _Hidden, depth: int = 0) -> dict[str, Any]:
    """A ``root_module`` (or child module) of planned values or prior state."""
    module: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    out: dict[str, Any] = {}
    address = _text(module.get("address"))
    if address is not None:
        out["address"] = address
    resources = module.get("resources")
    if isinstance(resources, list):
        out["resources"] = [
            _state_resource(entry, hidden) for entry in resources if isinstance(entry, Mapping)
        ]
    children = module.get("child_modules")
    if isinstance(children, list) and depth < _MAX_DEPTH:
        out["child_modules"] = [
            _state_module(child, hidden, depth + 1)
            for child in children
            if isinstance(child, Mapping)
        ]
    return out


def _state_outputs(raw: object) -> dict[str, Any]:
    """Outputs of planned values or prior state: a sensitive one's value is masked; one
    not yet known has no value, as the engine writes it."""
    out: dict[str, Any] = {}
    for name, entry in sorted(raw.items()) if isinstance(raw, Mapping) else []:
        if not isinstance(name, str) or not isinstance(entry, Mapping):
            continue
        sensitive = entry.get("sensitive") is not False
        item: dict[str, Any] = {"sensitive": sensitive}
        if "value" in entry:
            item["value"] = SENSITIVE if sensitive else _plain(entry["value"])
        out[name] = item
    return out


def _plain(value: Any) -> Any:
    """A value with no sensitivity map of its own (a non-sensitive output): kept if it is
    plain JSON, else masked."""
    try:
        v, _, _ = _split(value, False, False)
    except Mismatch:
        return SENSITIVE
    return None if v is _ABSENT else v


def _variables(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan's input variables, each value masked unless the root module declares the
    variable and not ``sensitive`` (Runplane declares every sensitive workspace variable
    sensitive to the engine, so their values are masked here too)."""
    raw = plan.get("variables")
    configuration = plan.get("configuration")
    root = configuration.get("root_module") if isinstance(configuration, Mapping) else None
    declared = root.get("variables") if isinstance(root, Mapping) else None
    declared = declared if isinstance(declared, Mapping) else {}
    out: dict[str, Any] = {}
    for name, entry in sorted(raw.items()) if isinstance(raw, Mapping) else []:
        if not isinstance(name, str) or not isinstance(entry, Mapping):
            continue
        declaration = declared.get(name)
        plain = isinstance(declaration, Mapping) and declaration.get("sensitive") is not True
        out[name] = (
            {"value": _plain(entry["value"]) if plain else SENSITIVE} if "value" in entry else {}
        )
    return out


def _planned_values(plan: Mapping[str, Any], hidden: _Hidden) -> dict[str, Any]:
    raw = plan.get("planned_values")
    planned: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return {
        "outputs": _state_outputs(planned.get("outputs")),
        "root_module": _state_module(planned.get("root_module"), hidden),
    }


def _prior_state(plan: Mapping[str, Any], hidden: _Hidden) -> dict[str, Any] | None:
    raw = plan.get("prior_state")
    if not isinstance(raw, Mapping):
        return None  # a plan with no prior state (a new workspace's first plan)
    values = raw.get("values")
    state: Mapping[str, Any] = values if isinstance(values, Mapping) else {}
    return known_fields(
        format_version=_text(raw.get("format_version")),
        terraform_version=_text(raw.get("terraform_version")),
        values={
            "outputs": _state_outputs(state.get("outputs")),
            "root_module": _state_module(state.get("root_module"), hidden),
        },
    )


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
        "variables": _variables(plan),
        "planned_values": _planned_values(plan, hidden),
        "configuration": sanitized_configuration(plan),
    }
    prior_state = _prior_state(plan, hidden)
    if prior_state is not None:
        document["prior_state"] = prior_state
    return document, hidden.addresses


def assume_unmarked(plan: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``plan`` with every sensitivity map it lacks given as marking nothing, and what was
    filled (``address (before|after|values)``, ``output NAME``, ``var.NAME``).

    For ``runplane policy test`` only, on a plan its user wrote by hand (a policy's test
    mock): the engine writes every map, and the control plane hides a value without one
    whole, which on a mock hides the very values the policy is tested on and lets a
    violating mock pass. The user holds the file, so reading it as written exposes
    nothing. Variables the mock's configuration does not declare are declared, not
    sensitive. Malformed maps are left as they are (and hide their value whole)."""
    out = copy.deepcopy(dict(plan))
    filled: list[str] = []
    for entry in out.get("resource_changes") or []:
        if isinstance(entry, dict):
            _fill_change(entry.get("change"), str(entry.get("address")), filled)
    outputs = out.get("output_changes")
    for name, change in outputs.items() if isinstance(outputs, dict) else []:
        _fill_change(change, f"output {name}", filled)
    prior = out.get("prior_state")
    for values in (
        out.get("planned_values"),
        prior.get("values") if isinstance(prior, dict) else None,
    ):
        if isinstance(values, dict):
            _fill_state_values(values, filled)
    _declare_variables(out, filled)
    return out, filled


def _fill_change(holder: object, what: str, filled: list[str]) -> None:
    if not isinstance(holder, dict):
        return
    for side in ("before", "after"):
        if holder.get(side) is not None and f"{side}_sensitive" not in holder:
            holder[f"{side}_sensitive"] = False
            filled.append(f"{what} ({side})")


def _fill_module(raw: object, filled: list[str], depth: int = 0) -> None:
    if not isinstance(raw, dict) or depth > _MAX_DEPTH:
        return
    for resource in raw.get("resources") or []:
        if (
            isinstance(resource, dict)
            and resource.get("values") is not None
            and "sensitive_values" not in resource
        ):
            resource["sensitive_values"] = False
            filled.append(f"{resource.get('address')} (values)")
    for child in raw.get("child_modules") or []:
        _fill_module(child, filled, depth + 1)


def _fill_state_values(values: dict[str, Any], filled: list[str]) -> None:
    _fill_module(values.get("root_module"), filled)
    state_outputs = values.get("outputs")
    for name, entry in state_outputs.items() if isinstance(state_outputs, dict) else []:
        if isinstance(entry, dict) and "sensitive" not in entry:
            entry["sensitive"] = False
            filled.append(f"output {name}")


def _declare_variables(out: dict[str, Any], filled: list[str]) -> None:
    variables = out.get("variables")
    if not isinstance(variables, dict) or not variables:
        return
    configuration = out.setdefault("configuration", {})
    root = configuration.setdefault("root_module", {}) if isinstance(configuration, dict) else None
    declared = root.setdefault("variables", {}) if isinstance(root, dict) else None
    if isinstance(declared, dict):
        for name in variables:
            if name not in declared:
                declared[name] = {}
                filled.append(f"var.{name}")
