"""The standby pool over its real seams: the table's conditional writes (moto
DynamoDB), sealing under KMS (moto KMS), and the Fargate launcher (moto ECS)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest

from runplane.adapters.launchers import EcsFargateLauncher, LaunchRequest, runner_environment
from runplane.domain.standby import SealedEnvironment, StandbyRefused, StandbyStatus
from runplane.services.standby import StandbyClaims, StandbyPool
from runplane.store.standby import DynamoStandbys
from tests.integration.conftest import Stack

CLUSTER = "runplane-sandboxes"


@pytest.fixture
def ecs(stack: Stack) -> Any:
    client = boto3.client("ecs", region_name="us-east-1")
    client.create_cluster(clusterName=CLUSTER)
    client.register_task_definition(
        family="runplane-runner",
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="1024",
        memory="4096",
        # (moto sums the containers' own memory to place a task)
        containerDefinitions=[
            {"name": "runner", "image": "runner:test", "essential": True, "memory": 4096}
        ],
    )
    return client


def _pool(stack: Stack, ecs: Any, size: int = 1) -> tuple[StandbyPool, StandbyClaims]:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    # (moto's awsvpc tasks name their interface's DNS name, which needs DNS hostnames)
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="runner", Description="runner", VpcId=vpc)
    launcher = EcsFargateLauncher(
        ecs,
        cluster=CLUSTER,
        task_definition="runplane-runner",
        subnets=[subnet],
        security_groups=[group["GroupId"]],
    )
    pool = StandbyPool(
        stack.clock,
        DynamoStandbys(),
        launcher,
        stack.keys,
        size=size,
        wait=timedelta(hours=1),
        poll_seconds=2,
        control_plane_url="https://control.example",
    )
    return pool, StandbyClaims(stack.clock, DynamoStandbys(), stack.keys)


def _request(n: int) -> LaunchRequest:
    return LaunchRequest(
        run_id=f"run-{n}",
        attempt_id=f"att-{n}",
        phase="apply",
        sandbox_id=f"sbx-{n}",
        control_plane_url="https://control.example",
        bootstrap=f"rpc_bootstrap-{n}-secret",
        apply_start=f"rpc_apply-{n}",
    )


def _ticket_of(ecs: Any, task_arn: str) -> str:
    (task,) = ecs.describe_tasks(cluster=CLUSTER, tasks=[task_arn])["tasks"]
    (container,) = task["overrides"]["containerOverrides"]
    return str({e["name"]: e["value"] for e in container["environment"]}["RUNPLANE_STANDBY_TICKET"])


def test_a_phase_runs_on_a_standby_task_and_the_claim_returns_its_environment_once(
    stack: Stack, ecs: Any
) -> None:
    # Given a pool of one standby task, started by the schedule's top-up
    pool, claims = _pool(stack, ecs)
    assert pool.top_up() == {"cleared": 0, "live": 0, "started": 1}
    (standby,) = DynamoStandbys().pool()
    assert standby.status is StandbyStatus.WAITING
    assert standby.task is not None
    ticket = _ticket_of(ecs, standby.task)
    # (the table holds the ticket's hash only)
    assert ticket not in str(stack.scan())
    assert claims.claim(ticket) is None
    # When a phase is launched
    reference = pool.launch(_request(1))
    # Then it is the standby's task, and one replacement task was started
    assert reference == standby.task
    assert len(ecs.list_tasks(cluster=CLUSTER)["taskArns"]) == 2
    # And the assigned environment is sealed in the table, never in clear
    assert "rpc_bootstrap-1-secret" not in str(stack.scan())
    # And the standby's claim returns it, once
    assert claims.claim(ticket) == runner_environment(_request(1))
    with pytest.raises(StandbyRefused):
        claims.claim(ticket)
    # And canceling the run stops that task by its ARN
    pool.stop(reference)
    (stopped,) = ecs.describe_tasks(cluster=CLUSTER, tasks=[reference])["tasks"]
    assert stopped["lastStatus"] == "STOPPED"


def test_two_launches_take_two_standbys_or_start_their_own(stack: Stack, ecs: Any) -> None:
    pool, _ = _pool(stack, ecs, size=1)
    pool.top_up()
    (standby,) = DynamoStandbys().pool()
    # When the table's assignment is raced: the standby was assigned by another launch
    assert DynamoStandbys().assign(
        standby.standby_id,
        "sbx-other",
        SealedEnvironment(b"key", b"environment"),
        waiting_past=stack.clock.now(),
        claim_by=stack.clock.now() + timedelta(minutes=2),
    )
    # Then a launch finds none waiting and starts its own task
    reference = pool.launch(_request(2))
    assert reference != standby.task


def test_the_top_up_replaces_a_standby_whose_task_stopped(stack: Stack, ecs: Any) -> None:
    pool, _ = _pool(stack, ecs, size=1)
    pool.top_up()
    (standby,) = DynamoStandbys().pool()
    assert standby.task is not None
    ecs.stop_task(cluster=CLUSTER, task=standby.task, reason="crashed")
    assert pool.top_up() == {"cleared": 1, "live": 0, "started": 1}
    (replacement,) = DynamoStandbys().pool()
    assert replacement.task != standby.task
