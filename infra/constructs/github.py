"""GitHub sources: the App's secrets, the source workflow and its task functions.

``statemachines/source.asl.json`` runs as its own state machine with a fixed name
(functions that start it learn its ARN without a reference). Only its task
functions read the App's private key; the run API reads the webhook secret.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from functions.tasks.source_handlers import SOURCE_HANDLERS
from infra.config import RunplaneConfig
from infra.constructs.functions import (
    KEY_ACTIONS,
    KEY_UNWRAP,
    OBJECT_ACTIONS,
    OBJECT_READ,
    TABLE_READ,
    TABLE_WRITE,
    WORKFLOW_START,
    Access,
    Platform,
    RunplaneFunction,
)
from infra.constructs.nag import acknowledge
from infra.constructs.orchestration import (
    FUNCTION_ARN,
    STATEMACHINES,
    named_state_machine_arn,
    placeholders,
)
from infra.constructs.storage import ARTIFACTS_PREFIX

SOURCE_DEFINITION = STATEMACHINES / "source.asl.json"
APP_KEY = "github_app_private_key_secret_arn"
WEBHOOK = "github_webhook_secret_arn"
CLIENT_SECRET = "github_client_secret_arn"
# What the dashboard reads to connect an installation (the App's OAuth client).
CONNECT_SETTINGS = ("github_api_url", "github_web_url", "github_app_slug", "github_client_id")
_GITHUB_SETTINGS = ("github_app_id", "github_api_url")
_STEP = TABLE_READ + TABLE_WRITE

SOURCE_ACCESS: dict[str, Access] = {
    # Exchanges a token, stores the configuration artifacts and their versions.
    "IngestSource": Access(
        table=_STEP,
        object_prefixes=(ARTIFACTS_PREFIX,),
        object_actions=OBJECT_ACTIONS,
        key=KEY_ACTIONS,
        github_secrets=(APP_KEY,),
        settings=_GITHUB_SETTINGS,
    ),
    # Creates runs (and starts their workflows) and posts pending statuses, the pull
    # request's comment and check runs (read from the runs' plan documents).
    "CreateSourceRuns": Access(
        table=_STEP,
        object_prefixes=(ARTIFACTS_PREFIX,),
        object_actions=OBJECT_READ,
        key=KEY_UNWRAP,
        workflow=WORKFLOW_START,
        github_secrets=(APP_KEY,),
        settings=(
            *_GITHUB_SETTINGS,
            "definition_version",
            "build_sha",
            "runner_release",
            "policy_runtime",
            "engine_versions",
            "control_plane_url",
        ),
    ),
    "FailSource": Access(table=_STEP),
    # Posts a run's commit status, and edits the pull request's comment and the run's
    # check run (claimed and recorded in the table; read from the plan document).
    "ReportCommitStatus": Access(
        table=_STEP,
        object_prefixes=(ARTIFACTS_PREFIX,),
        object_actions=OBJECT_READ,
        key=KEY_UNWRAP,
        github_secrets=(APP_KEY,),
        settings=(*_GITHUB_SETTINGS, "control_plane_url"),
    ),
}


def source_state_machine_name(config: RunplaneConfig) -> str:
    return f"{config.prefix}-source"


def source_state_machine_arn(stack: Stack, config: RunplaneConfig) -> str:
    return named_state_machine_arn(stack, source_state_machine_name(config))


class GitHubSecrets(Construct):
    """The webhook secret (generated: paste it into the GitHub App) and the App's
    private key (set after deploy: see docs/github.md)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: RunplaneConfig) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        self.webhook = secretsmanager.Secret(
            self,
            "WebhookSecret",
            description="Runplane: the GitHub App's webhook secret (X-Hub-Signature-256)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True
            ),
            removal_policy=removal,
        )
        self.app_key = secretsmanager.Secret(
            self,
            "AppPrivateKey",
            description="Runplane: the GitHub App's private key (PEM), set after deploy",
            removal_policy=removal,
        )
        self.client_secret = secretsmanager.Secret(
            self,
            "AppClientSecret",
            description="Runplane: the GitHub App's client secret (OAuth), set after deploy",
            removal_policy=removal,
        )
        for secret in (self.webhook, self.app_key, self.client_secret):
            acknowledge(
                secret,
                "AwsSolutions-SMG4",
                "GitHub App secrets are rotated in GitHub and then here; Secrets Manager "
                "cannot rotate them by itself.",
            )
        self.by_setting: dict[str, secretsmanager.ISecret] = {
            APP_KEY: self.app_key,
            WEBHOOK: self.webhook,
            CLIENT_SECRET: self.client_secret,
        }


class SourceWorkflow(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: RunplaneConfig, platform: Platform
    ) -> None:
        super().__init__(scope, construct_id)
        self.by_name: dict[str, RunplaneFunction] = {}
        for name, handler in SOURCE_HANDLERS.items():
            self.by_name[name] = RunplaneFunction(
                self,
                name,
                platform=platform,
                name=f"source-{name.lower()}",
                handler=f"{handler.__module__}.{handler.__name__}",
                description=f"Runplane source workflow step {name}",
                access=SOURCE_ACCESS[name],
                timeout=Duration.seconds(120 if name == "IngestSource" else 30),
                memory_size=1024 if name == "IngestSource" else 512,
            )
        substitutions: dict[str, str] = {}
        for placeholder in sorted(placeholders(SOURCE_DEFINITION)):
            match = FUNCTION_ARN.fullmatch(placeholder)
            if match is None or match.group(1) not in self.by_name:
                raise ValueError(f"{SOURCE_DEFINITION.name}: nothing provides ${{{placeholder}}}")
            substitutions[placeholder] = self.by_name[match.group(1)].function.function_arn
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="Runplane source workflow: invokes exactly its task functions",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeTaskFunctions",
                actions=["lambda:InvokeFunction"],
                resources=sorted(substitutions.values()),
            )
        )
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "Source",
            state_machine_name=source_state_machine_name(config),
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(
                SOURCE_DEFINITION.read_text(encoding="utf-8")
            ),
            definition_substitutions=substitutions,
            role=self.role,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False
            ),
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery and X-Ray do not support resource-level permissions.",
        )
