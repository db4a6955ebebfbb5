"""The embedded stack's real workload, each handler under its deployed role."""

from __future__ import annotations

from collections import Counter

from runplane.adapters.acting_function import acting_as
from tests.e2e.conftest import unique
from tests.e2e.test_managed_runs import HELLO
from tests.iam.conftest import HARNESS, Enforced

PASSING_POLICY = {
    "modules": [
        {
            "name": "checks.rego",
            "source": "package runplane.checks\n\nimport rego.v1\n\ndeny := []\n",
        }
    ],
    "policies": [
        {
            "name": "nothing_denied",
            "enforcement": "hard_mandatory",
            "query": "data.runplane.checks.deny",
        }
    ],
}


def watch(enforced: Enforced, run_id: str, **kwargs: object) -> dict[str, object]:
    """The run's state as ``client.watch`` gives it; a run that never gets there fails
    with what was refused on its way."""
    try:
        return dict(enforced.local.client.watch(run_id, timeout=120, **kwargs))  # type: ignore[arg-type]
    except TimeoutError as stuck:
        raise AssertionError(
            f"{stuck}; refused: {enforced.denials()}; unattributed: {enforced.unattributed}"
        ) from None


def principals(enforced: Enforced) -> Counter[str]:
    return Counter(d.principal for d in enforced.enforcement.decisions if d.allowed)


def test_a_plan_policy_approve_apply_run_needs_nothing_its_roles_do_not_allow(
    enforced: Enforced,
) -> None:
    client = enforced.local.client
    with acting_as(HARNESS):
        workspace = str(client.create_workspace(unique("iam"))["id"])
        client.publish_policy_set({"name": unique("checks"), **PASSING_POLICY})

    # Given a workspace with a policy set, when a run plans, passes policy, is approved
    run = client.create_run(workspace, HELLO)
    review = watch(enforced, run["id"], until=["awaiting_approval"])
    assert review["status"] == "awaiting_approval", (review, enforced.denials())
    client.decide(run["id"], "approve")
    applied = watch(enforced, run["id"])

    # Then it applies, and no call of any handler was refused or unattributed
    assert applied["status"] == "succeeded", applied
    assert enforced.denials() == []
    assert enforced.unattributed == []
    # And the calls were made under the roles of the functions that made them
    made = principals(enforced)
    for role in ("ApiRunApiRole", "ApiAuthorizerRole", "TasksQueueRunRole", "OrchestrationRole"):
        assert any(p.startswith(role) for p in made), (role, made)
