"""Alarms, run-failure notifications and the operations dashboard.

Alarms publish to one encrypted SNS topic. Failed, timed-out and aborted
executions are also sent to that topic one by one (the execution name is the run
ID) by an EventBridge rule whose undeliverable events land in a dead-letter queue.

Runs in an intervention status (``INTERVENTION_STATUSES``) keep the workspace's
writer authority until an operator recovers them, so every such run is a page:
the functions that move runs log each status change as JSON with a ``to_status``
field, and a metric filter counts the changes into an intervention status.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as event_targets
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs.functions import POWERTOOLS_NAMESPACE, RunplaneFunction
from infra.constructs.nag import acknowledge
from infra.constructs.storage import Storage
from runplane.domain.run import INTERVENTION_STATUSES

INTERVENTION_METRIC = "RunsEnteredIntervention"
STATUS_FIELD = "to_status"
PERIOD = Duration.minutes(5)


def intervention_filter() -> logs.IFilterPattern:
    return logs.FilterPattern.any(
        *(
            logs.FilterPattern.string_value(f"$.{STATUS_FIELD}", "=", status.value)
            for status in sorted(INTERVENTION_STATUSES)
        )
    )


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RunplaneConfig,
        storage: Storage,
        state_machine: sfn.StateMachine,
        source_state_machine: sfn.StateMachine,
        functions: Sequence[RunplaneFunction],
        run_movers: Sequence[RunplaneFunction],
        api_name: str,
        api_stage: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        self._add_topic(config, storage)
        self._add_failure_notices(storage, state_machine)
        intervention = self._add_intervention_metric(run_movers)
        self._add_alarms(
            state_machine, source_state_machine, functions, intervention, api_name, api_stage
        )
        self._add_dashboard(config, state_machine, functions, intervention, api_name, api_stage)

    def _add_topic(self, config: RunplaneConfig, storage: Storage) -> None:
        self.topic = sns.Topic(
            self,
            "Alarms",
            display_name="Runplane alarms",
            master_key=storage.key,
            enforce_ssl=True,
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self._alarm_action = actions.SnsAction(self.topic)

    def _add_failure_notices(self, storage: Storage, state_machine: sfn.StateMachine) -> None:
        """Run executions that fail, time out or are aborted notify the alarm topic."""
        self.dead_letters = sqs.Queue(
            self,
            "UndeliveredRunEvents",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=storage.key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letters,
            "AwsSolutions-SQS3",
            "This queue is the dead-letter queue of the run-failure notification rule.",
        )
        events.Rule(
            self,
            "RunExecutionEnded",
            description="Runplane: a run's execution failed, timed out or was aborted",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "status": ["FAILED", "TIMED_OUT", "ABORTED"],
                    "stateMachineArn": [state_machine.state_machine_arn],
                },
            ),
            targets=[
                event_targets.SnsTopic(
                    self.topic,
                    dead_letter_queue=self.dead_letters,
                    retry_attempts=8,
                    message=events.RuleTargetInput.from_text(
                        f"Run {events.EventField.from_path('$.detail.name')} execution "
                        f"{events.EventField.from_path('$.detail.status')}"
                    ),
                )
            ],
        )

    def _add_intervention_metric(self, run_movers: Sequence[RunplaneFunction]) -> cloudwatch.Metric:
        """Runs entering an intervention status, counted from the movers' logs."""
        intervention = cloudwatch.Metric(
            namespace=POWERTOOLS_NAMESPACE,
            metric_name=INTERVENTION_METRIC,
            statistic="Sum",
            period=PERIOD,
        )
        for mover in run_movers:
            logs.MetricFilter(
                mover,
                "EnteredIntervention",
                log_group=mover.log_group,
                metric_namespace=POWERTOOLS_NAMESPACE,
                metric_name=INTERVENTION_METRIC,
                filter_pattern=intervention_filter(),
                metric_value="1",
            )

        return intervention

    def _alarm(self, alarm_id: str, metric: cloudwatch.IMetric, description: str) -> None:
        created = cloudwatch.Alarm(
            self,
            alarm_id,
            metric=metric,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        created.add_alarm_action(self._alarm_action)
        self.alarms.append(created)

    def _add_alarms(
        self,
        state_machine: sfn.StateMachine,
        source_state_machine: sfn.StateMachine,
        functions: Sequence[RunplaneFunction],
        intervention: cloudwatch.Metric,
        api_name: str,
        api_stage: str,
    ) -> None:
        self._alarm(
            "ExecutionsFailed",
            state_machine.metric_failed(period=PERIOD),
            "A run's workflow execution failed: the run records why (runplane run show).",
        )
        self._alarm(
            "ExecutionsTimedOut",
            state_machine.metric_timed_out(period=PERIOD),
            "A run's workflow execution timed out.",
        )
        self._alarm(
            "SourceExecutionsFailed",
            source_state_machine.metric_failed(period=PERIOD),
            "A GitHub delivery's source workflow failed: its ingestion records why, and "
            "GitHub's redelivery starts it again (docs/github.md).",
        )
        self._alarm(
            "SourceExecutionsTimedOut",
            source_state_machine.metric_timed_out(period=PERIOD),
            "A GitHub delivery's source workflow timed out.",
        )
        self._alarm(
            "RunsNeedIntervention",
            intervention,
            "A run entered an intervention status and holds its workspace until an operator "
            "recovers it.",
        )
        self._alarm(
            "DeadLetters",
            self.dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD),
            "Run-failure notifications could not be delivered to the alarm topic.",
        )
        for fn in functions:
            name = fn.node.path.replace("/", "")
            self._alarm(
                f"{name}Errors",
                fn.function.metric_errors(period=PERIOD),
                f"{fn.handler} raised errors.",
            )
            self._alarm(
                f"{name}Throttles",
                fn.function.metric_throttles(period=PERIOD),
                f"{fn.handler} was throttled.",
            )
        api_5xx = cloudwatch.Metric(
            namespace="AWS/ApiGateway",
            metric_name="5XXError",
            dimensions_map={"ApiName": api_name, "Stage": api_stage},
            statistic="Sum",
            period=PERIOD,
        )
        self._alarm("Api5xx", api_5xx, "The API answered with server errors.")

    def _add_dashboard(
        self,
        config: RunplaneConfig,
        state_machine: sfn.StateMachine,
        functions: Sequence[RunplaneFunction],
        intervention: cloudwatch.Metric,
        api_name: str,
        api_stage: str,
    ) -> None:
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=config.prefix, default_interval=Duration.hours(6)
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Run executions",
                left=[
                    state_machine.metric_started(period=PERIOD),
                    state_machine.metric_succeeded(period=PERIOD),
                    state_machine.metric_failed(period=PERIOD),
                    state_machine.metric_timed_out(period=PERIOD),
                    state_machine.metric_aborted(period=PERIOD),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Runs needing intervention; undelivered notifications",
                left=[intervention],
                right=[
                    self.dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD)
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[fn.function.metric_errors(period=PERIOD) for fn in functions],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Function throttles",
                left=[fn.function.metric_throttles(period=PERIOD) for fn in functions],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Function duration (p99)",
                left=[
                    fn.function.metric_duration(period=PERIOD, statistic="p99") for fn in functions
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="API requests and errors",
                left=[
                    cloudwatch.Metric(
                        namespace="AWS/ApiGateway",
                        metric_name=name,
                        dimensions_map={"ApiName": api_name, "Stage": api_stage},
                        statistic="Sum",
                        period=PERIOD,
                    )
                    for name in ("Count", "4XXError", "5XXError")
                ],
                width=12,
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24),
        )
