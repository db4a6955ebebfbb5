"""Run events (docs/notifications.md): the SQS queue every committed status move is
published to, its dead-letter queue, and the worker Lambda that consumes it.

Messages carry public IDs and statuses only (never a destination URL, a secret or a
token), so the queues use SQS-managed encryption at rest; TLS is enforced on every
request. The worker reports failed records one by one (partial batch responses): a
record that keeps failing reaches the dead-letter queue after ``MAX_RECEIVES``
receives without holding up the rest of its batch. Waits longer than SQS's
15-minute delay (an ``approval_expiring`` days ahead) are re-queued by the worker
until due, and retry backoffs are capped at 15 minutes.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
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

# One record is at most one webhook POST (10 s) and a few table calls.
WORKER_TIMEOUT = Duration.seconds(120)
BATCH_SIZE = 5
# AWS's advice for a Lambda event source: visibility at least six times its timeout,
# so a record is never redelivered while an invocation still holds it.
VISIBILITY_TIMEOUT = Duration.seconds(6 * 120)
# A poison message (one that fails every time) is set aside after this many receives.
MAX_RECEIVES = 5


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
        alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            alarm_description="Runplane: a run event failed every receive (dead-letter queue)",
            metric=self.dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(actions.SnsAction(topic))
        return alarm


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
                report_batch_item_failures=True,
            )
        )
