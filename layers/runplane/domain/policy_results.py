"""Policy results and the verdict they combine into.

Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.domain.policy import Enforcement, PolicyOutcome, PolicyVerdict


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
