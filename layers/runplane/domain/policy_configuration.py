"""The plan's ``configuration`` section, as policies of the plan-shaped inputs see it.

Pure: standard library only. The layout is the engine's ``show -json`` one
(``provider_config``; ``root_module`` with ``resources``, ``module_calls``, ``outputs``
and ``variables``, nested through each call's ``module``), so policies written against
Terraform's documented format read it unchanged. Every field of that layout is kept
except the values that may be secret, which are masked ``"(sensitive)"`` in place
(the key stays, so a policy reading it sees a masked value, not a missing one):

- a resource's argument constant (``expressions.X.constant_value``) shows only where
  the plan already shows the same attribute unmasked: every instance of the resource
  the plan describes (resource changes, planned values, prior state) has a sensitivity
  map, and none marks anything at or under that attribute. A resource with no
  instance in the plan (``count = 0``), or one whose map is missing, gets every
  constant masked. Nested blocks are matched element-agnostically: a mark on any
  element masks the argument in every block.
- a module call's argument constants are always masked: the called module may pass
  them to an argument its provider marks sensitive without declaring its variable
  sensitive, and the plan does not say.
- a provider configuration's constants are masked except ``region``, ``project``,
  ``zone`` and ``assume_role``'s ``role_arn`` (credentials, tokens and endpoints with
  embedded keys are all provider arguments); ``alias`` and ``version_constraint`` are
  fields of their own and kept.
- a variable's ``default`` and an output's constant are masked when declared
  ``sensitive``.
- provisioner arguments are kept (the engine prints a provisioner's constant command
  in its own output), except anything under a ``connection`` block, which holds
  passwords and keys.
- a ``for_each`` over a constant map keeps its keys (they are the instance keys, in
  every address) and masks its values.

References (``references``: addresses such as ``var.token``, never values) are kept
everywhere. Anything not in the layout (fields later engines add) is left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

SENSITIVE: Final = "(sensitive)"
MAX_DEPTH: Final = 100

PROVIDER_ARGUMENTS_SHOWN: Final = frozenset(
    {("region",), ("project",), ("zone",), ("assume_role", None, "role_arn")}
)
"""Provider-configuration arguments whose constants are shown (where a provider
deploys, and which role it assumes); every other is masked."""

_NO_MAP: Final = object()
"""An instance whose value the plan gives without a sensitivity map."""

Path = tuple[str | None, ...]
"""An argument's path in a resource's value; ``None`` stands for any element of a block list."""
Secret = Callable[[Path], bool]

_KEY: Final = re.compile(r'\[(?:"(?:[^"\\]|\\.)*"|[^\]"]*)\]')


def module_path(module_address: str) -> str:
    """``module.a["x"].module.b[0]`` → ``module.a.module.b``: the configuration's module,
    without instance keys."""
    return _KEY.sub("", module_address)


# -- which attributes the plan marks sensitive ----------------------------------------------


class SensitivityIndex:
    """For each configuration resource (module path, mode, type, name), the sensitivity
    maps of the instances the plan describes."""

    def __init__(self, plan: Mapping[str, Any]) -> None:
        self._maps: dict[tuple[str, str, str, str], list[Any]] = {}
        changes = plan.get("resource_changes")
        for entry in changes if isinstance(changes, list) else []:
            if not isinstance(entry, Mapping):
                continue
            change = entry.get("change")
            change = change if isinstance(change, Mapping) else {}
            maps = [
                change.get(f"{side}_sensitive", _NO_MAP)
                for side in ("before", "after")
                if change.get(side) is not None
            ]
            module = entry.get("module_address")
            self._add(module if isinstance(module, str) else "", entry, maps)
        planned = plan.get("planned_values")
        if isinstance(planned, Mapping):
            self._walk(planned.get("root_module"), "", 0)
        prior = plan.get("prior_state")
        values = prior.get("values") if isinstance(prior, Mapping) else None
        if isinstance(values, Mapping):
            self._walk(values.get("root_module"), "", 0)

    def _walk(self, module: object, address: str, depth: int) -> None:
        if not isinstance(module, Mapping) or depth > MAX_DEPTH:
            return
        resources = module.get("resources")
        for resource in resources if isinstance(resources, list) else []:
            if isinstance(resource, Mapping):
                maps = [resource.get("sensitive_values", _NO_MAP)]
                self._add(address, resource, maps)
        children = module.get("child_modules")
        for child in children if isinstance(children, list) else []:
            if isinstance(child, Mapping):
                child_address = child.get("address")
                if isinstance(child_address, str):
                    self._walk(child, child_address, depth + 1)

    def _add(self, module_address: str, entry: Mapping[str, Any], maps: list[Any]) -> None:
        key = (
            module_path(module_address),
            str(entry.get("mode")),
            str(entry.get("type")),
            str(entry.get("name")),
        )
        self._maps.setdefault(key, []).extend(maps)

    def secret(self, module: str, mode: str, type_: str, name: str) -> Secret:
        """Whether an argument of that resource may be secret (see the module doc)."""
        maps = self._maps.get((module, mode, type_, name), [])

        def secret(path: Path) -> bool:
            return not maps or any(m is _NO_MAP or _marks(m, path) for m in maps)

        return secret


def _marks(structure: Any, path: Path, depth: int = 0) -> bool:
    """Whether ``structure`` (a ``*_sensitive`` map) marks anything at, above or below
    ``path``. Fails closed: what is not a map of ``true``/``false`` marks."""
    if structure is True:
        return True
    if structure is False or structure is None:
        return False
    if not isinstance(structure, dict | list) or depth > MAX_DEPTH:
        return True
    if not path:
        items = structure.values() if isinstance(structure, dict) else structure
        return any(_marks(item, (), depth + 1) for item in items)
    head, rest = path[0], path[1:]
    if isinstance(structure, list):
        # A list here is a block list (or a set): any element may be the one meant.
        skip = rest if head is None else path
        return any(_marks(item, skip, depth + 1) for item in structure)
    if head is None:
        # "Any element" of a block the value holds as one object (a single block).
        return _marks(structure, rest, depth + 1)
    return _marks(structure.get(head, False), rest, depth + 1)


# -- values ---------------------------------------------------------------------------------


def _json_value(value: Any, depth: int = 0) -> Any:
    """``value`` if it is plain JSON the canonical form can write, else the mask."""
    if depth > MAX_DEPTH:
        raise ValueError
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError
        return {k: _json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError
    if value is None or isinstance(value, str | bool | int | float):
        return value
    raise ValueError


def _constant(value: Any, secret: bool) -> Any:
    if secret:
        return SENSITIVE
    try:
        return _json_value(value)
    except ValueError:
        return SENSITIVE


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value: object) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [item for item in value if isinstance(item, str)]


def _is_expression(value: object) -> bool:
    """An expression object (``constant_value`` and/or ``references``), not a block body
    (whose arguments are themselves expressions or block lists)."""
    if not isinstance(value, Mapping) or not set(value) <= {"constant_value", "references"}:
        return False
    references = value.get("references", [])
    return isinstance(references, list) and all(isinstance(r, str) for r in references)


def expression(raw: object, secret: bool) -> dict[str, Any]:
    """One expression: its references, and its constant (masked if ``secret``)."""
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, Any] = {}
    if "constant_value" in raw:
        out["constant_value"] = _constant(raw["constant_value"], secret)
    references = _texts(raw.get("references"))
    if references is not None:
        out["references"] = references
    return out


def expressions(raw: object, secret: Secret, path: Path = (), depth: int = 0) -> dict[str, Any]:
    """A block body's arguments (expressions) and nested blocks (lists of bodies)."""
    out: dict[str, Any] = {}
    if not isinstance(raw, Mapping) or depth > MAX_DEPTH:
        return out
    for key, value in sorted(raw.items()):
        if not isinstance(key, str):
            continue
        here = (*path, key)
        if _is_expression(value):
            out[key] = expression(value, secret(here))
        elif isinstance(value, list):
            out[key] = [
                expressions(item, secret, (*here, None), depth + 1)
                for item in value
                if isinstance(item, Mapping)
            ]
        elif isinstance(value, Mapping):
            out[key] = expressions(value, secret, here, depth + 1)
    return out


def _for_each(raw: object) -> dict[str, Any] | None:
    """``for_each_expression``: a constant map keeps its keys (the instance keys), with
    its values masked; a constant set or list of keys is kept."""
    if not isinstance(raw, Mapping):
        return None
    out = expression(raw, secret=False)
    constant = raw.get("constant_value")
    if isinstance(constant, Mapping):
        out["constant_value"] = {str(k): SENSITIVE for k in constant}
    elif isinstance(constant, list) and not all(isinstance(k, str) for k in constant):
        out["constant_value"] = SENSITIVE
    return out


def _count(raw: object) -> dict[str, Any] | None:
    return expression(raw, secret=False) if isinstance(raw, Mapping) else None


def _known(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


# -- the configuration ------------------------------------------------------------------------


def _never(path: Path) -> bool:
    return False


def _always(path: Path) -> bool:
    return True


def _connection(path: Path) -> bool:
    return bool(path) and path[0] == "connection"


def _provider_argument(path: Path) -> bool:
    return path not in PROVIDER_ARGUMENTS_SHOWN


def _provider_config(raw: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, entry in sorted(raw.items()) if isinstance(raw, Mapping) else []:
        if not isinstance(key, str) or not isinstance(entry, Mapping):
            continue
        out[key] = _known(
            name=_text(entry.get("name")),
            full_name=_text(entry.get("full_name")),
            alias=_text(entry.get("alias")),
            version_constraint=_text(entry.get("version_constraint")),
            module_address=_text(entry.get("module_address")),
            expressions=(
                expressions(entry.get("expressions"), _provider_argument)
                if isinstance(entry.get("expressions"), Mapping)
                else None
            ),
        )
    return out


def _provisioners(raw: object) -> list[dict[str, Any]] | None:
    if not isinstance(raw, list):
        return None
    return [
        _known(
            type=_text(item.get("type")),
            expressions=expressions(item.get("expressions"), _connection),
        )
        for item in raw
        if isinstance(item, Mapping)
    ]


def _resources(raw: object, module: str, index: SensitivityIndex) -> list[dict[str, Any]]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        mode, type_, name = (_text(item.get(k)) for k in ("mode", "type", "name"))
        schema_version = item.get("schema_version")
        out.append(
            _known(
                address=_text(item.get("address")),
                mode=mode,
                type=type_,
                name=name,
                provider_config_key=_text(item.get("provider_config_key")),
                provisioners=_provisioners(item.get("provisioners")),
                expressions=expressions(
                    item.get("expressions"),
                    index.secret(module, mode or "", type_ or "", name or ""),
                ),
                schema_version=(
                    schema_version
                    if isinstance(schema_version, int) and not isinstance(schema_version, bool)
                    else None
                ),
                count_expression=_count(item.get("count_expression")),
                for_each_expression=_for_each(item.get("for_each_expression")),
                depends_on=_texts(item.get("depends_on")),
            )
        )
    return out


def _outputs(raw: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, item in sorted(raw.items()) if isinstance(raw, Mapping) else []:
        if not isinstance(name, str) or not isinstance(item, Mapping):
            continue
        sensitive = item.get("sensitive") is True
        out[name] = _known(
            sensitive=True if sensitive else None,
            expression=expression(item.get("expression"), sensitive),
            description=_text(item.get("description")),
            depends_on=_texts(item.get("depends_on")),
        )
    return out


def _variables(raw: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, item in sorted(raw.items()) if isinstance(raw, Mapping) else []:
        if not isinstance(name, str) or not isinstance(item, Mapping):
            continue
        sensitive = item.get("sensitive") is True
        entry = _known(
            description=_text(item.get("description")),
            sensitive=True if sensitive else None,
        )
        if "default" in item:
            entry["default"] = _constant(item["default"], sensitive)
        out[name] = entry
    return out


def _module(raw: object, path: str, index: SensitivityIndex, depth: int) -> dict[str, Any]:
    module: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    calls: dict[str, Any] = {}
    raw_calls = module.get("module_calls")
    for name, call in sorted(raw_calls.items()) if isinstance(raw_calls, Mapping) else []:
        if not isinstance(name, str) or not isinstance(call, Mapping) or depth >= MAX_DEPTH:
            continue
        entry = _known(
            source=_text(call.get("source")),
            version_constraint=_text(call.get("version_constraint")),
            expressions=expressions(call.get("expressions"), _always),
            count_expression=_count(call.get("count_expression")),
            for_each_expression=_for_each(call.get("for_each_expression")),
            depends_on=_texts(call.get("depends_on")),
        )
        child = f"{path}.module.{name}" if path else f"module.{name}"
        entry["module"] = _module(call.get("module"), child, index, depth + 1)
        calls[name] = entry
    return {
        "outputs": _outputs(module.get("outputs")),
        "resources": _resources(module.get("resources"), path, index),
        "module_calls": calls,
        "variables": _variables(module.get("variables")),
    }


def sanitized_configuration(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan's ``configuration`` with every value that may be secret masked (see the
    module doc)."""
    raw = plan.get("configuration")
    config: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return {
        "provider_config": _provider_config(config.get("provider_config")),
        "root_module": _module(config.get("root_module"), "", SensitivityIndex(plan), 0),
    }
