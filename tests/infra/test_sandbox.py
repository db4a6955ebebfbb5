"""The Fargate sandbox and the image it runs."""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk import aws_ecs as ecs

from infra.config import ENGINE_SHA256, ENGINE_VERSION
from infra.constructs.assets import REPO
from infra.constructs.sandbox import ENGINE_ENVIRONMENT, ENGINE_USER, RUNNER_USER
from runplane.adapters.launchers import EcsFargateLauncher, LaunchRequest
from tests.infra.synth import Synthesized, ref

DOCKERFILE = REPO / "functions" / "runner" / "Dockerfile"
START_RUNNER = "functions.tasks.handlers.start_runner"


def _container(stack: Synthesized) -> dict[str, object]:
    _, definition = stack.one("AWS::ECS::TaskDefinition")
    (container,) = definition["ContainerDefinitions"]
    return dict(container)


def test_the_runner_container_is_root_with_few_capabilities_and_read_only(
    stack: Synthesized,
) -> None:
    container = _container(stack)
    # The launcher overrides the container by this name
    assert container["Name"] == "runner"
    assert container["ReadonlyRootFilesystem"] is True
    # The runner is root inside the task: it starts the engine as the engine user
    assert container["User"] == "0:0"
    linux = container["LinuxParameters"]
    assert isinstance(linux, dict)
    # An init process reaps the engine's orphaned processes
    assert linux["InitProcessEnabled"] is True
    # Every capability is dropped but the six the runner needs; none is added
    everything = {c.value for c in ecs.Capability} - {ecs.Capability.ALL.value}
    kept = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"}
    drop = linux["Capabilities"]["Drop"]
    assert len(drop) == len(set(drop))
    assert set(drop) == everything - kept
    assert "Add" not in linux["Capabilities"]
    # Only the scratch volumes are writable
    mounts = container["MountPoints"]
    assert isinstance(mounts, list)
    assert {m["ContainerPath"] for m in mounts} == {"/work", "/tmp"}  # noqa: S108 - the container's paths
    # The engine's user and isolation are the only settings baked in: the launcher
    # passes the run's handles, and there are no secrets
    assert {(e["Name"], e["Value"]) for e in container["Environment"]} == {  # type: ignore[attr-defined]
        ("RUNPLANE_ENGINE_USER", "10002:10002"),
        ("RUNPLANE_ENGINE_ISOLATION", "user"),
    }
    assert "Secrets" not in container
    assert "PortMappings" not in container


class _RecordingEcs:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def run_task(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {"tasks": [{"taskArn": "arn:aws:ecs:eu-west-1:111122223333:task/c/1"}]}


def _launch_with_template_settings(stack: Synthesized) -> dict[str, Any]:
    """What the production launcher asks ECS for, set up as StartRunner's settings say."""
    ecs = _RecordingEcs()
    launcher = EcsFargateLauncher(
        ecs,  # type: ignore[arg-type]
        cluster="cluster",
        task_definition="runner:1",
        subnets=["subnet-a"],
        security_groups=["sg-a"],
    )
    launcher.launch(
        LaunchRequest(
            run_id="run-1",
            attempt_id="att-1",
            phase="plan",
            sandbox_id="sbx-1",
            control_plane_url="https://runplane.example.com",
            bootstrap="rpb_secret",
        )
    )
    (call,) = ecs.calls
    return call


def test_the_launcher_overrides_this_container_without_a_public_ip(stack: Synthesized) -> None:
    call = _launch_with_template_settings(stack)
    # The container the launcher overrides is the task definition's container
    (override,) = call["overrides"]["containerOverrides"]
    assert override["name"] == _container(stack)["Name"]
    # And the task gets no public IP
    assert call["networkConfiguration"]["awsvpcConfiguration"]["assignPublicIp"] == "DISABLED"


def test_sandboxes_get_no_public_ip_and_no_inbound_traffic(stack: Synthesized) -> None:
    # Given the subnets and security group StartRunner launches into
    env = stack.environment(START_RUNNER)
    subnet_refs = [r for part in env["RUNPLANE_ECS_SUBNETS"]["Fn::Join"][1] if (r := ref(part))]
    subnets = stack.of_type("AWS::EC2::Subnet")
    # Then the subnets are private (no public IP on launch, default route via NAT)
    assert subnet_refs
    for subnet in subnet_refs:
        assert subnets[subnet]["MapPublicIpOnLaunch"] is False
        routes = [
            r
            for r in stack.of_type("AWS::EC2::Route").values()
            if any(
                ref(a["RouteTableId"]) == ref(r["RouteTableId"]) and ref(a["SubnetId"]) == subnet
                for a in stack.of_type("AWS::EC2::SubnetRouteTableAssociation").values()
            )
        ]
        assert routes
        assert all("NatGatewayId" in r for r in routes)
    # And the security group allows no inbound traffic and only HTTPS out
    group = ref(env["RUNPLANE_ECS_SECURITY_GROUPS"])
    assert group is not None
    props = stack.of_type("AWS::EC2::SecurityGroup")[group]
    assert not props.get("SecurityGroupIngress")
    assert not [
        i
        for i in stack.of_type("AWS::EC2::SecurityGroupIngress").values()
        if ref(i["GroupId"]) == group
    ]
    assert [
        (e["IpProtocol"], e["FromPort"], e["ToPort"]) for e in props["SecurityGroupEgress"]
    ] == [("tcp", 443, 443)]


def test_the_sandbox_network_keeps_flow_logs(stack: Synthesized) -> None:
    _, flow_log = stack.one("AWS::EC2::FlowLog")
    assert flow_log["TrafficType"] == "ALL"
    assert flow_log["LogDestinationType"] == "cloud-watch-logs"


def test_sandbox_size_and_architecture_follow_the_context(custom_stack: Synthesized) -> None:
    _, definition = custom_stack.one("AWS::ECS::TaskDefinition")
    assert (definition["Cpu"], definition["Memory"]) == ("2048", "8192")
    assert definition["RuntimePlatform"]["CpuArchitecture"] == "ARM64"


def _dockerfile_args() -> dict[str, str]:
    text = DOCKERFILE.read_text(encoding="utf-8")
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.MULTILINE))


def test_the_dockerfile_pins_the_engine_by_version_and_checksum() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    args = _dockerfile_args()
    assert args["TOFU_VERSION"] == ENGINE_VERSION
    assert args["TOFU_SHA256_AMD64"] == ENGINE_SHA256["amd64"]
    assert args["TOFU_SHA256_ARM64"] == ENGINE_SHA256["arm64"]
    # The download is checked before it is unpacked
    assert text.index("sha256sum -c") < text.index("zipfile.ZipFile")
    assert re.search(
        r'^ENTRYPOINT \["/usr/bin/python3.11", "-m", "runplane.runner"\]$', text, re.MULTILINE
    )


def _dockerfile_instructions() -> str:
    """The Dockerfile with each instruction on one line."""
    return re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", _dockerfile_instructions(), flags=re.MULTILINE):
        env.update(re.findall(r"(\w+)=(\S+)", line))
    return env


def test_the_image_separates_the_runner_from_the_engine() -> None:
    text = _dockerfile_instructions()
    # The runner runs as root, said explicitly, as the task definition says
    (user,) = re.findall(r"^USER (\S+)$", text, flags=re.MULTILINE)
    assert user == RUNNER_USER == "0:0"
    # The engine user exists with the uid and gid the runner is told, without a shell
    uid, gid = ENGINE_USER.split(":")
    assert re.search(rf"groupadd --gid {gid} engine\b", text)
    assert re.search(rf"useradd --uid {uid} --gid {gid} .*--shell /usr/sbin/nologin engine\b", text)
    assert re.search(r"useradd [^&]*--no-create-home", text)
    # No other account of the image's own (the old runner user is gone)
    assert not re.search(r"\b10001\b", text)
    # The runner's and engine's environment agrees with the task definition's
    env = _dockerfile_env()
    assert {k: env[k] for k in ENGINE_ENVIRONMENT} == ENGINE_ENVIRONMENT
    # /work is root's and only traversable; /tmp is shared with the sticky bit
    assert "chown 0:0 /work" in text
    assert "chmod 0711 /work" in text
    assert "chmod 1777 /tmp" in text
    # No setuid program is left (the runner kills the engine user's processes itself)
    assert "rm -rf /var/lib/apt/lists/*" in text
    assert "-perm /6000 -exec chmod a-s" in text


def _stages() -> list[tuple[str, str]]:
    """Each build stage's FROM line and its instructions."""
    parts = re.split(r"^(FROM .+)$", _dockerfile_instructions(), flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_the_final_image_has_no_compiler_package_manager_or_pip() -> None:
    stages = dict(_stages())
    system = next(body for line, body in stages.items() if line.endswith(" AS system"))
    final_from, final = _stages()[-1]
    # Given the final stage, built on the system stage
    assert final_from == "FROM system"
    # Then it runs nothing: only copies of the build stages' results
    assert not re.search(r"^RUN ", final, flags=re.MULTILINE)
    # And the system stage installs Python and certificates, and no build tool
    installed = re.search(r"--no-install-recommends ([^&]+)&&", system)
    assert installed is not None
    assert installed.group(1).split() == [
        "python3.11-minimal",
        "libpython3.11-stdlib",
        "ca-certificates",
    ]
    assert not re.search(r"\b(gcc|g\+\+|make|build-essential|python3-pip|procps)\b", system)
    assert "pip install" not in system
    # And it removes the package manager and checks no pip or kill(1) is left
    assert "rm -rf /usr/bin/apt* /usr/bin/dpkg*" in system
    assert "test ! -e /usr/bin/pip3 && test ! -e /usr/bin/kill" in system
    # And every module ships compiled, for the read-only root filesystem
    compiled = next(body for line, body in stages.items() if line.endswith(" AS compiled"))
    assert "compileall" in compiled
    assert "/opt/runplane" in compiled


def test_the_image_is_built_with_the_configured_engine(stack: Synthesized) -> None:
    # Given the image asset of the synthesized app
    manifest = json.loads(next(stack.outdir.glob("*.assets.json")).read_text())
    (image,) = manifest["dockerImages"].values()
    source = image["source"]
    # Then it builds the runner Dockerfile for the task's platform with the pinned engine
    assert source["dockerFile"] == "functions/runner/Dockerfile"
    assert source["platform"] == "linux/amd64"
    assert source["dockerBuildArgs"] == {
        "TOFU_VERSION": ENGINE_VERSION,
        "TOFU_SHA256_AMD64": ENGINE_SHA256["amd64"],
    }
    # And its build context holds only the runner's sources
    context = stack.outdir / source["directory"]
    top = {p.relative_to(context).parts[0] for p in context.rglob("*") if p.is_file()}
    assert top == {"functions", "layers"}
    assert not list((context / "functions").glob("api"))
