"""Policy sets, the sanitized plan derivative they are evaluated against, and results.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from runplane.domain.errors import InvalidPolicySet, PolicyModuleRefused
from runplane.domain.plan_values import Mark, Mismatch, marked
from runplane.domain.policy_input import DEFAULT_SHAPE, REFUSE, shape_options
from runplane.domain.rego_v0 import tokens as rego_tokens

POLICY_SET_METADATA_FILE: Final = "policy-set.json"
"""The metadata file of a policy-set directory."""

NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""Policy-set, policy and module names."""

MODULE_NAME_PATTERN: Final = re.compile(
    r"(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,63}/){0,7}[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
)
"""Module names: a file name, or a relative path of such names (a subdirectory's module)."""

QUERY_PATTERN: Final = re.compile(r"data(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
"""A policy query: a plain dotted reference under ``data`` and nothing else."""

MAX_MODULES: Final = 64
MAX_POLICIES: Final = 128
MAX_MODULE_BYTES: Final = 256 * 1024
MAX_TOTAL_BYTES: Final = 1024 * 1024
MAX_DESCRIPTION_CHARS: Final = 1000

SENSITIVE_MARKER: Final = "(sensitive)"
UNKNOWN_MARKER: Final = "(known after apply)"
POLICY_INPUT_FORMAT: Final = "runplane-policy-input/1"


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


_SHAPE_FIELDS: Final = ("input_shape", "unknown_input_roots")

_NAME_RULE: Final = (
    "names start with a letter or digit and use at most 64 letters, digits, '_', '.' or '-'"
)


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
    # *_test.rego files are unit tests (`runplane policy test --unit`), never published.
    files = sorted(
        p for p in root.glob("*.rego") if p.is_file() and not p.name.endswith("_test.rego")
    )
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


# -- capabilities ---------------------------------------------------------------------------

FORBIDDEN_BUILTINS: Final[frozenset[str]] = frozenset(
    {
        # network
        "http.send",
        "net.lookup_ip_addr",
        # runtime environment (OPA's and rego-cpp's opa.runtime() include every
        # environment variable of the evaluating process)
        "opa.runtime",
        # clock
        "time.now_ns",
        "io.jwt.decode_verify",  # checks exp/nbf against the current time
        "crypto.x509.parse_and_verify_certificates",  # verifies validity at "now"
        "crypto.x509.parse_and_verify_certificates_with_options",
        # randomness
        "uuid.rfc4122",
        "io.jwt.encode_sign",  # ECDSA and RSA-PSS signatures are randomised
        "io.jwt.encode_sign_raw",
    }
)
"""Builtins a published module may not reference.

Policies run with fixed, deterministic capabilities: the same input and modules always
give the same result, and nothing leaves the evaluator. Deliberately allowed because
they are pure: ``net.cidr_*``, ``uuid.parse``, every other ``time.*`` function (they
compute on their arguments), ``io.jwt.decode`` and ``io.jwt.verify_*``, ``trace`` and
``print``. Any reference counts, including ``with time.now_ns as ...`` mocks and
variables that shadow a name, and bracket forms such as ``time["now_ns"]``.
"""

FORBIDDEN_PREFIXES: Final[tuple[str, ...]] = ("http.", "rand.")
"""Whole namespaces refused: all of ``http.*`` (network) and ``rand.*`` (randomness)."""


def forbidden_builtins(source: str) -> list[tuple[str, int]]:
    """The forbidden builtins ``source`` references, as ``(builtin, line)`` in source order.

    Comments and the contents of string literals (``"..."`` with escapes and raw
    `` `...` `` strings) are not references. A reference is a name not preceded by
    ``.``, followed by ``.name`` or ``["name"]`` segments, whitespace allowed.
    """
    found: list[tuple[str, int]] = []
    tokens = _tokens(source)
    for i, (kind, text, line) in enumerate(tokens):
        if kind != "ident" or (i > 0 and tokens[i - 1][0] == "."):
            continue
        path = [text]
        j = i + 1
        while j < len(tokens):
            if tokens[j][0] == "." and j + 1 < len(tokens) and tokens[j + 1][0] == "ident":
                path.append(tokens[j + 1][1])
                j += 2
            elif (
                tokens[j][0] == "["
                and j + 2 < len(tokens)
                and tokens[j + 1][0] == "str"
                and tokens[j + 2][0] == "]"
            ):
                path.append(tokens[j + 1][1])
                j += 3
            else:
                break
        name = _forbidden_name(path)
        if name is not None and (name, line) not in found:
            found.append((name, line))
    return found


def _forbidden_name(path: list[str]) -> str | None:
    dotted = ".".join(path)
    for builtin in sorted(FORBIDDEN_BUILTINS):
        if dotted == builtin or dotted.startswith(builtin + "."):
            return builtin
    if len(path) > 1:
        for prefix in FORBIDDEN_PREFIXES:
            if dotted.startswith(prefix):
                return ".".join(path[:2])
    return None


def refuse_forbidden_builtins(content: PolicySetContent) -> None:
    """Raise ``PolicyModuleRefused`` for the first forbidden reference (modules by name)."""
    for module in content.modules:
        found = forbidden_builtins(module.source)
        if found:
            builtin, line = found[0]
            raise PolicyModuleRefused(module.name, builtin, line)


_PACKAGE = re.compile(r"(?m)^[ \t]*package[ \t]+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_]\w*)*)\b")


_Token = tuple[str, str, int]


def _tokens(source: str) -> list[_Token]:
    """Rego tokens (``rego_v0.tokens``) as the reference scans read them: identifiers,
    strings (decoded), ``.``, ``[``, ``]``; every other token is ``other``; comments and
    newlines are dropped."""
    out: list[_Token] = []
    for token in rego_tokens(source):
        if token.kind == "nl":
            continue
        if token.kind == "str":
            out.append(("str", _string_value(token.text), token.line))
        elif token.kind == "ident":
            out.append(("ident", token.text, token.line))
        elif token.kind == "num":
            out.append(("other", token.text, token.line))
        else:  # punctuation, one token per character (":=" is two)
            out.extend((c if c in ".[]" else "other", c, token.line) for c in token.text)
    return out


def _string_value(literal: str) -> str:
    """A string token's value: a raw string's text, a quoted string decoded (as written
    when it does not decode)."""
    if literal.startswith("`"):
        return literal[1:-1] if len(literal) > 1 and literal.endswith("`") else literal[1:]
    try:
        value = json.loads(literal)
    except ValueError:
        value = literal.strip('"')
    return value if isinstance(value, str) else literal


def _blank_comments_and_strings(source: str) -> str:
    """``source`` with comments and string contents replaced by spaces (lines kept)."""
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "#":
            while i < n and source[i] != "\n":
                out[i] = " "
                i += 1
        elif c == '"':
            i += 1
            while i < n and source[i] not in '"\n':
                step = 2 if source[i] == "\\" else 1
                for k in range(i, min(i + step, n)):
                    if source[k] != "\n":
                        out[k] = " "
                i += step
            i += 1
        elif c == "`":
            i += 1
            while i < n and source[i] != "`":
                if source[i] != "\n":
                    out[i] = " "
                i += 1
            i += 1
        else:
            i += 1
    return "".join(out)


# -- the sanitized plan derivative ------------------------------------------------------------


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


def _summary(changes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    add = change = destroy = replace = 0
    for entry in changes:
        actions = entry["actions"]
        if sorted(actions) == ["create", "delete"]:
            add, destroy, replace = add + 1, destroy + 1, replace + 1
        elif actions == ["create"]:
            add += 1
        elif actions == ["update"]:
            change += 1
        elif actions == ["delete"]:
            destroy += 1
    return {"add": add, "change": change, "destroy": destroy, "replace": replace}


def sanitize_plan(
    plan: Mapping[str, Any], *, workspace: str, run_kind: str, engine_version: str
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
    return {
        "format": POLICY_INPUT_FORMAT,
        "run": {"workspace": workspace, "kind": str(run_kind), "engine_version": engine_version},
        "resource_changes": resources,
        "output_changes": outputs,
        "summary": _summary(resources),
    }


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyResult:
    """The result of one policy of one policy-set version against one input.

    ``messages`` are the violations (failed) or the reason it errored, sorted and
    without duplicates; ``omitted`` counts messages left out beyond the evaluator's cap.
    """

    policy_set: str
    policy_set_digest: str
    policy: str
    enforcement: Enforcement
    outcome: str
    """``passed``, ``failed`` or ``errored`` (a ``PolicyOutcome``)."""
    messages: tuple[str, ...] = ()
    omitted: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "enforcement", Enforcement(self.enforcement))
        object.__setattr__(self, "outcome", PolicyOutcome(self.outcome))
        object.__setattr__(self, "messages", tuple(self.messages))

    @property
    def blocking(self) -> bool:
        """Whether this result alone stops the run (see ``overall``)."""
        return _verdict_of(self) is not PolicyVerdict.PASSED

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy_set": self.policy_set,
            "policy_set_digest": self.policy_set_digest,
            "policy": self.policy,
            "enforcement": str(self.enforcement),
            "outcome": str(self.outcome),
            "messages": list(self.messages),
            "omitted": self.omitted,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyResult:
        messages = data.get("messages", [])
        if not isinstance(messages, list) or not all(isinstance(m, str) for m in messages):
            raise ValueError("messages must be a list of strings")
        return cls(
            policy_set=str(data["policy_set"]),
            policy_set_digest=str(data["policy_set_digest"]),
            policy=str(data["policy"]),
            enforcement=Enforcement(data["enforcement"]),
            outcome=PolicyOutcome(data["outcome"]),
            messages=tuple(messages),
            omitted=int(data.get("omitted", 0)),
        )


def _verdict_of(result: PolicyResult) -> PolicyVerdict:
    if result.outcome == PolicyOutcome.PASSED or result.enforcement is Enforcement.ADVISORY:
        return PolicyVerdict.PASSED
    if result.enforcement is Enforcement.HARD_MANDATORY:
        return PolicyVerdict.HARD_FAILED
    # soft_mandatory: a finding may be overridden; an error is not a finding.
    if result.outcome == PolicyOutcome.ERRORED:
        return PolicyVerdict.HARD_FAILED
    return PolicyVerdict.SOFT_FAILED


def overall(results: Iterable[PolicyResult]) -> PolicyVerdict:
    """The combined verdict of a run's policy results.

    - ``hard_failed`` if a ``hard_mandatory`` policy failed or errored, or a
      ``soft_mandatory`` policy errored (fail closed: an error, including a timeout,
      is not a finding someone could knowingly override);
    - otherwise ``soft_failed`` if a ``soft_mandatory`` policy failed (it blocks
      unless overridden);
    - otherwise ``passed``. ``advisory`` policies never block: a failed or errored
      advisory policy is reported (see ``advisory_warnings``) and nothing more.

    No results (no policy sets attached) is ``passed``.
    """
    verdicts = {_verdict_of(result) for result in results}
    for verdict in (PolicyVerdict.HARD_FAILED, PolicyVerdict.SOFT_FAILED):
        if verdict in verdicts:
            return verdict
    return PolicyVerdict.PASSED


def advisory_warnings(results: Iterable[PolicyResult]) -> int:
    """How many advisory policies failed or errored (reported, never blocking)."""
    return sum(
        1
        for result in results
        if result.enforcement is Enforcement.ADVISORY and result.outcome != PolicyOutcome.PASSED
    )
