"""The standby pool in the template: absent by default, and with ``runnerStandby`` a
schedule, a top-up function allowed exactly what it does, and the launch step's
settings and sealing key (docs/standby.md)."""

from __future__ import annotations

from typing import Any

from tests.infra.synth import Synthesized, as_list

TOP_UP = "functions.sandboxes.handler.top_up"
LAUNCH = "functions.tasks.handlers.start_runner"


def _rules_targeting(stack: Synthesized, logical_id: str) -> list[dict[str, Any]]:
    return [
        rule
        for rule in stack.of_type("AWS::Events::Rule").values()
        if any(logical_id in str(target["Arn"]) for target in rule.get("Targets", []))
    ]


def test_by_default_there_is_no_standby_pool(stack: Synthesized) -> None:
    # Given the default deployment
    # Then no top-up function exists, nor its schedule
    assert TOP_UP not in stack.functions()
    assert not [
        rule
        for rule in stack.of_type("AWS::Events::Rule").values()
        if "ScheduleExpression" in rule and "Standby" in str(rule.get("Description", ""))
    ]
    # And the launch step keeps no pool and holds no sealing grant
    assert "RUNPLANE_RUNNER_STANDBY" not in stack.environment(LAUNCH)
    assert "kms:GenerateDataKey" not in stack.actions(stack.role_of(LAUNCH))


def test_with_runner_standby_a_schedule_tops_up_the_pool(custom_stack: Synthesized) -> None:
    # Given a deployment with runnerStandby = 2
    top_up = custom_stack.function(TOP_UP)
    # Then a schedule invokes the top-up every five minutes
    (rule,) = _rules_targeting(custom_stack, top_up["LogicalId"])
    assert rule["ScheduleExpression"] == "rate(5 minutes)"
    # And the top-up and the launch step both know the pool's size and wait
    for handler in (TOP_UP, LAUNCH):
        environment = custom_stack.environment(handler)
        assert environment["RUNPLANE_RUNNER_STANDBY"] == "2"
        assert environment["RUNPLANE_RUNNER_STANDBY_SECONDS"] == "3600"
    # And the top-up starts, describes and stops sandbox tasks, reads and writes the
    # table, and nothing else (no key: it seals nothing)
    actions = custom_stack.actions(custom_stack.role_of(TOP_UP))
    assert {"ecs:RunTask", "ecs:StopTask", "ecs:DescribeTasks", "iam:PassRole"} <= actions
    assert not {a for a in actions if a.startswith(("kms:", "s3:", "states:", "sqs:"))}
    # And the launch step may generate a data key of the Runplane key to seal what it
    # assigns, on that key only
    sealing = [
        resource
        for action, resource, _ in custom_stack.grants(custom_stack.role_of(LAUNCH))
        if action == "kms:GenerateDataKey"
    ]
    (key_id, _) = custom_stack.data_key()
    assert sealing
    assert all(key_id in str(as_list(resource)) for resource in sealing)
