"""The one stack Runplane deploys: each capability is a construct of its own."""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs import assets
from infra.constructs.api import DASHBOARD, RUN_API, Api
from infra.constructs.audit_export import AuditExport
from infra.constructs.events import EventQueue, EventRelay, EventWorker
from infra.constructs.functions import Platform
from infra.constructs.github import (
    GitHubSecrets,
    SourceWorkflow,
    source_state_machine_arn,
)
from infra.constructs.identity import Identity
from infra.constructs.observability import Observability
from infra.constructs.oidc import OidcIssuer
from infra.constructs.orchestration import Orchestration, definition_version, state_machine_arn
from infra.constructs.sandbox import Sandbox
from infra.constructs.sandbox_exits import SandboxExits
from infra.constructs.scheduler import Schedules
from infra.constructs.standby import StandbyPool
from infra.constructs.storage import Storage
from infra.constructs.task_functions import TaskFunctions


def policy_runtime() -> str:
    """The policy runtime release launch controls check: the pinned default engine
    (gordon-to-regorus), else the pinned regopy."""
    for package in ("gordon-to-regorus", "regopy"):
        for requirement in assets.runtime_dependencies():
            pinned = re.fullmatch(rf"{package}==([0-9.]+)", requirement.replace(" ", ""))
            if pinned:
                return f"{package}@{pinned.group(1)}"
    return "policy-runtime@none"


class RunplaneStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: RunplaneConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="Runplane: managed OpenTofu runs (control plane, workflow, sandboxes)",
            **kwargs,
        )
        self.config = config
        self.storage = Storage(self, "Storage", config=config)
        self.sandbox = Sandbox(self, "Sandbox", config=config)
        self.identity = Identity(self, "Identity", config=config)
        self.events = EventQueue(self, "RunEvents", config=config)
        layer = lambda_.LayerVersion(
            self,
            "RunplaneLayer",
            code=assets.layer_code(),
            compatible_runtimes=[assets.RUNTIME],
            compatible_architectures=[assets.ARCHITECTURE],
            description="The runplane package and its runtime dependencies",
        )
        self.github = GitHubSecrets(self, "GitHub", config=config)
        self.platform = Platform(
            config=config,
            storage=self.storage,
            state_machine_arn=state_machine_arn(self, config),
            sandbox=self.sandbox.target,
            layer=layer,
            code=assets.functions_code(),
            event_queue=self.events.queue,
            settings={
                "definition_version": definition_version(),
                "build_sha": config.build_sha,
                "runner_release": (
                    f"runner@tofu-{config.engine_version}+{self.sandbox.image.asset_hash[:12]}"
                ),
                "policy_runtime": policy_runtime(),
                "approval_window_seconds": str(config.approval_window_seconds),
                "engine_versions": config.engine_version,
                "runner_phase_seconds": str(config.runner_phase_seconds),
                "runner_heartbeat_seconds": str(config.runner_heartbeat_seconds),
                "github_app_id": config.github_app_id,
                "github_api_url": config.github_api_url,
                "github_web_url": config.github_web_url,
                "github_app_slug": config.github_app_slug,
                "github_client_id": config.github_client_id,
            },
            source_state_machine_arn=source_state_machine_arn(self, config),
            github_secrets=self.github.by_setting,
        )
        self.api = Api(self, "Api", platform=self.platform, identity=self.identity)
        dashboard = self.api.functions[DASHBOARD]
        self.identity.add_dashboard_sign_in(dashboard.function, dashboard.role, self.api.url)
        self.platform.settings["control_plane_url"] = self.api.url
        # The run API serves the issuer's documents and, through the runner's endpoints,
        # redeems the run credentials that need a token: it publishes and signs.
        run_api = self.api.functions[RUN_API]
        # Single sign-on (docs/sso.md): the CLI's sign-in settings and the providers'
        # organizations for the authorizer, which maps people from their tokens.
        self.identity.add_cli_sign_in(run_api.function)
        self.identity.add_federation(self.api.authorizer_function.function)
        self.oidc = OidcIssuer(
            self,
            "OidcIssuer",
            config=config,
            issuer_url=self.api.url,
            publishers=[run_api],
            signer=run_api,
        )
        self.tasks = TaskFunctions(self, "Tasks", platform=self.platform)
        self.sandbox_exits = SandboxExits(self, "SandboxExits", platform=self.platform)
        # The standby pool (docs/standby.md): nothing of it unless runnerStandby > 0.
        self.standby = (
            StandbyPool(
                self, "Standby", platform=self.platform, launch=self.tasks.by_name["StartRunner"]
            )
            if config.runner_standby
            else None
        )
        self.orchestration = Orchestration(self, "Orchestration", config=config, tasks=self.tasks)
        self.sources = SourceWorkflow(self, "Sources", config=config, platform=self.platform)
        self.schedules = Schedules(
            self, "Schedules", platform=self.platform, api=self.api.functions["api"]
        )
        self.event_worker = EventWorker(
            self, "EventWorker", platform=self.platform, events=self.events
        )
        self.event_relay = EventRelay(
            self,
            "EventRelay",
            platform=self.platform,
            events=self.events,
            table=self.storage.table,
        )
        self.audit_export = AuditExport(self, "AuditExport", platform=self.platform)
        functions = [
            *self.api.functions.values(),
            self.api.authorizer_function,
            *self.tasks.by_name.values(),
            self.sandbox_exits.function,
            *([self.standby.top_up] if self.standby else []),
            self.event_worker.function,
            self.event_relay.function,
            *self.sources.by_name.values(),
            self.schedules.fire,
            self.audit_export.function,
        ]
        self.observability = Observability(
            self,
            "Observability",
            config=config,
            storage=self.storage,
            state_machine=self.orchestration.state_machine,
            source_state_machine=self.sources.state_machine,
            functions=functions,
            run_movers=[
                *self.api.functions.values(),
                *self.tasks.by_name.values(),
                self.sandbox_exits.function,
            ],
            api_name=self.api.rest_api.rest_api_name,
            api_stage=self.api.stage_name,
        )
        self.events.alarm_on_dead_letters(self.observability.topic)
        self.event_relay.alarm_on_failures(self.observability.topic)
        self._outputs()

    def _outputs(self) -> None:
        def output(name: str, value: str, description: str) -> None:
            CfnOutput(self, name, value=value, description=description)

        output("ControlPlaneUrl", self.api.url, "Run API and Cloud API base URL")
        output("TableName", self.storage.table.table_name, "The Runplane DynamoDB table")
        output("ArtifactBucket", self.storage.bucket.bucket_name, "Encrypted run artifacts")
        output("KeyArn", self.storage.key.key_arn, "Envelope encryption key")
        output(
            "StateMachineArn",
            self.orchestration.state_machine.state_machine_arn,
            "Run workflow (execution name = run ID)",
        )
        output("AlarmTopicArn", self.observability.topic.topic_arn, "Alarm notifications")
        output("Issuer", self.identity.issuer, "JWT issuer the API accepts")
        output(
            "OidcIssuerUrl",
            self.oidc.issuer_url,
            "OpenID Connect issuer of workload identity tokens (cloud trust policies name it)",
        )
        output(
            "OidcSigningKeyArn",
            self.oidc.signing_key.key_arn,
            "KMS key signing workload identity tokens (publish it after a rotation)",
        )
        if self.identity.user_pool is not None and self.identity.client is not None:
            output("UserPoolId", self.identity.user_pool.user_pool_id, "Cognito user pool")
            output(
                "UserPoolClientId",
                self.identity.client.user_pool_client_id,
                "Cognito app client for the CLI",
            )
        if self.identity.hosted_ui is not None:
            output(
                "SignInDomain",
                self.identity.hosted_ui.base_url(),
                "Cognito hosted UI the dashboard signs people in with",
            )
        if self.api.domain is not None:
            output(
                "DomainTarget",
                self.api.domain.domain_name_alias_domain_name,
                "Point the custom domain (CNAME or alias) here",
            )
