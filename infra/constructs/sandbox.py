"""The sandbox: one Fargate task per runner phase, in private subnets, egress only.

The runner holds no AWS credential of ours: its task role has no policy at all. It
reaches the control plane over HTTPS with its one-time bootstrap handle and moves
artifacts through short-lived presigned URLs. The image is built from
``functions/runner/Dockerfile``, which pins the engine by version and SHA-256.

Inside the task, two principals: the runner runs as root, holds the session and never
runs configuration code; the engine and all it starts run as the unprivileged engine
user, which owns nothing of the runner's (docs/security.md). That root keeps only the
capabilities the separation needs.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import RunplaneConfig
from infra.constructs.assets import REPO
from infra.constructs.functions import SandboxTarget
from infra.constructs.nag import acknowledge

CONTAINER_NAME = "runner"  # runplane.adapters.launchers.EcsFargateLauncher's default
# Root inside the task: the runner starts each engine command as ENGINE_USER, chowns
# the engine's directory to it, and kills every process of that user after each command.
RUNNER_USER = "0:0"
ENGINE_USER = "10002:10002"
# Separation by user only: Fargate grants no CAP_SYS_ADMIN, so no namespaces.
ENGINE_ISOLATION = "user"
# All root keeps (Fargate's default is Docker's set; it can add none but SYS_PTRACE):
# CHOWN (hand the engine its directory), DAC_OVERRIDE and FOWNER (read what the engine
# wrote in its 0700 directory, and remove it), KILL (the engine's processes), SETGID
# and SETUID (start each engine command as the engine user). Every other is dropped.
RUNNER_CAPABILITIES = frozenset(
    {
        ecs.Capability.CHOWN,
        ecs.Capability.DAC_OVERRIDE,
        ecs.Capability.FOWNER,
        ecs.Capability.KILL,
        ecs.Capability.SETGID,
        ecs.Capability.SETUID,
    }
)
DROPPED_CAPABILITIES = [
    c for c in ecs.Capability if c is not ecs.Capability.ALL and c not in RUNNER_CAPABILITIES
]
# Writable scratch space on the task's ephemeral storage; the root filesystem is
# read-only. The image creates both: /work root's, mode 0711 (the engine user passes
# through to its own /work/engine), /tmp 1777.
SCRATCH = {"work": "/work", "tmp": "/tmp"}  # noqa: S108 - the container's own /tmp
ENGINE_ENVIRONMENT = {
    "RUNPLANE_ENGINE_USER": ENGINE_USER,
    "RUNPLANE_ENGINE_ISOLATION": ENGINE_ISOLATION,
}
DOCKERFILE = "functions/runner/Dockerfile"
IMAGE_ASSET_EXCLUDE = [
    "*",
    "!layers",
    "layers/*",
    "!layers/runplane",
    "!layers/runplane/**",
    "!functions",
    "functions/*",
    "!functions/runner",
    "!functions/runner/**",
    "**/.*",
    "**/__pycache__",
    "**/*.pyc",
]


class Sandbox(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: RunplaneConfig) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        flow_logs = logs.LogGroup(
            self, "FlowLogs", retention=config.log_retention, removal_policy=removal
        )
        self.vpc = ec2.Vpc(
            self,
            "Network",
            max_azs=2,
            nat_gateways=config.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
                ec2.SubnetConfiguration(
                    name="sandbox", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS
                ),
            ],
            flow_logs={
                "all": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
            gateway_endpoints={
                # Presigned artifact transfers stay on the AWS network.
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
            },
            restrict_default_security_group=False,
        )
        self.subnets = self.vpc.select_subnets(subnet_group_name="sandbox").subnets
        self.security_group = ec2.SecurityGroup(
            self,
            "Egress",
            vpc=self.vpc,
            description="Runplane sandboxes: no inbound traffic; outbound HTTPS only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS: control plane, S3, registries"
        )

        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED,
        )
        self.task_role = iam.Role(
            self,
            "TaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="Runplane sandbox: no permissions (the runner works through "
            "session-bound URLs)",
        )
        arm = config.sandbox_architecture == "arm64"
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Runner",
            family=f"{config.prefix}-runner",
            cpu=config.sandbox_cpu,
            memory_limit_mib=config.sandbox_memory_mib,
            task_role=self.task_role,
            runtime_platform=ecs.RuntimePlatform(
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
                cpu_architecture=ecs.CpuArchitecture.ARM64 if arm else ecs.CpuArchitecture.X86_64,
            ),
        )
        for volume in SCRATCH:
            self.task_definition.add_volume(name=volume)
        self.image = ecr_assets.DockerImageAsset(
            self,
            "Image",
            directory=str(REPO),
            file=DOCKERFILE,
            exclude=IMAGE_ASSET_EXCLUDE,
            platform=ecr_assets.Platform.LINUX_ARM64 if arm else ecr_assets.Platform.LINUX_AMD64,
            build_args={
                "TOFU_VERSION": config.engine_version,
                f"TOFU_SHA256_{config.engine_arch.upper()}": config.engine_checksum,
            },
        )
        self.logs = logs.LogGroup(
            self, "RunnerLogs", retention=config.log_retention, removal_policy=removal
        )
        # An init process as PID 1 reaps the engine's orphaned processes once they are
        # killed (the runner waits only for its own children) and passes ECS's stop
        # signal on to the runner.
        linux = ecs.LinuxParameters(self, "RunnerLinux", init_process_enabled=True)
        linux.drop_capabilities(*DROPPED_CAPABILITIES)
        container = self.task_definition.add_container(
            CONTAINER_NAME,
            container_name=CONTAINER_NAME,
            image=ecs.ContainerImage.from_docker_image_asset(self.image),
            essential=True,
            readonly_root_filesystem=True,
            user=RUNNER_USER,
            linux_parameters=linux,
            # The image sets these too; here they hold whatever image the task runs.
            environment=ENGINE_ENVIRONMENT,
            logging=ecs.LogDrivers.aws_logs(stream_prefix="runner", log_group=self.logs),
        )
        acknowledge(
            self.task_definition,
            "AwsSolutions-ECS2",
            "The only variables set in the task definition are the engine's user id and "
            "isolation mode, fixed settings of the sandbox and no secret; the run's "
            "handles are passed per launch.",
        )
        container.add_mount_points(
            *(
                ecs.MountPoint(source_volume=volume, container_path=path, read_only=False)
                for volume, path in SCRATCH.items()
            )
        )
        execution_role = self.task_definition.obtain_execution_role()
        acknowledge(
            execution_role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken, which pulling the runner image needs, does not "
            "support resource-level permissions; image and log permissions name their resources.",
        )

    @property
    def target(self) -> SandboxTarget:
        return SandboxTarget(
            cluster=self.cluster,
            task_definition=self.task_definition,
            subnets=self.subnets,
            security_group=self.security_group,
        )
