"""The two-person rule for destructive runs: a workspace may require a second approver
for destroy runs and for plans that destroy more than a number of resources.

The rule is the workspace's; how many approvals a run needs is decided once, when its
approval is created from its plan, and kept in the approval's body, so a later change
of the rule changes no run that already waits. A second approval must come from
another person than the first; a rejection by anyone ends the run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runplane.domain.errors import InvalidInput

MAX_DESTROYS_OVER: Final = 1_000_000


@dataclass(frozen=True)
class SecondApprovalRule:
    """``destroy_runs``: every destroy run needs two approvals. ``destroys_over``: so
    does any plan destroying (or replacing) more than that many resources; None: no
    count needs it."""

    destroy_runs: bool = False
    destroys_over: int | None = None
    # Separation of duties: the run's creator may not approve it (anyone may reject).
    separation_of_duties: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.destroy_runs, bool):
            raise InvalidInput("destroy_runs is true or false", "/second_approval/destroy_runs")
        if not isinstance(self.separation_of_duties, bool):
            raise InvalidInput(
                "separation_of_duties is true or false", "/second_approval/separation_of_duties"
            )
        over = self.destroys_over
        whole = isinstance(over, int) and not isinstance(over, bool)
        if over is not None and not (whole and 0 <= over <= MAX_DESTROYS_OVER):
            raise InvalidInput(
                f"destroys_over is a whole number from 0 to {MAX_DESTROYS_OVER}, or null",
                "/second_approval/destroys_over",
            )

    @property
    def off(self) -> bool:
        return self == SecondApprovalRule()

    def approvals_required(self, *, destroy: bool, destroys: int) -> int:
        """How many distinct people must approve a run that is (or is not) a destroy
        run and whose plan destroys ``destroys`` resources (replacements included)."""
        return 1 if self.why(destroy=destroy, destroys=destroys) is None else 2

    def why(self, *, destroy: bool, destroys: int) -> str | None:
        """The sentence a review shows for a second approval, or None if one is not
        needed."""
        if destroy and self.destroy_runs:
            return "the workspace requires a second approver for destroy runs"
        if self.destroys_over is not None and destroys > self.destroys_over:
            return (
                f"the plan destroys {destroys} resources; the workspace requires a second "
                f"approver for more than {self.destroys_over}"
            )
        return None

    def to_body(self) -> dict[str, Any]:
        return {
            "destroy_runs": self.destroy_runs,
            "destroys_over": self.destroys_over,
            "separation_of_duties": self.separation_of_duties,
        }

    def to_text(self) -> str | None:
        """As stored on the workspace (None: the rule is off)."""
        return None if self.off else json.dumps(self.to_body(), sort_keys=True)

    @classmethod
    def from_text(cls, text: str | None) -> SecondApprovalRule:
        if not text:
            return cls()
        body = json.loads(text)
        return cls.from_body(body if isinstance(body, Mapping) else {})

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> SecondApprovalRule:
        over = body.get("destroys_over")
        return cls(
            destroy_runs=body.get("destroy_runs") is True,
            destroys_over=over,
            separation_of_duties=body.get("separation_of_duties") is True,
        )
