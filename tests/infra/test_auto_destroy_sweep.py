"""The auto-destroy sweep as the template declares it: one schedule in the Runplane
schedule group, every five minutes, delivering exactly the input the fire-schedule
function reads as a sweep, with the role that may only invoke that function."""

from __future__ import annotations

import json

from runplane.domain.auto_destroy import SWEEP, SWEEP_RATE
from tests.infra.synth import Synthesized, ref


def test_the_sweep_runs_every_five_minutes_against_the_fire_function(
    stack: Synthesized,
) -> None:
    # Given the template's schedules
    schedules = stack.of_type("AWS::Scheduler::Schedule")

    # Then exactly one is the sweep, in the Runplane group, with the sweep's input
    (sweep,) = schedules.values()
    (group,) = stack.of_type("AWS::Scheduler::ScheduleGroup").values()
    assert sweep["GroupName"] == group["Name"]
    assert (sweep["ScheduleExpression"], sweep["ScheduleExpressionTimezone"]) == (
        SWEEP_RATE,
        "UTC",
    )
    assert SWEEP_RATE == "rate(5 minutes)"
    target = sweep["Target"]
    assert json.loads(target["Input"]) == {"sweep": SWEEP}
    fire = stack.function("functions.scheduler.handler.fire")["LogicalId"]
    assert ref(target["Arn"]) == fire
    # And the role Scheduler assumes for it is the one that may invoke only that function
    role = ref(target["RoleArn"])
    assert role is not None
    assert stack.of_type("AWS::IAM::Role")[role]["AssumeRolePolicyDocument"]["Statement"][0][
        "Principal"
    ] == {"Service": "scheduler.amazonaws.com"}
