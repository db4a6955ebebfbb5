"""Alarms, notifications and the dashboard."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from typing import Any

from runplane.domain.run import INTERVENTION_STATUSES, RunStatus
from tests.infra.synth import Synthesized, ref


def _alarms(stack: Synthesized) -> list[dict[str, Any]]:
    return list(stack.of_type("AWS::CloudWatch::Alarm").values())


def _alarm_on(stack: Synthesized, namespace: str, metric: str) -> list[dict[str, Any]]:
    return [
        a
        for a in _alarms(stack)
        if (a.get("Namespace"), a.get("MetricName")) == (namespace, metric)
    ]


def test_failed_and_timed_out_executions_raise_alarms(stack: Synthesized) -> None:
    # Given both workflows: the runs' and the GitHub sources'
    machines = set(stack.of_type("AWS::StepFunctions::StateMachine"))
    assert len(machines) == 2
    for metric in ("ExecutionsFailed", "ExecutionsTimedOut"):
        alarms = _alarm_on(stack, "AWS/States", metric)
        # Then each raises an alarm on its first failed or timed-out execution
        assert {ref(a["Dimensions"][0]["Value"]) for a in alarms} == machines
        assert all(a["Threshold"] == 1 for a in alarms)


def test_every_function_alarms_on_errors_and_throttles(stack: Synthesized) -> None:
    for handler, function in stack.functions().items():
        for metric in ("Errors", "Throttles"):
            watched = [
                a
                for a in _alarm_on(stack, "AWS/Lambda", metric)
                if ref(a["Dimensions"][0]["Value"]) == function["LogicalId"]
            ]
            assert len(watched) == 1, (handler, metric)


def test_undelivered_run_failure_notifications_raise_an_alarm(stack: Synthesized) -> None:
    # (the other queues are the run-event queue and its dead-letter queue)
    (queue,) = [q for q in stack.of_type("AWS::SQS::Queue") if q.startswith("Observability")]
    alarms = _alarm_on(stack, "AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert [
        a for a in alarms if a["Dimensions"][0]["Value"] == {"Fn::GetAtt": [queue, "QueueName"]}
    ]
    # And the queue is the dead-letter queue of the rule that reports ended executions
    (rule,) = [
        props
        for props in stack.of_type("AWS::Events::Rule").values()
        if props.get("EventPattern", {}).get("source") == ["aws.states"]
    ]
    (target,) = rule["Targets"]
    assert ref(target["DeadLetterConfig"]["Arn"]) == queue
    assert rule["EventPattern"]["detail"]["status"] == ["FAILED", "TIMED_OUT", "ABORTED"]


def test_runs_entering_an_intervention_status_raise_an_alarm(stack: Synthesized) -> None:
    # Given the metric filters on the functions that move runs
    filters = list(stack.of_type("AWS::Logs::MetricFilter").values())
    assert filters
    (alarm,) = [a for a in _alarms(stack) if a.get("MetricName") == "RunsEnteredIntervention"]
    for metric_filter in filters:
        (transformation,) = metric_filter["MetricTransformations"]
        assert (transformation["MetricNamespace"], transformation["MetricName"]) == (
            alarm["Namespace"],
            alarm["MetricName"],
        )
        # Then each filter matches exactly the intervention statuses
        pattern = metric_filter["FilterPattern"]
        for status in RunStatus:
            assert (f'"{status.value}"' in pattern) == (status in INTERVENTION_STATUSES), status
    # And every function that moves runs (the APIs, the dashboard, the run workflow's
    # steps, the stopped-sandbox notice; not the source workflow's, which create runs but
    # never move them) is watched
    watched = {ref(f["LogGroupName"]) for f in filters}
    movers = {
        ref(f["LoggingConfig"]["LogGroup"])
        for h, f in stack.functions().items()
        if h.startswith(
            (
                "functions.tasks.handlers.",
                "functions.api.",
                "functions.cloud_api.",
                "functions.dashboard.",
                "functions.sandboxes.",
            )
        )
    }
    assert watched == movers


def test_alarms_notify_the_encrypted_topic(stack: Synthesized) -> None:
    topic, props = stack.one("AWS::SNS::Topic")
    key, _ = stack.data_key()
    assert props["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    for alarm in _alarms(stack):
        assert alarm["AlarmActions"] == [{"Ref": topic}]


def test_the_alarm_email_is_subscribed_when_given(
    custom_stack: Synthesized, stack: Synthesized
) -> None:
    _, subscription = custom_stack.one("AWS::SNS::Subscription")
    assert subscription == {
        **subscription,
        "Protocol": "email",
        "Endpoint": "platform-oncall@example.com",
    }
    assert not stack.of_type("AWS::SNS::Subscription")


def test_the_dashboard_shows_executions_functions_and_alarms(stack: Synthesized) -> None:
    _, dashboard = stack.one("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for needle in ("AWS/States", "ExecutionsFailed", "AWS/Lambda", "Throttles", "alarms"):
        assert needle in body, needle


def test_every_function_skips_pydantics_plugin_scan(stack: Synthesized) -> None:
    # Given no installed distribution offers a pydantic plugin (turning them off
    # changes nothing but the scan)
    assert not entry_points(group="pydantic")
    # When any function starts
    for handler in stack.functions():
        # Then its cold start's first model does not scan every distribution's entry
        # points for one
        assert stack.environment(handler)["PYDANTIC_DISABLE_PLUGINS"] == "__all__", handler
