"""Policy sets: their modules, policies and metadata; loading and checking them.

Next to it: ``policy_capabilities`` (the builtins a module may not use),
``policy_sanitize`` (the sanitized plan derivative policies read, and its digest) and
``policy_results`` (results and the combined verdict).

Pure: standard library only. The Rego evaluator lives in ``runplane.adapters.rego``.

A policy set is a named collection of Rego modules plus metadata declaring its
policies. On disk it is a directory holding ``policy-set.json`` and the ``*.rego``
files next to it (subdirectories are ignored; other tools' layouts are read by
``runplane.domain.policy_packaging``)::

    {"name": "baseline",
     "policies": [{"name": "deny_delete", "enforcement": "hard_mandatory",
                   "query": "data.runplane.deny_delete.deny",
                   "description": "No resource is deleted or replaced."}]}

Over the API the same content travels as one JSON document (``to_document``):
``{"name": ..., "modules": [{"name": "x.rego", "source": "..."}], "policies": [...]}``.

Each policy's query must be a plain reference into a package that one of the set's
modules declares; it evaluates to a set or array of violation messages, and an empty
or undefined result means the policy passed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy_capabilities import _blank_comments_and_strings
from runplane.domain.policy_input import DEFAULT_SHAPE, REFUSE, shape_options
from runplane.domain.policy_sanitize import canonical_json

POLICY_SET_METADATA_FILE: Final = "policy-set.json"
"""The metadata file of a policy-set directory."""

MAX_NAME_CHARS: Final = 255
"""A name's length: a file name's limit on common file systems, which real libraries'
file names and the ``PACKAGE.RULE`` names the loader generates fit in."""

NAME_PATTERN: Final = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME_CHARS - 1}}}")
"""Policy-set, policy and module names."""

MODULE_NAME_PATTERN: Final = re.compile(
    rf"(?:[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME_CHARS - 1}}}/){{0,15}}"
    rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME_CHARS - 1}}}"
)
"""Module names: a file name, or a relative path of such names (a subdirectory's module)."""

TEST_MODULE_SUFFIXES: Final = ("_test.rego", ".test.rego")
"""Unit test modules (``runplane policy test --unit``), never published."""

QUERY_PATTERN: Final = re.compile(r"data(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
"""A policy query: a plain dotted reference under ``data`` and nothing else."""

MAX_MODULES: Final = 64
MAX_POLICIES: Final = 128
MAX_MODULE_BYTES: Final = 256 * 1024
MAX_TOTAL_BYTES: Final = 1024 * 1024
MAX_DESCRIPTION_CHARS: Final = 1000

_PACKAGE = re.compile(r"(?m)^[ \t]*package[ \t]+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_]\w*)*)\b")


class Enforcement(StrEnum):
    ADVISORY = "advisory"
    """Reported, never blocks."""
    SOFT_MANDATORY = "soft_mandatory"
    """Blocks the run unless someone overrides it."""
    HARD_MANDATORY = "hard_mandatory"
    """Fails the run."""


_LEVELS: Final = frozenset(level.value for level in Enforcement)


class PolicyOutcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"


class PolicyVerdict(StrEnum):
    """The combined verdict of a run's policy results (see ``overall``)."""

    PASSED = "passed"
    SOFT_FAILED = "soft_failed"
    HARD_FAILED = "hard_failed"


# -- policy sets --------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyModule:
    name: str
    """A file name such as ``deny_delete.rego``."""
    source: str


@dataclass(frozen=True)
class PolicyDefinition:
    """One policy of a set: a query whose result is its violation messages."""

    name: str
    enforcement: Enforcement
    query: str
    """e.g. ``data.runplane.deny_delete.deny``."""
    description: str = ""

    def __post_init__(self) -> None:
        # Accept the level's string value; anything else is refused by check_policy_set.
        value: object = self.enforcement
        if isinstance(value, str) and value in _LEVELS:
            object.__setattr__(self, "enforcement", Enforcement(value))


@dataclass(frozen=True)
class PolicySetContent:
    """The immutable content of one policy-set version.

    Modules and policies are kept sorted by name, so two sets with the same content
    are equal and have the same digest whatever order they were given in.
    """

    name: str
    modules: tuple[PolicyModule, ...]
    policies: tuple[PolicyDefinition, ...]
    input_shape: str = DEFAULT_SHAPE
    """What ``input`` is (``runplane.domain.policy_input``)."""
    unknown_input_roots: str = REFUSE
    """Whether publication refuses or warns about reads of roots the shape lacks."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "modules", tuple(sorted(self.modules, key=lambda m: m.name)))
        object.__setattr__(self, "policies", tuple(sorted(self.policies, key=lambda p: p.name)))

    def to_document(self) -> dict[str, Any]:
        """The JSON transport form; ``policy_set_from_document`` reads it back.

        The shape options appear only when they are not the defaults, so the digest of
        a set that declares neither is what it was before shapes existed.
        """
        options = {
            key: value
            for key, value, default in (
                ("input_shape", self.input_shape, DEFAULT_SHAPE),
                ("unknown_input_roots", self.unknown_input_roots, REFUSE),
            )
            if value != default
        }
        return {
            **options,
            "name": self.name,
            "modules": [{"name": m.name, "source": m.source} for m in self.modules],
            "policies": [
                {
                    "name": p.name,
                    "enforcement": str(p.enforcement),
                    "query": p.query,
                    "description": p.description,
                }
                for p in self.policies
            ],
        }

    def digest(self) -> str:
        """The content address: ``sha256:<hex>`` of the canonical JSON of the document."""
        return "sha256:" + hashlib.sha256(canonical_json(self.to_document())).hexdigest()


def check_policy_set(content: PolicySetContent) -> None:
    """Raise ``InvalidPolicySet`` unless the set's structure is valid.

    Checks names, counts, sizes, enforcement levels, that no name repeats, and that
    every query is a plain ``data.`` reference to a rule that a module of the named
    package defines (a query naming nothing would be undefined, which reads as passed).
    It does not parse Rego (the adapter does) nor check capabilities
    (``refuse_forbidden_builtins``).
    """
    if not isinstance(content.name, str) or not NAME_PATTERN.fullmatch(content.name):
        raise InvalidPolicySet(f"the policy-set name {content.name!r} is not valid: {_NAME_RULE}")
    shape_options(
        {"input_shape": content.input_shape, "unknown_input_roots": content.unknown_input_roots}
    )
    if not content.modules:
        raise InvalidPolicySet(f"policy set {content.name} has no .rego modules")
    if len(content.modules) > MAX_MODULES:
        raise InvalidPolicySet(
            f"policy set {content.name} has {len(content.modules)} modules; "
            f"at most {MAX_MODULES} are allowed"
        )
    if not content.policies:
        raise InvalidPolicySet(f"policy set {content.name} declares no policies")
    if len(content.policies) > MAX_POLICIES:
        raise InvalidPolicySet(
            f"policy set {content.name} declares {len(content.policies)} policies; "
            f"at most {MAX_POLICIES} are allowed"
        )
    total = 0
    packages: dict[str, list[str]] = {}
    for module in content.modules:
        name = module.name
        if (
            not isinstance(name, str)
            or not MODULE_NAME_PATTERN.fullmatch(name)
            or not name.endswith(".rego")
        ):
            raise InvalidPolicySet(
                f"the module name {name!r} is not valid: it must end in .rego; {_NAME_RULE} "
                "(a module in a subdirectory is named by its relative path, such as lib/x.rego)"
            )
        if not isinstance(module.source, str):
            raise InvalidPolicySet(f"module {name} has no source text")
        size = len(module.source.encode("utf-8"))
        if size > MAX_MODULE_BYTES:
            raise InvalidPolicySet(
                f"module {name} is {size:,} bytes; a module may be at most "
                f"{MAX_MODULE_BYTES:,} bytes"
            )
        total += size
        blanked = _blank_comments_and_strings(module.source)
        found = _PACKAGE.findall(blanked)
        if not found:
            raise InvalidPolicySet(f"module {name} declares no package")
        for package in found:
            packages.setdefault(package, []).append(blanked)
    if total > MAX_TOTAL_BYTES:
        raise InvalidPolicySet(
            f"policy set {content.name} has {total:,} bytes of modules; "
            f"at most {MAX_TOTAL_BYTES:,} are allowed"
        )
    _refuse_duplicates("module", [m.name for m in content.modules])
    _refuse_duplicates("policy", [p.name for p in content.policies])
    for policy in content.policies:
        _check_policy(policy, packages)


def _check_policy(policy: PolicyDefinition, packages: Mapping[str, list[str]]) -> None:
    name = policy.name
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidPolicySet(f"the policy name {name!r} is not valid: {_NAME_RULE}")
    if not isinstance(policy.enforcement, Enforcement):
        raise InvalidPolicySet(f"policy {name}: {_enforcement_rule(policy.enforcement)}")
    if not isinstance(policy.query, str) or not QUERY_PATTERN.fullmatch(policy.query):
        raise InvalidPolicySet(
            f"policy {name}: the query {policy.query!r} must be a plain reference such as "
            "data.runplane.deny_delete.deny"
        )
    if not isinstance(policy.description, str) or len(policy.description) > MAX_DESCRIPTION_CHARS:
        raise InvalidPolicySet(
            f"policy {name}: the description must be text of at most "
            f"{MAX_DESCRIPTION_CHARS} characters"
        )
    path = policy.query.split(".")[1:]
    matches = [
        package
        for package in packages
        if len(path) > package.count(".") + 1
        and path[: package.count(".") + 1] == package.split(".")
    ]
    if not matches:
        raise InvalidPolicySet(
            f"policy {name}: the query {policy.query} does not name a rule in a package "
            f"of this set (packages: {', '.join(sorted(packages))})"
        )
    # A query naming no rule would be undefined, which reads as "passed": refuse it.
    for package in matches:
        rule = path[package.count(".") + 1]
        head = re.compile(rf"(?m)^[ \t]*(?:default[ \t]+)?{re.escape(rule)}\b")
        if any(head.search(source) for source in packages[package]):
            return
    raise InvalidPolicySet(
        f"policy {name}: no module of package {matches[0]} defines the rule "
        f"{path[matches[0].count('.') + 1]} that the query {policy.query} names"
    )


def _refuse_duplicates(kind: str, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidPolicySet(f"the {kind} name {name} appears more than once")
        seen.add(name)


_SHAPE_FIELDS: Final = ("input_shape", "unknown_input_roots", "unknown_input_paths")

_NAME_RULE: Final = (
    f"names start with a letter or digit and use at most {MAX_NAME_CHARS} letters, digits, "
    "'_', '.' or '-'"
)


def is_test_module(name: str) -> bool:
    """Whether ``name`` is a unit test module (``x_test.rego`` or ``x.test.rego``)."""
    return name.endswith(TEST_MODULE_SUFFIXES)


def _enforcement_rule(value: object) -> str:
    levels = ", ".join(level.value for level in Enforcement)
    return f"the enforcement level {value!r} is not one of {levels}"


def _enforcement(value: object, policy: str) -> Enforcement:
    if isinstance(value, str):
        try:
            return Enforcement(value)
        except ValueError:
            pass
    raise InvalidPolicySet(f"policy {policy}: {_enforcement_rule(value)}")


def _policy_from_entry(entry: object, index: int) -> PolicyDefinition:
    if not isinstance(entry, Mapping):
        raise InvalidPolicySet(f"policies[{index}] must be an object")
    unknown = sorted(set(entry) - {"name", "enforcement", "query", "description"})
    if unknown:
        raise InvalidPolicySet(f"policies[{index}] has unknown fields: {', '.join(unknown)}")
    name = entry.get("name")
    if not isinstance(name, str):
        raise InvalidPolicySet(f"policies[{index}] needs a name")
    description = entry.get("description", "")
    return PolicyDefinition(
        name=name,
        enforcement=_enforcement(entry.get("enforcement"), name),
        query=entry.get("query"),  # type: ignore[arg-type]  # checked by check_policy_set
        description=description,
    )


def _policies_from(doc: Mapping[str, Any]) -> tuple[PolicyDefinition, ...]:
    entries = doc.get("policies")
    if not isinstance(entries, list):
        raise InvalidPolicySet("policies must be a list of policy objects")
    return tuple(_policy_from_entry(entry, i) for i, entry in enumerate(entries))


def policy_set_from_document(doc: Mapping[str, Any]) -> PolicySetContent:
    """Read and validate the JSON transport form (see ``PolicySetContent.to_document``)."""
    if not isinstance(doc, Mapping):
        raise InvalidPolicySet("a policy set must be a JSON object")
    unknown = sorted(set(doc) - {"name", "modules", "policies", *_SHAPE_FIELDS})
    if unknown:
        raise InvalidPolicySet(f"the policy set has unknown fields: {', '.join(unknown)}")
    name = doc.get("name")
    raw_modules = doc.get("modules")
    if not isinstance(raw_modules, list):
        raise InvalidPolicySet("modules must be a list of {name, source} objects")
    modules = []
    for i, entry in enumerate(raw_modules):
        if (
            not isinstance(entry, Mapping)
            or set(entry) != {"name", "source"}
            or not isinstance(entry.get("name"), str)
            or not isinstance(entry.get("source"), str)
        ):
            raise InvalidPolicySet(f"modules[{i}] must be an object with a name and a source")
        modules.append(PolicyModule(entry["name"], entry["source"]))
    content = PolicySetContent(
        name=name,  # type: ignore[arg-type]  # checked by check_policy_set
        modules=tuple(modules),
        policies=_policies_from(doc),
        **shape_options(doc),
    )
    check_policy_set(content)
    return content


def load_policy_set_dir(path: str | os.PathLike[str]) -> PolicySetContent:
    """Read and validate a policy-set directory: ``policy-set.json`` plus its ``*.rego``,
    or another tool's packaging (``runplane.domain.policy_packaging``)."""
    root = Path(path)
    meta_path = root / POLICY_SET_METADATA_FILE
    if not meta_path.is_file():
        from runplane.domain.policy_packaging import load_packaged_dir

        return load_packaged_dir(root)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidPolicySet(f"{POLICY_SET_METADATA_FILE} is not valid JSON: {error}") from None
    if not isinstance(meta, dict):
        raise InvalidPolicySet(f"{POLICY_SET_METADATA_FILE} must hold a JSON object")
    unknown = sorted(set(meta) - {"name", "policies", *_SHAPE_FIELDS})
    if unknown:
        raise InvalidPolicySet(
            f"{POLICY_SET_METADATA_FILE} has unknown fields: {', '.join(unknown)}"
        )
    # Unit test files (`runplane policy test --unit`) are never published.
    files = sorted(p for p in root.glob("*.rego") if p.is_file() and not is_test_module(p.name))
    if len(files) > MAX_MODULES:
        raise InvalidPolicySet(
            f"the directory has {len(files)} .rego files; at most {MAX_MODULES} are allowed"
        )
    modules = []
    for file in files:
        size = file.stat().st_size
        if size > MAX_MODULE_BYTES:
            raise InvalidPolicySet(
                f"module {file.name} is {size:,} bytes; a module may be at most "
                f"{MAX_MODULE_BYTES:,} bytes"
            )
        try:
            source = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InvalidPolicySet(f"module {file.name} is not UTF-8 text") from None
        modules.append(PolicyModule(file.name, source))
    content = PolicySetContent(
        name=meta.get("name"),  # type: ignore[arg-type]  # checked by check_policy_set
        modules=tuple(modules),
        policies=_policies_from(meta),
        **shape_options(meta),
    )
    check_policy_set(content)
    return content
