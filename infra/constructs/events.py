"""Run events (docs/notifications.md): the outbox relay that puts every committed
status move's event on the SQS queue, the queue, its dead-letter queue, and the
worker Lambda that consumes it.

A move's event is an outbox item written in the move's transaction; the relay
Lambda reads the table's stream, filtered to inserted outbox items, and queues
each one's message. It reports the first record it could not queue (partial batch
response), bisects a failing batch, retries, and sends what still fails to its own
failure queue (the records' stream positions, not their content), which alarms.

Messages carry public IDs and statuses only (never a destination URL, a secret or a
token), so the queues use SQS-managed encryption at rest; TLS is enforced on every
request. Every message is sent with its organization as ``MessageGroupId``, which
makes the standard queue a fair queue (nothing to configure on the queue itself).
The worker reports failed records one by one (partial batch responses): a record
that keeps failing reaches the dead-letter queue after ``MAX_RECEIVES`` receives
without holding up the rest of its batch. Waits longer than SQS's
15-minute delay (an ``approval_expiring`` days ahead) are re-queued by the worker
until due, and retry backoffs are capped at 15 minutes.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs.functions import (
    KEY_UNWRAP,
    TABLE_READ,
    TABLE_WRITE,
    WORKFLOW_START,
    Access,
    Platform,
    RunplaneFunction,
)
from infra.constructs.nag import acknowledge
from runplane.store.models import OUTBOX_PREFIX
from runplane.store.outbox import INSERT

# One record is at most one webhook POST (15 s deadline) and a few table calls.
WORKER_TIMEOUT = Duration.seconds(120)
# Small batches, run side by side fairly across organizations (functions/events/
# handler.py: two deliveries per organization, one per destination at once), so one
# batch holds at most four slow deliveries and never makes another organization's
# record wait behind them; the worst batch (four to one destination, one at a time)
# is 4 x 15 s, well inside the timeout.
BATCH_SIZE = 4
# Concurrent worker invocations the queue's pollers may start: few enough that a flood
# of events leaves the account's concurrency to the API and workflows. One
# organization's slow endpoints hold at most two of them (its in-flight slots in the
# table, store/delivery_slots.py); its other deliveries are queued again, delayed.
MAX_CONCURRENCY = 50
# AWS's advice for a Lambda event source: visibility at least six times its timeout,
# so a record is never redelivered while an invocation still holds it.
VISIBILITY_TIMEOUT = Duration.seconds(6 * 120)
# A poison message (one that fails every time) is set aside after this many receives.
MAX_RECEIVES = 5
# The relay: one send per record; a failing batch is halved and retried this often.
RELAY_TIMEOUT = Duration.seconds(60)
RELAY_BATCH_SIZE = 100
RELAY_RETRIES = 10
# A stream keeps records for 24 hours: older ones cannot be read again anyway.
RELAY_MAX_RECORD_AGE = Duration.hours(24)


class EventQueue(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: RunplaneConfig) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            queue_name=f"{config.prefix}-run-events-dead-letters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            removal_policy=removal,
        )
        acknowledge(
            self.dead_letters,
            "AwsSolutions-SQS3",
            "This queue is the dead-letter queue of the run-event queue; it has none itself.",
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=f"{config.prefix}-run-events",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=VISIBILITY_TIMEOUT,
            retention_period=Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=MAX_RECEIVES, queue=self.dead_letters
            ),
            removal_policy=removal,
        )

    def alarm_on_dead_letters(self, topic: sns.ITopic) -> cloudwatch.Alarm:
        """A message in the dead-letter queue is an event nobody handled (a trigger not
        queued, notifications not sent): someone should look."""
        return _alarm_on_messages(
            self,
            "DeadLettersAlarm",
            self.dead_letters,
            "Runplane: a run event failed every receive (dead-letter queue)",
            topic,
        )


def _alarm_on_messages(
    scope: Construct, construct_id: str, queue: sqs.IQueue, description: str, topic: sns.ITopic
) -> cloudwatch.Alarm:
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_description=description,
        metric=queue.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(5), statistic="Maximum"
        ),
        threshold=1,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    alarm.add_alarm_action(actions.SnsAction(topic))
    return alarm


class EventRelay(Construct):
    """The outbox relay: the table's stream (inserted outbox items only) to the queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        platform: Platform,
        events: EventQueue,
        table: dynamodb.ITable,
    ) -> None:
        super().__init__(scope, construct_id)
        config = platform.config
        self.failures = sqs.Queue(
            self,
            "Failures",
            queue_name=f"{config.prefix}-run-events-relay-failures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        acknowledge(
            self.failures,
            "AwsSolutions-SQS3",
            "This queue is the relay's on-failure destination (a dead-letter queue itself).",
        )
        self.function = RunplaneFunction(
            self,
            "Relay",
            platform=platform,
            name="events-relay",
            handler="functions.events.relay.handler",
            description="Runplane outbox relay: each committed run event to the event queue",
            access=Access(send_events=True),
            timeout=RELAY_TIMEOUT,
        )
        self.function.function.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=RELAY_BATCH_SIZE,
                bisect_batch_on_error=True,
                retry_attempts=RELAY_RETRIES,
                max_record_age=RELAY_MAX_RECORD_AGE,
                report_batch_item_failures=True,
                on_failure=sources.SqsDlq(self.failures),
                filters=[
                    lambda_.FilterCriteria.filter(
                        {
                            "eventName": lambda_.FilterRule.is_equal(INSERT),
                            "dynamodb": {
                                "Keys": {"SK": {"S": lambda_.FilterRule.begins_with(OUTBOX_PREFIX)}}
                            },
                        }
                    )
                ],
            )
        )
        acknowledge(
            self.function.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Reading a DynamoDB stream needs dynamodb:ListStreams, which has no resource "
            "type; the stream's other actions name the table's stream.",
        )

    def alarm_on_failures(self, topic: sns.ITopic) -> cloudwatch.Alarm:
        """A record in the failure queue is a run event the relay gave up on: its outbox
        item is still in the table (seven days), to be relayed again by hand."""
        return _alarm_on_messages(
            self,
            "FailuresAlarm",
            self.failures,
            "Runplane: the outbox relay gave up on stream records (relay failure queue)",
            topic,
        )


class EventWorker(Construct):
    """The consumer: run triggers (creating and starting runs), notification
    deliveries (unsealing each destination's URL and secret with the data key) and
    commit-status reports (starting the source workflow)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, platform: Platform, events: EventQueue
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = RunplaneFunction(
            self,
            "Worker",
            platform=platform,
            name="events",
            handler="functions.events.handler.handler",
            description="Runplane run events: run triggers and notification deliveries",
            access=Access(
                table=TABLE_READ + TABLE_WRITE,
                key=KEY_UNWRAP,
                workflow=WORKFLOW_START,
                # Commit statuses: a pull request's run that ended starts its report.
                source_workflow=True,
                send_events=True,
                settings=(
                    "definition_version",
                    "build_sha",
                    "runner_release",
                    "policy_runtime",
                    "engine_versions",
                    "control_plane_url",
                ),
            ),
            timeout=WORKER_TIMEOUT,
        )
        self.function.function.add_event_source(
            sources.SqsEventSource(
                events.queue,
                batch_size=BATCH_SIZE,
                max_concurrency=MAX_CONCURRENCY,
                report_batch_item_failures=True,
            )
        )
