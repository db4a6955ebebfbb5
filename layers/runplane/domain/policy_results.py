"""Policy results and the verdict they combine into.

Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicyOutcome,
    PolicySetContent,
    PolicyVerdict,
)


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


# -- which rules had no value on a plan (``runplane policy test``) ----------------------------

PROBE_PACKAGE: Final = "runplane.probe"
PROBE_MODULE: Final = "runplane-probe.rego"
UNDEFINED: Final = "undefined"


@dataclass(frozen=True)
class RuleProbes:
    """A set that evaluates, for each rule of another set's modules, whether it has a
    value: its policy ``r_N`` fails with ``"undefined"`` when rule N has none."""

    content: PolicySetContent
    rules: Mapping[str, str]
    """Probe policy name to the rule it probes (``data.package.rule``)."""

    def undefined(self, results: Iterable[PolicyResult]) -> list[str]:
        """The probed rules the results say had no value, in the set's order."""
        found = {
            r.policy
            for r in results
            if r.policy_set == self.content.name
            and r.outcome == PolicyOutcome.FAILED
            and r.messages == (UNDEFINED,)
        }
        return [rule for name, rule in self.rules.items() if name in found]


def rule_probes(content: PolicySetContent) -> RuleProbes:
    """Probes for every rule (not function) of ``content``'s modules.

    A rule that is undefined on a plan is what a policy reading a path the plan lacks
    becomes; a queried rule that is undefined passes. Each probe is a generated rule,
    ``r_N := [] if { _ = data.pkg.rule } else := ["undefined"]``, in a module added to a
    copy of the set (nothing of the set itself changes)."""
    from runplane.domain.policy_packaging import DECISIONS_MODULE, package_of
    from runplane.domain.rego_v0 import function_heads, rule_heads

    queries: dict[str, None] = {}
    for module in content.modules:
        package = package_of(module.source)
        if package is None or module.name == DECISIONS_MODULE:
            continue
        functions = function_heads(module.source)
        for rule in rule_heads(module.source):
            if rule not in functions:
                queries.setdefault(f"data.{package}.{rule}", None)
    rules = {f"r_{i}": query for i, query in enumerate(queries)}
    lines = [f"package {PROBE_PACKAGE}", ""]
    lines += [
        f'{name} := [] if {{ _ = {query} }} else := ["{UNDEFINED}"]'
        for name, query in rules.items()
    ]
    probe = PolicySetContent(
        name=f"{content.name[:57]}-probes",
        modules=(*content.modules, PolicyModule(PROBE_MODULE, "\n".join(lines) + "\n")),
        policies=tuple(
            PolicyDefinition(name, Enforcement.ADVISORY, f"data.{PROBE_PACKAGE}.{name}")
            for name in rules
        ),
        input_shape=content.input_shape,
        unknown_input_roots=content.unknown_input_roots,
    )
    return RuleProbes(probe, {name: query.removeprefix("data.") for name, query in rules.items()})
