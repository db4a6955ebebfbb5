"""What a scenario of the tier observed: the runs it waited for, and who made which
calls (every decision the enforcement took since the scenario began)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from runplane.adapters.acting_function import acting_as
from tests.iam.conftest import HARNESS, Enforced

T = TypeVar("T")


def watch(enforced: Enforced, run_id: str, **kwargs: object) -> dict[str, object]:
    """The run's state as ``client.watch`` gives it; a run that never gets there fails
    with what was refused on its way."""
    try:
        return dict(enforced.local.client.watch(run_id, timeout=120, **kwargs))  # type: ignore[arg-type]
    except TimeoutError as stuck:
        raise AssertionError(f"{stuck}; {refusals(enforced)}") from None


def refusals(enforced: Enforced) -> str:
    return f"refused: {enforced.denials()}; unattributed: {enforced.unattributed}"


def as_harness(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call`` made by the test itself (a fake's setup, a read of the table), signed
    as the harness: no function of the deployment makes it."""
    with acting_as(HARNESS):
        return call(*args, **kwargs)


class Scenario:
    """The calls made from now on: who made them, and whether any was refused."""

    def __init__(self, enforced: Enforced) -> None:
        self.enforced = enforced
        self._first = len(enforced.enforcement.decisions)

    def principals(self) -> Counter[str]:
        made = self.enforced.enforcement.decisions[self._first :]
        return Counter(d.principal for d in made if d.allowed)

    def signed(self, *handlers: str) -> dict[str, bool]:
        """For each deployed handler, whether calls were made under its role."""
        made = self.principals()
        roles = self.enforced.function_roles
        return {handler: made[roles[handler]] > 0 for handler in handlers}

    def actions(self, handler: str) -> set[str]:
        """The actions allowed to ``handler``'s role in this scenario."""
        role = self.enforced.function_roles[handler]
        made = self.enforced.enforcement.decisions[self._first :]
        return {d.action for d in made if d.allowed and d.principal == role}

    def assert_clean(self) -> None:
        """No call of any handler was refused or unattributed, in this scenario or any
        before it in the module (a denial in a background path counts too)."""
        assert self.enforced.denials() == [], refusals(self.enforced)
        assert self.enforced.unattributed == [], refusals(self.enforced)
