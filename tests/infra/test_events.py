"""The run-event queue, its dead-letter queue and the worker, as the template declares them."""

from __future__ import annotations

from typing import Any

from runplane.adapters.event_queue import MAX_DELAY_SECONDS
from runplane.domain import notifications as rules
from runplane.domain import run_triggers as trigger_rules
from tests.infra.synth import Synthesized, ref

WORKER = "functions.events.handler.handler"


def _queues(stack: Synthesized) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    queues = stack.of_type("AWS::SQS::Queue")
    ((main, queue),) = [
        (k, p) for k, p in queues.items() if str(p.get("QueueName", "")).endswith("-run-events")
    ]
    dlq = ref(queue["RedrivePolicy"]["deadLetterTargetArn"])
    assert dlq is not None
    return (main, queue), (dlq, queues[dlq])


def test_the_queue_sets_poison_messages_aside_in_an_encrypted_dead_letter_queue(
    stack: Synthesized,
) -> None:
    # Given the run-event queue and its dead-letter queue
    (_, queue), (_, dead) = _queues(stack)
    # Then a message is set aside after five failed receives
    redrive = queue["RedrivePolicy"]
    assert str(dead["QueueName"]).endswith("-run-events-dead-letters")
    assert redrive["maxReceiveCount"] == 5
    # And both are encrypted at rest and keep messages long enough to look at them
    for props in (queue, dead):
        assert props["SqsManagedSseEnabled"] is True
    assert dead["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_a_dead_lettered_event_raises_an_alarm_on_the_alarm_topic(stack: Synthesized) -> None:
    _, (dlq, _) = _queues(stack)
    topic, _ = stack.one("AWS::SNS::Topic")
    (alarm,) = [
        a
        for a in stack.of_type("AWS::CloudWatch::Alarm").values()
        if a.get("Namespace") == "AWS/SQS"
        and a["Dimensions"][0]["Value"] == {"Fn::GetAtt": [dlq, "QueueName"]}
    ]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Threshold"] == 1
    assert [ref(action) for action in alarm["AlarmActions"]] == [topic]


def test_both_queues_refuse_requests_without_tls(stack: Synthesized) -> None:
    (main, _), (dlq, _) = _queues(stack)
    guarded: set[str | None] = set()
    for policy in stack.of_type("AWS::SQS::QueuePolicy").values():
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                guarded.update(ref(q) for q in policy["Queues"])
    assert {main, dlq} <= guarded


def test_the_worker_consumes_the_queue_with_partial_batch_responses(stack: Synthesized) -> None:
    # Given the worker function and its event source mapping
    (main, queue), _ = _queues(stack)
    worker = stack.function(WORKER)
    ((_, mapping),) = stack.of_type("AWS::Lambda::EventSourceMapping").items()
    # Then it reads the run-event queue and reports failed records one by one
    assert ref(mapping["EventSourceArn"]) == main
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # And a record is never redelivered while an invocation may still hold it
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    # And a claimed attempt's lease is short of the visibility timeout, so a record
    # redelivered after a stopped worker always finds the lease run out
    assert queue["VisibilityTimeout"] > rules.CLAIM_LEASE_SECONDS


def test_every_function_that_writes_the_table_can_publish_run_events(stack: Synthesized) -> None:
    (main, _), _ = _queues(stack)
    for handler in stack.functions():
        actions = stack.actions(stack.role_of(handler))
        environment = stack.environment(handler)
        if "dynamodb:PutItem" in actions:
            # Then it may send to the run-event queue, which its settings name
            assert "sqs:SendMessage" in actions, handler
            assert ref(environment["RUNPLANE_EVENT_QUEUE_URL"]) == main, handler
        else:
            assert "RUNPLANE_EVENT_QUEUE_URL" not in environment, handler


def test_delays_stay_within_what_sqs_allows() -> None:
    # Given SQS's limit on a message's delay / Then every backoff the code asks for fits,
    # and longer waits (approval_expiring) hop through the worker instead
    assert MAX_DELAY_SECONDS == 900
    assert max(rules.retry_delay(n, 900) for n in range(1, rules.MAX_ATTEMPTS + 1)) <= 900
    assert (
        max(
            trigger_rules.launch_retry_delay(n, 900)
            for n in range(1, trigger_rules.MAX_LAUNCH_TRIES)
        )
        <= 900
    )
