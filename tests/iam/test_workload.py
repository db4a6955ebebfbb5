"""The embedded stack's real workload, each handler under its deployed role."""

from __future__ import annotations

from runplane.adapters.acting_function import acting_as
from tests.e2e.conftest import unique
from tests.e2e.test_managed_runs import HELLO
from tests.iam.conftest import HARNESS, Enforced
from tests.iam.observed import Scenario, watch

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


def test_a_plan_policy_approve_apply_run_needs_nothing_its_roles_do_not_allow(
    enforced: Enforced,
) -> None:
    client = enforced.local.client
    scenario = Scenario(enforced)
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
    scenario.assert_clean()
    # And the calls were made under the roles of the functions that made them
    made = scenario.principals()
    for role in ("ApiRunApiRole", "ApiAuthorizerRole", "TasksQueueRunRole", "OrchestrationRole"):
        assert any(p.startswith(role) for p in made), (role, made)
