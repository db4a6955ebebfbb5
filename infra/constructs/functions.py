"""One Lambda function per entry point, each with its own role and exactly its access.

``Access`` says which AWS actions a function's code performs; the role gets those
actions on our resources and nothing else (no managed policies), and the function
gets the ``RUNPLANE_*`` settings for exactly those resources. The least-privilege
tests in ``tests/infra`` assert the resulting policies action by action.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs import assets
from infra.constructs.nag import acknowledge, logical_id
from infra.constructs.storage import Storage

# DynamoDB: every write is one TransactWriteItems call, which IAM authorizes per item
# as the put/update/delete/condition-check actions; reads are GetItem and Query.
# BatchGetItem: a run's items, a runner session with its attempt, and log chunks are
# read in one request (store/batch.py); tests/integration/test_table_grants.py proves
# these sets by executing the code.
TABLE_GET = ("dynamodb:BatchGetItem", "dynamodb:GetItem")
TABLE_READ = ("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query")
TABLE_WRITE = (
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)
# S3 objects: multipart uploads (PutObject covers create/part/complete), streamed
# reads, presigned URLs (signed with the function's role), and discards.
OBJECT_ACTIONS = ("s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject")
OBJECT_READ = ("s3:GetObject",)
# KMS: data keys for envelope encryption, and unwrapping them.
KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
KEY_UNWRAP = ("kms:Decrypt",)
# Step Functions: resuming a run's waits (approval, writer hand-off, runner phases).
WORKFLOW_CALLBACKS = (
    "states:SendTaskFailure",
    "states:SendTaskHeartbeat",
    "states:SendTaskSuccess",
)
WORKFLOW_RESUME = ("states:SendTaskSuccess",)
WORKFLOW_START = ("states:StartExecution",)

POWERTOOLS_NAMESPACE = "Runplane"
# API Gateway waits at most 29 seconds for an integration.
API_TIMEOUT = Duration.seconds(29)


@dataclass(frozen=True)
class Access:
    """The AWS actions one function's code performs (see the module docstring)."""

    table: tuple[str, ...] = ()
    # Object key prefixes the function uses, and what it does with their objects.
    object_prefixes: tuple[str, ...] = ()
    object_actions: tuple[str, ...] = OBJECT_ACTIONS
    key: tuple[str, ...] = ()
    workflow: tuple[str, ...] = ()
    start_sandbox: bool = False
    stop_sandbox: bool = False
    # Knows the sandbox cluster's ARN (to tell its tasks' events apart), calling no ECS.
    sandbox_cluster: bool = False
    # Starts source workflow executions (ingestions, commit statuses).
    source_workflow: bool = False
    # GitHub App secrets the function reads, by settings field (``*_secret_arn``).
    github_secrets: tuple[str, ...] = ()
    # Sends to the run-event queue: the outbox relay, and the worker's follow-ups.
    send_events: bool = False
    # Settings fields (RUNPLANE_<NAME>) the function reads beyond its resources'.
    settings: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class SandboxTarget:
    """What a function needs to start or stop a sandbox task."""

    cluster: ecs.ICluster
    task_definition: ecs.TaskDefinition
    subnets: list[ec2.ISubnet]
    security_group: ec2.ISecurityGroup


@dataclass
class Platform:
    """The shared resources every function may be granted access to."""

    config: RunplaneConfig
    storage: Storage
    state_machine_arn: str
    sandbox: SandboxTarget
    layer: lambda_.ILayerVersion
    code: lambda_.Code
    # The run-event queue (infra/constructs/events.py).
    event_queue: sqs.IQueue | None = None
    # Values of settings fields that are not resource names (RUNPLANE_<NAME>).
    settings: dict[str, str] = field(default_factory=dict)
    # The source workflow (fixed name, like the run workflow's) and the GitHub App's
    # secrets, by settings field.
    source_state_machine_arn: str = ""
    github_secrets: dict[str, secretsmanager.ISecret] = field(default_factory=dict)


class RunplaneFunction(Construct):
    """A Lambda function running one handler of ``functions/`` with its own role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        platform: Platform,
        name: str,
        handler: str,
        description: str,
        access: Access,
        timeout: Duration | None = None,
        memory_size: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        config = platform.config
        self.handler = handler
        self.access = access
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Runplane {name}: exactly the actions {handler} performs",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        environment = {
            "POWERTOOLS_SERVICE_NAME": f"runplane-{name}",
            "POWERTOOLS_METRICS_NAMESPACE": POWERTOOLS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
            # No pydantic plugin is installed: without this, the first model a cold start
            # builds scans every installed distribution's entry points for one.
            "PYDANTIC_DISABLE_PLUGINS": "__all__",
            **_grant(self.role, platform, access),
        }
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=f"{config.prefix}-{name}",
            description=description,
            runtime=assets.RUNTIME,
            architecture=assets.ARCHITECTURE,
            handler=handler,
            code=platform.code,
            layers=[platform.layer],
            role=self.role,
            timeout=timeout or API_TIMEOUT,
            memory_size=memory_size,
            environment=environment,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            tracing=lambda_.Tracing.ACTIVE,
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords do not "
            "support resource-level permissions. Every other statement names its resources.",
        )


def _grant(role: iam.Role, platform: Platform, access: Access) -> dict[str, str]:
    """Add ``access`` to ``role``; return the settings that name what was granted."""
    env = _grant_data(role, platform, access)
    env |= _grant_sandbox(role, platform, access)
    env |= _grant_workflows_and_secrets(role, platform, access)
    for name in access.settings:
        env[f"RUNPLANE_{name.upper()}"] = platform.settings[name]
    return env


def _grant_data(role: iam.Role, platform: Platform, access: Access) -> dict[str, str]:
    """The table, the run-event queue, the artifact bucket and the data key."""
    storage = platform.storage
    env: dict[str, str] = {}
    if access.table:
        resources = [storage.table.table_arn]
        if "dynamodb:Query" in access.table:
            resources += storage.index_arns
        role.add_to_policy(
            iam.PolicyStatement(sid="Table", actions=list(access.table), resources=resources)
        )
        env["RUNPLANE_TABLE_NAME"] = storage.table.table_name
    if platform.event_queue is not None and access.send_events:
        # A move's run event is an outbox item of its transaction: only the relay
        # and the worker's follow-ups send (services/run_events.py).
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RunEvents",
                actions=["sqs:SendMessage"],
                resources=[platform.event_queue.queue_arn],
            )
        )
        env["RUNPLANE_EVENT_QUEUE_URL"] = platform.event_queue.queue_url
    if access.object_prefixes:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Artifacts",
                actions=list(access.object_actions),
                resources=[storage.bucket.arn_for_objects(f"{p}*") for p in access.object_prefixes],
            )
        )
        bucket = logical_id(storage.bucket)
        for prefix in access.object_prefixes:
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{prefix}*]",
                "Artifact object keys are generated per artifact (one per upload); the grant "
                f"is limited to the {prefix} prefix of the Runplane bucket.",
            )
        # Without ListBucket a missing key reads as AccessDenied, not NoSuchKey, and
        # the store could not tell a missing object from a refused one.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ArtifactsMissingKeys",
                actions=["s3:ListBucket"],
                resources=[storage.bucket.bucket_arn],
            )
        )
        env["RUNPLANE_ARTIFACT_BUCKET"] = storage.bucket.bucket_name
    if access.key:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DataKeys", actions=list(access.key), resources=[storage.key.key_arn]
            )
        )
        env["RUNPLANE_KMS_KEY_ID"] = storage.key.key_arn
    return env


def _grant_sandbox(role: iam.Role, platform: Platform, access: Access) -> dict[str, str]:
    """Starting and stopping sandbox tasks, and knowing their cluster."""
    env: dict[str, str] = {}
    sandbox = platform.sandbox
    if access.sandbox_cluster:
        env["RUNPLANE_ECS_CLUSTER"] = sandbox.cluster.cluster_arn
    if access.start_sandbox or access.stop_sandbox:
        env["RUNPLANE_LAUNCHER"] = "ecs"
        env["RUNPLANE_ECS_CLUSTER"] = sandbox.cluster.cluster_arn
        tasks = Stack.of(role).format_arn(
            service="ecs", resource="task", resource_name=f"{sandbox.cluster.cluster_name}/*"
        )
        cluster_condition = {"ArnEquals": {"ecs:cluster": sandbox.cluster.cluster_arn}}
        if access.start_sandbox:
            definition = sandbox.task_definition
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="StartSandbox",
                    actions=["ecs:RunTask"],
                    resources=[definition.task_definition_arn],
                    conditions=cluster_condition,
                )
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="TagSandbox",
                    actions=["ecs:TagResource"],
                    resources=[tasks],
                    conditions={"StringEquals": {"ecs:CreateAction": "RunTask"}},
                )
            )
            passed = [definition.task_role.role_arn]
            if definition.execution_role is not None:
                passed.append(definition.execution_role.role_arn)
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="PassSandboxRoles",
                    actions=["iam:PassRole"],
                    resources=passed,
                    conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
                )
            )
            env["RUNPLANE_ECS_TASK_DEFINITION"] = definition.task_definition_arn
            env["RUNPLANE_ECS_SUBNETS"] = ",".join(s.subnet_id for s in sandbox.subnets)
            env["RUNPLANE_ECS_SECURITY_GROUPS"] = sandbox.security_group.security_group_id
        if access.stop_sandbox:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="StopSandbox",
                    actions=["ecs:StopTask"],
                    resources=[tasks],
                    conditions=cluster_condition,
                )
            )
        cluster = logical_id(sandbox.cluster)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:"
            f"<AWS::AccountId>:task/<{cluster}>/*]",
            "Sandbox task IDs are assigned by ECS at launch; the statement is limited to "
            "tasks of the Runplane sandbox cluster.",
        )
    return env


def _grant_workflows_and_secrets(
    role: iam.Role, platform: Platform, access: Access
) -> dict[str, str]:
    """The run and source workflows, and the GitHub App secrets the function reads."""
    env: dict[str, str] = {}
    if access.workflow:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Workflow",
                actions=list(access.workflow),
                resources=[platform.state_machine_arn],
            )
        )
        env["RUNPLANE_STATE_MACHINE_ARN"] = platform.state_machine_arn
    if access.source_workflow:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="SourceWorkflow",
                actions=list(WORKFLOW_START),
                resources=[platform.source_state_machine_arn],
            )
        )
        env["RUNPLANE_SOURCE_STATE_MACHINE_ARN"] = platform.source_state_machine_arn
    for name in access.github_secrets:
        secret = platform.github_secrets[name]
        role.add_to_policy(
            iam.PolicyStatement(
                sid=f"Secret{''.join(p.title() for p in name.split('_'))}",
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret.secret_arn],
            )
        )
        env[f"RUNPLANE_{name.upper()}"] = secret.secret_arn
    return env
