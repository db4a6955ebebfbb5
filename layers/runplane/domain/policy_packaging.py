"""Policy-set directories packaged for other tools, read as Runplane policy sets.

Pure: standard library only. ``load_policy_set_dir`` reads ``policy-set.json`` itself
and comes here for a directory without one:

- ``policies.hcl`` (HCP Terraform's OPA policy sets): each ``policy "name"`` block has
  a ``query`` and an ``enforcement_level``; the set reads HCP's input (``plan`` shape);
- ``scalr-policy.hcl`` (``version = "v1"``): each enabled ``policy "name"`` block is the
  ``deny`` rule of the module ``name.rego``; the set reads Scalr's input (``tfplan``);
- neither (the conventions of conftest and Spacelift): every package's ``deny``,
  ``violation``, ``warn``, ``deny_*``, ``violation_*`` and ``warn_*`` rules are policies
  (``warn*`` advisory, the others hard mandatory), and ``allow`` and ``authz`` rules
  are boolean decisions (hard mandatory); the set reads Spacelift's input
  (``terraform``) when its modules read ``input.spacelift`` or ``input.terraform``,
  else the plan JSON itself (``bare``), as conftest and ``opa eval`` give it (see
  ``policy_input.inferred_shape``).

The shape is part of the set's content: a directory that wants another one says so
in a ``policy-set.json``.

A boolean decision fails unless it is ``true`` (``false`` or undefined is a violation).
It is evaluated through a generated module, ``runplane-decisions.rego`` (published with
the set, so what runs is in the set), whose rules turn each decision into a list of
violation messages. Modules are read from subdirectories too; ``*_test.rego`` and
``*.test.rego`` files are unit tests (``runplane policy test --unit``) and never
published.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from runplane.domain import hcl
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import (
    NAME_PATTERN,
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicySetContent,
    check_policy_set,
)
from runplane.domain.policy_files import read_modules
from runplane.domain.policy_input import inferred_shape
from runplane.domain.rego_v0 import rule_heads

HCP_CONFIG: Final = "policies.hcl"
SCALR_CONFIG: Final = "scalr-policy.hcl"
HCP_SHAPE: Final = "plan"
"""What HCP Terraform's OPA policies read: ``input.plan`` (the plan JSON), ``input.run``."""
SCALR_SHAPE: Final = "tfplan"
"""What Scalr's OPA policies read: ``input.tfplan`` (the plan JSON), ``input.tfrun``."""
DECISIONS_MODULE: Final = "runplane-decisions.rego"
DECISIONS_PACKAGE: Final = "runplane.decisions"

BOOLEAN_RULES: Final = frozenset({"allow", "authz"})
_VIOLATION_RULE: Final = re.compile(r"(deny|violation|warn)(_[A-Za-z0-9_]+)?")

LEVELS: Final = {
    "advisory": Enforcement.ADVISORY,
    "soft-mandatory": Enforcement.SOFT_MANDATORY,
    "soft_mandatory": Enforcement.SOFT_MANDATORY,
    "hard-mandatory": Enforcement.HARD_MANDATORY,
    "hard_mandatory": Enforcement.HARD_MANDATORY,
    "mandatory": Enforcement.HARD_MANDATORY,
}
"""Enforcement levels as HCP Terraform, Scalr and Runplane spell them."""

_PACKAGE: Final = re.compile(r"(?m)^[ \t]*package[ \t]+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_]\w*)*)")


def package_of(source: str) -> str | None:
    match = _PACKAGE.search(_strip_comments(source))
    return match.group(1) if match else None


def _strip_comments(source: str) -> str:
    return re.sub(r"#[^\n]*", "", source)


def load_packaged_dir(root: Path) -> PolicySetContent:
    """A policy set from a directory without ``policy-set.json`` (see the module doc)."""
    name = _set_name(root)
    modules = read_modules(root)
    if (root / HCP_CONFIG).is_file():
        policies = _hcp(_config(root / HCP_CONFIG), modules)
        shape = HCP_SHAPE
    elif (root / SCALR_CONFIG).is_file():
        policies = _scalr(_config(root / SCALR_CONFIG), modules)
        shape = SCALR_SHAPE
    else:
        policies = _conventions(modules)
        shape = inferred_shape(module.source for module in modules)
        if not policies:
            raise InvalidPolicySet(
                f"{root.name or root}: no policy-set.json, {HCP_CONFIG} or {SCALR_CONFIG} "
                "was found, and no module defines a deny, violation or warn rule "
                "(or deny_*, violation_*, warn_*), nor an allow or authz decision"
            )
    decisions = [p for p in policies if isinstance(p, _Decision)]
    definitions = [p.definition if isinstance(p, _Decision) else p for p in policies]
    if decisions:
        modules.append(_decisions_module(decisions))
    content = PolicySetContent(name, tuple(modules), tuple(definitions), input_shape=shape)
    check_policy_set(content)
    return content


def _set_name(root: Path) -> str:
    raw = (root.name or root.resolve().name).strip()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-._")[:64]
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidPolicySet(
            f"the directory name {raw!r} cannot name a policy set: rename it, or add a "
            "policy-set.json with a name"
        )
    return name


def _config(path: Path) -> hcl.Block:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidPolicySet(f"{path.name} is not UTF-8 text") from None
    return hcl.parse(text, path.name)


class _Decision:
    """A boolean decision, evaluated through the generated decisions module."""

    def __init__(self, name: str, enforcement: Enforcement, query: str, description: str):
        self.query = query
        self.rule = re.sub(r"[^A-Za-z0-9_]", "_", query.removeprefix("data."))
        self.definition = PolicyDefinition(
            name, enforcement, f"data.{DECISIONS_PACKAGE}.{self.rule}", description
        )


def _decisions_module(decisions: Iterable[_Decision]) -> PolicyModule:
    lines = [
        f"package {DECISIONS_PACKAGE}",
        "",
        "# Generated by runplane: each boolean decision of this set as a list of",
        "# violations. A decision that is not true (false or undefined) fails.",
        "",
    ]
    for decision in sorted(decisions, key=lambda d: d.rule):
        message = f"{decision.query.removeprefix('data.')} is not true"
        lines.append(
            f'{decision.rule} := [] if {{ {decision.query} == true }} else := ["{message}"]'
        )
    return PolicyModule(DECISIONS_MODULE, "\n".join(lines) + "\n")


_Policy = PolicyDefinition | _Decision


def _level(attribute: hcl.Attribute | None, filename: str, policy: str) -> Enforcement:
    if attribute is None:
        return Enforcement.ADVISORY
    value = attribute.value
    if isinstance(value, str) and value in LEVELS:
        return LEVELS[value]
    raise InvalidPolicySet(
        f"{filename} line {attribute.line}: policy {policy}: the enforcement_level "
        f"{value!r} is not one of advisory, soft-mandatory, hard-mandatory, mandatory"
    )


def _string(block: hcl.Block, name: str, filename: str) -> str | None:
    attribute = block.attribute(name)
    if attribute is None:
        return None
    if not isinstance(attribute.value, str):
        raise InvalidPolicySet(f"{filename} line {attribute.line}: {name} must be a string")
    return attribute.value


def _policy_blocks(
    config: hcl.Block, filename: str, allowed: set[str], top: set[str]
) -> list[tuple[str, hcl.Block]]:
    for attribute in config.attributes:
        if attribute.name not in top:
            raise InvalidPolicySet(
                f"{filename} line {attribute.line}: unknown setting {attribute.name}"
            )
    found = []
    for block in config.blocks:
        if block.type != "policy" or len(block.labels) != 1:
            raise InvalidPolicySet(
                f'{filename} line {block.line}: expected policy "NAME" {{ ... }}, '
                f"found a {block.type} block"
            )
        for attribute in block.attributes:
            if attribute.name not in allowed:
                raise InvalidPolicySet(
                    f"{filename} line {attribute.line}: policy {block.labels[0]}: unknown "
                    f"setting {attribute.name} (expected {', '.join(sorted(allowed))})"
                )
        if block.blocks:
            raise InvalidPolicySet(
                f"{filename} line {block.blocks[0].line}: policy {block.labels[0]}: "
                "nested blocks are not supported"
            )
        found.append((block.labels[0], block))
    if not found:
        raise InvalidPolicySet(f"{filename} declares no policy blocks")
    return found


def _hcp(config: hcl.Block, modules: list[PolicyModule]) -> list[_Policy]:
    policies: list[_Policy] = []
    for name, block in _policy_blocks(
        config, HCP_CONFIG, {"query", "enforcement_level", "description", "source"}, set()
    ):
        query = _string(block, "query", HCP_CONFIG)
        if query is None:
            what = "a Sentinel policy" if block.attribute("source") else "a policy"
            raise InvalidPolicySet(
                f"{HCP_CONFIG} line {block.line}: policy {name} has no query: {what} "
                'needs query = "data.<package>.<rule>" (Runplane evaluates Rego only)'
            )
        level = _level(block.attribute("enforcement_level"), HCP_CONFIG, name)
        description = _string(block, "description", HCP_CONFIG) or ""
        policies.append(_policy(name, level, query, description))
    return policies


def _scalr(config: hcl.Block, modules: list[PolicyModule]) -> list[_Policy]:
    version = config.attribute("version")
    if version is not None and version.value != "v1":
        raise InvalidPolicySet(
            f"{SCALR_CONFIG} line {version.line}: version {version.value!r} is not supported "
            '(expected "v1")'
        )
    by_file: dict[str, list[PolicyModule]] = {}
    for module in modules:
        by_file.setdefault(module.name.rsplit("/", 1)[-1], []).append(module)
    policies: list[_Policy] = []
    queries: dict[str, str] = {}
    for name, block in _policy_blocks(
        config, SCALR_CONFIG, {"enabled", "enforcement_level", "description"}, {"version"}
    ):
        enabled = block.attribute("enabled")
        if enabled is not None and not isinstance(enabled.value, bool):
            raise InvalidPolicySet(
                f"{SCALR_CONFIG} line {enabled.line}: enabled must be true or false"
            )
        level = _level(block.attribute("enforcement_level"), SCALR_CONFIG, name)
        if enabled is not None and enabled.value is False:
            continue
        candidates = by_file.get(f"{name}.rego", [])
        if len(candidates) != 1:
            problem = "no module" if not candidates else "more than one module"
            raise InvalidPolicySet(
                f"{SCALR_CONFIG} line {block.line}: policy {name}: {problem} is named {name}.rego"
            )
        package = package_of(candidates[0].source)
        if package is None:
            raise InvalidPolicySet(f"module {candidates[0].name} declares no package")
        query = f"data.{package}.deny"
        if query in queries:
            raise InvalidPolicySet(
                f"{SCALR_CONFIG} line {block.line}: policies {queries[query]} and {name} "
                f"both read {query}, so each would report the other's violations: give "
                f"each module its own package (for example package {package}.{name})"
            )
        queries[query] = name
        description = _string(block, "description", SCALR_CONFIG) or ""
        policies.append(PolicyDefinition(name, level, query, description))
    if not policies:
        raise InvalidPolicySet(f"{SCALR_CONFIG} enables no policy")
    return policies


def _policy(name: str, level: Enforcement, query: str, description: str) -> _Policy:
    if query.rsplit(".", 1)[-1] in BOOLEAN_RULES:
        return _Decision(name, level, query, description)
    return PolicyDefinition(name, level, query, description)


def _conventions(modules: list[PolicyModule]) -> list[_Policy]:
    found: dict[str, _Policy] = {}
    for module in modules:
        package = package_of(module.source)
        if package is None:
            continue
        for rule in rule_heads(module.source):
            query = f"data.{package}.{rule}"
            name = f"{package}.{rule}"
            if name in found:
                continue
            if rule in BOOLEAN_RULES:
                found[name] = _Decision(name, Enforcement.HARD_MANDATORY, query, "")
            elif _VIOLATION_RULE.fullmatch(rule):
                level = (
                    Enforcement.ADVISORY if rule.startswith("warn") else Enforcement.HARD_MANDATORY
                )
                found[name] = PolicyDefinition(name, level, query, "")
    return [found[name] for name in sorted(found)]
