"""The run-event queue, its dead-letter queue and the worker, as the template declares them."""

from __future__ import annotations

import json
from typing import Any

from functions.events.handler import BATCH_WORKERS
from infra.constructs.events import BATCH_SIZE
from runplane.adapters.event_queue import MAX_DELAY_SECONDS, PER_ORGANIZATION
from runplane.domain import notifications as rules
from runplane.domain import run_triggers as trigger_rules
from tests.infra.synth import Synthesized, ref

WORKER = "functions.events.handler.handler"
RELAY = "functions.events.relay.handler"


def _mappings_of(stack: Synthesized, handler: str) -> list[dict[str, Any]]:
    function = stack.function(handler)["LogicalId"]
    return [
        props
        for props in stack.of_type("AWS::Lambda::EventSourceMapping").values()
        if ref(props["FunctionName"]) == function
    ]


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
    (mapping,) = _mappings_of(stack, WORKER)
    # Then it reads the run-event queue and reports failed records one by one
    assert ref(mapping["EventSourceArn"]) == main
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # And a record is never redelivered while an invocation may still hold it
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    # And a claimed attempt's lease is short of the visibility timeout, so a record
    # redelivered after a stopped worker always finds the lease run out
    assert queue["VisibilityTimeout"] > rules.CLAIM_LEASE_SECONDS


def test_a_worker_batch_is_small_and_its_invocations_bounded(stack: Synthesized) -> None:
    # Given the worker's event source mapping
    worker = stack.function(WORKER)
    (mapping,) = _mappings_of(stack, WORKER)
    # Then a batch holds at most four records, all run at once (fairly per organization)
    assert mapping["BatchSize"] == BATCH_SIZE == BATCH_WORKERS == 4
    # And even four slow deliveries to one destination, one after another, fit the timeout
    assert worker["Timeout"] > BATCH_SIZE * rules.DELIVERY_DEADLINE_SECONDS
    # And one organization holds at most two deliveries of a batch, so other records
    # of the batch always have a thread
    assert PER_ORGANIZATION < BATCH_SIZE
    # And the pollers start at most fifty invocations at once
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 50}


def test_the_worker_bounds_deliveries_across_invocations_with_what_it_already_holds(
    stack: Synthesized,
) -> None:
    # Given the worker's role, the table and the run-event queue
    (main, _), _ = _queues(stack)
    table, _ = stack.one("AWS::DynamoDB::Table")
    grants = {
        (action, ref(resource)) for action, resource, _ in stack.grants(stack.role_of(WORKER))
    }
    # Then it takes in-flight slots (conditional puts) and gives them back (conditional
    # deletes) in the table, as it writes deliveries already
    assert {("dynamodb:PutItem", table), ("dynamodb:DeleteItem", table)} <= grants
    # And a delivery refused a slot is sent again, delayed, to the run-event queue: no
    # SQS action beyond what consuming the queue (the event source mapping) and
    # sending follow-ups already need, and none on any other queue
    assert {(action, resource) for action, resource in grants if action.startswith("sqs:")} == {
        (f"sqs:{action}", main)
        for action in (
            "ChangeMessageVisibility",
            "DeleteMessage",
            "GetQueueAttributes",
            "GetQueueUrl",
            "ReceiveMessage",
            "SendMessage",
        )
    }


def test_only_the_relay_and_the_worker_send_run_events(stack: Synthesized) -> None:
    # Given every function: a move's event is an outbox item of its transaction
    (main, _), _ = _queues(stack)
    for handler in stack.functions():
        sends = ("sqs:SendMessage", main) in {
            (a, ref(r)) for a, r, _ in stack.grants(stack.role_of(handler))
        }
        environment = stack.environment(handler)
        if handler in {RELAY, WORKER}:
            # Then the relay and the worker (its follow-ups) send to the queue they are told of
            assert sends, handler
            assert ref(environment["RUNPLANE_EVENT_QUEUE_URL"]) == main, handler
        else:
            # And no other function may send to it, nor is told of it
            assert not sends, handler
            assert "RUNPLANE_EVENT_QUEUE_URL" not in environment, handler


def test_delays_stay_within_what_sqs_allows() -> None:
    # Given SQS's limit on a message's delay / Then every backoff the code asks for fits,
    # and longer waits (approval_expiring) hop through the worker instead
    assert MAX_DELAY_SECONDS == 900
    assert max(rules.retry_delay(n, 900) for n in range(1, rules.MAX_ATTEMPTS + 1)) <= 900
    assert max(rules.deferral_delay(n, 1.0) for n in range(64)) <= 900
    assert (
        max(
            trigger_rules.launch_retry_delay(n, 900)
            for n in range(1, trigger_rules.MAX_LAUNCH_TRIES)
        )
        <= 900
    )


# -- the outbox relay ---------------------------------------------------------------------


def test_the_table_streams_new_images_for_the_outbox_relay(stack: Synthesized) -> None:
    _, table = stack.one("AWS::DynamoDB::Table")
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


def test_the_relay_reads_only_inserted_outbox_items_and_sets_failures_aside(
    stack: Synthesized,
) -> None:
    # Given the relay function's event source mapping
    table, _ = stack.one("AWS::DynamoDB::Table")
    (mapping,) = _mappings_of(stack, RELAY)
    # Then it reads the table's stream from its oldest record
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table, "StreamArn"]}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    # And only an outbox item's INSERT reaches it
    [pattern] = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert pattern == {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"SK": {"S": [{"prefix": "EVENT#"}]}}},
    }
    # And a failing batch is halved and retried, the failed record named, and what
    # still fails is sent to the relay's own encrypted failure queue
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["MaximumRetryAttempts"] >= 3
    failures = ref(mapping["DestinationConfig"]["OnFailure"]["Destination"])
    queue = stack.of_type("AWS::SQS::Queue")[str(failures)]
    assert str(queue["QueueName"]).endswith("-run-events-relay-failures")
    assert queue["SqsManagedSseEnabled"] is True


def test_the_relay_may_read_the_stream_and_send_to_the_queues_only(stack: Synthesized) -> None:
    # Given the relay's role
    table, _ = stack.one("AWS::DynamoDB::Table")
    (main, _), _ = _queues(stack)
    grants = list(stack.grants(stack.role_of(RELAY)))
    # Then it reads exactly the table's stream, and writes no item of the table
    stream_reads = {a for a, r, _ in grants if a.startswith("dynamodb:") and r != "*"}
    assert stream_reads == {
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
    }
    for action, resource, _ in grants:
        if action in stream_reads:
            assert resource == {"Fn::GetAtt": [table, "StreamArn"]}
    # And it sends run events to the run-event queue
    assert ("sqs:SendMessage", main) in {(a, ref(r)) for a, r, _ in grants}


def test_a_record_the_relay_gave_up_on_raises_an_alarm(stack: Synthesized) -> None:
    (mapping,) = _mappings_of(stack, RELAY)
    failures = ref(mapping["DestinationConfig"]["OnFailure"]["Destination"])
    topic, _ = stack.one("AWS::SNS::Topic")
    (alarm,) = [
        a
        for a in stack.of_type("AWS::CloudWatch::Alarm").values()
        if a.get("Namespace") == "AWS/SQS"
        and a["Dimensions"][0]["Value"] == {"Fn::GetAtt": [failures, "QueueName"]}
    ]
    assert alarm["Threshold"] == 1
    assert [ref(action) for action in alarm["AlarmActions"]] == [topic]
