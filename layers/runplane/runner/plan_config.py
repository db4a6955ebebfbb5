"""Check the plan JSON's configuration resources and provisioners against the plan file.

Policies read ``configuration.root_module.resources`` (and each module call's): which
resources a module declares and which provisioners they run (a policy denying
``local-exec`` reads nothing else). The engine prints that section from the
configuration snapshot the saved plan carries (``tfconfig/m-KEY/`` per module, listed
in ``tfconfig/modules.json``), the same files ``apply`` evaluates. So the runner reads
those files itself and raises :class:`~runplane.runner.plan_file.PlanMismatch` when the
JSON names another set of ``resource``/``data`` blocks in a module, or other
provisioner types (counted per type) for a resource, than the files declare, override
files applied as the engine applies them (an overriding block with provisioners
replaces the original's).

Not checked: arguments (``expressions``: constants and references), ``count`` and
``for_each`` (the engine leaves some ``for_each_expression`` out), ``depends_on``,
provider configurations, outputs and variables: checking them means evaluating HCL
expressions. A policy reading them reads what the engine printed.

Files are read block by block with :mod:`runplane.runner.hcl_blocks` (comments,
strings with interpolations, heredocs); a file it cannot read, or a JSON file that is
not an object, is refused. Messages name modules, files and resource addresses (types
and names as written in the configuration), never values.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from runplane.runner.config_check import JSON_SUFFIXES, NATIVE_SUFFIXES, _is_override
from runplane.runner.hcl_blocks import (
    IDENT,
    Statement,
    Unreadable,
    json_bodies,
    json_document,
    statements,
)
from runplane.runner.plan_file import (
    MAX_DEPTH,
    MAX_MANIFEST_BYTES,
    PlanFileError,
    PlanMismatch,
    _member,
    _open_archive,
    _shown,
)

MAX_CONFIGURATION_BYTES: Final = 64 * 1024 * 1024
"""The most configuration source read from one plan file, all files together."""

_MODES: Final = {"resource": "managed", "data": "data"}

Resource = tuple[str, str, str]
"""``(mode, type, name)``."""
Blocks = dict[Resource, Counter[str]]
"""Each resource of a module and its provisioners' types, counted."""


def configuration_blocks(plan: bytes) -> dict[str, Blocks]:
    """The resources and provisioner types each module of the saved plan's configuration
    snapshot declares, by module key (``""`` for the root, ``a.b`` for a nested call)."""
    zf = _open_archive(plan)
    with zf:
        names = [info.orig_filename for info in zf.infolist()]
        total = sum(
            info.file_size for info in zf.infolist() if info.orig_filename.startswith("tfconfig/")
        )
        if total > MAX_CONFIGURATION_BYTES:
            raise PlanFileError(
                "the plan file's configuration snapshot is larger than the check reads"
            )
        manifest = _member(plan, zf, "tfconfig/modules.json", MAX_MANIFEST_BYTES)
        if manifest is None:
            raise PlanFileError("the plan file has no configuration snapshot manifest")
        try:
            records = json.loads(manifest)
        except ValueError:
            raise PlanFileError("the plan file's configuration manifest cannot be read") from None
        keys = (
            [r.get("Key") for r in records if isinstance(r, dict)]
            if isinstance(records, list)
            else []
        )
        modules: dict[str, Blocks] = {}
        for key in keys:
            if not isinstance(key, str):
                raise PlanFileError("the plan file's configuration manifest cannot be read")
            prefix = f"tfconfig/m-{key}/"
            files = sorted(
                name
                for name in names
                if name.startswith(prefix)
                and "/" not in name[len(prefix) :]
                and name.endswith((*NATIVE_SUFFIXES, *JSON_SUFFIXES))
            )
            primary: list[tuple[str, bytes]] = []
            overrides: list[tuple[str, bytes]] = []
            for name in files:
                try:
                    data = _member(plan, zf, name, MAX_CONFIGURATION_BYTES)
                except UnicodeEncodeError:
                    raise PlanFileError(
                        f"the plan file's configuration file {_shown(name)} has a name the "
                        "check cannot read"
                    ) from None
                base = name[len(prefix) :]
                (overrides if _is_override(base) else primary).append((base, data or b""))
            modules[key] = _module_blocks(key, primary, overrides)
    return modules


def _module_blocks(
    key: str, primary: list[tuple[str, bytes]], overrides: list[tuple[str, bytes]]
) -> Blocks:
    blocks: Blocks = {}
    for name, data in primary:
        for resource, provisioners in _file_blocks(key, name, data):
            blocks[resource] = provisioners
    for name, data in overrides:
        for resource, provisioners in _file_blocks(key, name, data):
            # An overriding block with provisioners replaces the original's; one without
            # keeps them (the engine refuses an override of an undeclared resource).
            if provisioners or resource not in blocks:
                blocks[resource] = provisioners
    return blocks


def _file_blocks(key: str, name: str, data: bytes) -> list[tuple[Resource, Counter[str]]]:
    try:
        text = data.decode("utf-8-sig")
        if name.endswith(JSON_SUFFIXES):
            return _json_file_blocks(text)
        return _native_file_blocks(text)
    except (Unreadable, UnicodeDecodeError, ValueError, RecursionError):
        module = f"module {_shown(key)}" if key else "the root module"
        raise PlanFileError(
            f"the plan file's configuration file {_shown(name)} of {module} cannot be read"
        ) from None


def _native_file_blocks(text: str) -> list[tuple[Resource, Counter[str]]]:
    found: list[tuple[Resource, Counter[str]]] = []
    current: Counter[str] | None = None  # the provisioners of the resource being read
    for statement in statements(text):
        tokens, depth = statement.tokens, statement.depth
        if statement.end == "{":
            if depth == 0 and tokens[:1] in (["resource"], ["data"]):
                type_, name = _labels(statement, 2)
                current = Counter()
                found.append(((_MODES[tokens[0]], type_, name), current))
            elif depth == 1 and current is not None and tokens[:1] == ["provisioner"]:
                (kind,) = _labels(statement, 1)
                current[kind] += 1
        elif statement.closes_top_block:
            current = None
    return found


def _labels(statement: Statement, count: int) -> list[str]:
    """A block's labels: quoted strings without templates, or bare identifiers (HCL
    reads ``resource aws_instance web {`` as ``resource "aws_instance" "web" {``)."""
    labels = statement.values[1:]
    if len(labels) != count or any(
        label is None or (token != '"' and not IDENT.fullmatch(token))
        for token, label in zip(statement.tokens[1:], labels, strict=True)
    ):
        raise Unreadable
    return [label for label in labels if label is not None]


def _json_file_blocks(text: str) -> list[tuple[Resource, Counter[str]]]:
    found: list[tuple[Resource, Counter[str]]] = []
    for keyword, value in json_document(text):
        if keyword not in _MODES:
            continue
        for by_type in json_bodies(value):
            for type_, by_name in by_type:
                for named in json_bodies(by_name):
                    for name, block in named:
                        for body in json_bodies(block):
                            found.append(
                                ((_MODES[keyword], str(type_), str(name)), _json_provisioners(body))
                            )
    return found


def _json_provisioners(body: list[tuple[str, Any]]) -> Counter[str]:
    """``"provisioner": {"TYPE": {...}}`` or a list of such objects, each body one
    provisioner or a list of them."""
    counted: Counter[str] = Counter()
    for key, value in body:
        if key != "provisioner":
            continue
        for by_type in json_bodies(value):
            for type_, bodies in by_type:
                counted[str(type_)] += max(1, len(json_bodies(bodies)))
    return counted


# -- the comparison ---------------------------------------------------------------------------


def _shown_resources(module: object, where: str) -> Blocks:
    shown: Blocks = {}
    resources = module.get("resources") if isinstance(module, Mapping) else None
    if resources is None:
        return shown
    if not isinstance(resources, list):
        raise PlanMismatch(f"configuration: the resources of {where} are not a list")
    for entry in resources:
        if not isinstance(entry, Mapping):
            raise PlanMismatch(f"configuration: a resource of {where} is not an object")
        resource = (str(entry.get("mode")), str(entry.get("type")), str(entry.get("name")))
        if resource in shown:
            raise PlanMismatch(f"configuration: {where} lists {_address(resource)} twice")
        provisioners = entry.get("provisioners") or []
        if not isinstance(provisioners, list):
            raise PlanMismatch(
                f"configuration: the provisioners of {_address(resource)} in {where} are not a list"
            )
        shown[resource] = Counter(
            str(p.get("type")) if isinstance(p, Mapping) else "" for p in provisioners
        )
    return shown


def _address(resource: Resource) -> str:
    mode, type_, name = resource
    return _shown(f"{'data.' if mode == 'data' else ''}{type_}.{name}")


def _shown_modules(module: object, key: str, out: dict[str, Blocks], depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise PlanMismatch("configuration: module calls are nested too deeply")
    where = f"module {_shown(key)}" if key else "the root module"
    out[key] = _shown_resources(module, where)
    calls = module.get("module_calls") if isinstance(module, Mapping) else None
    for name, call in calls.items() if isinstance(calls, Mapping) else []:
        child = f"{key}.{name}" if key else str(name)
        _shown_modules(
            call.get("module") if isinstance(call, Mapping) else None, child, out, depth + 1
        )


def check_configuration(plan: bytes, document: Mapping[str, Any]) -> None:
    """Raise ``PlanMismatch`` unless the JSON's configuration names, in every module of
    the snapshot, the resources and provisioner types its files declare."""
    declared = configuration_blocks(plan)
    configuration = document.get("configuration")
    shown: dict[str, Blocks] = {}
    _shown_modules(
        configuration.get("root_module") if isinstance(configuration, Mapping) else None,
        "",
        shown,
    )
    for key, blocks in declared.items():
        where = f"module {_shown(key)}" if key else "the root module"
        listed = shown.get(key, {})
        for resource in sorted(blocks.keys() | listed.keys()):
            if resource not in listed:
                raise PlanMismatch(
                    f"configuration: {where} declares {_address(resource)}, which the plan "
                    "JSON leaves out"
                )
            if resource not in blocks:
                raise PlanMismatch(
                    f"configuration: the plan JSON lists {_address(resource)} in {where}, "
                    "which its files do not declare"
                )
            if +blocks[resource] != +listed[resource]:
                raise PlanMismatch(
                    f"configuration: the provisioners of {_address(resource)} in {where} "
                    "differ from the plan file's configuration"
                )
