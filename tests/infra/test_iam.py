"""Least privilege: each function's role allows exactly what its code does.

The expected sets below are written out by hand from what each handler's service
calls perform; the policies CDK generates must match them action for action.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.synth import Synthesized, ref

LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
TRACING = {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}
READ = {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query"}
WRITE = {
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
}
OBJECTS = {
    "s3:AbortMultipartUpload",
    "s3:DeleteObject",
    "s3:GetObject",
    "s3:PutObject",
    "s3:ListBucket",
}
DATA_KEYS = {"kms:Decrypt", "kms:GenerateDataKey"}
RESUME = {"states:SendTaskSuccess"}
BASE = LOGS | TRACING
# A move's event is an outbox item of its transaction: only the relay and the worker's
# follow-ups send to the run-event queue.
EVENTS = {"sqs:SendMessage"}
# The outbox relay reads the table's stream (ListStreams has no resource type) and sends
# what it gives up on to its failure queue.
STREAM_READ = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
}
RELAY_FAILURES = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
# The run-event worker consumes its queue (the SQS event source).
CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}
# Starting, resuming and canceling runs (their workflows and sandboxes).
RUN_CONTROL = {
    "states:StartExecution",
    "states:SendTaskSuccess",
    "states:SendTaskFailure",
    "states:SendTaskHeartbeat",
    "ecs:StopTask",
}

SECRET = {"secretsmanager:GetSecretValue"}
# Managing workspace schedules in EventBridge Scheduler, with the role it invokes as.
SCHEDULES = {
    "scheduler:CreateSchedule",
    "scheduler:DeleteSchedule",
    "scheduler:GetSchedule",
    "scheduler:UpdateSchedule",
    "iam:PassRole",
}

EXPECTED_ACTIONS: dict[str, set[str]] = {
    "functions.authorizer.handler.handler": BASE | {"dynamodb:BatchGetItem", "dynamodb:GetItem"},
    # The GitHub webhook's signature is checked with the webhook secret; it starts the
    # source workflow.
    "functions.api.app.handler": BASE
    | READ
    | WRITE
    | OBJECTS
    | DATA_KEYS
    | RUN_CONTROL
    | SECRET
    | SCHEDULES
    # The OpenID Connect issuer's JWKS; and the runner's endpoints (this function's)
    # redeem the run credentials that need a token signed, or a workspace's role
    # assumed with its external ID, tagged with the run.
    | {"kms:GetPublicKey", "kms:Sign"}
    | {"sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"},
    # A schedule fire creates a plan-only run (no variables) and starts its workflow; the
    # auto-destroy sweep also approves opted-in destroy runs (its notices are outbox items).
    "functions.scheduler.handler.fire": BASE | READ | WRITE | RESUME | {"states:StartExecution"},
    # The audit export reads each day's records from the index, reads and moves its
    # watermark, learns the table's creation (the first export's start) and puts objects.
    "functions.audit_export.handler.export": BASE
    | {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DescribeTable"}
    | {"s3:PutObject"},
    # Remote operations create, decide and cancel managed runs as the run API does.
    "functions.cloud_api.handler.handler": BASE | READ | WRITE | OBJECTS | DATA_KEYS | RUN_CONTROL,
    # Sessions and decisions; logs read from artifacts; a decision resumes the approval wait;
    # hosted-UI sign-in reads its app client's secret.
    "functions.dashboard.app.handler": BASE
    | READ
    | WRITE
    | RESUME
    | {"s3:GetObject", "s3:ListBucket", "kms:Decrypt", "secretsmanager:GetSecretValue"},
    "functions.tasks.handlers.queue_run": BASE | READ | WRITE,
    "functions.tasks.handlers.wait_for_writer": BASE | READ | WRITE | RESUME,
    "functions.tasks.handlers.start_runner": BASE
    | READ
    | WRITE
    | RESUME
    | {"ecs:RunTask", "ecs:TagResource", "iam:PassRole"},
    "functions.tasks.handlers.evaluate_policy": BASE
    | READ
    | WRITE
    | RESUME
    | {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"},
    "functions.tasks.handlers.finish_plan": BASE | READ | WRITE | RESUME,
    "functions.tasks.handlers.request_approval": BASE | READ | WRITE,
    "functions.tasks.handlers.wait_for_approval": BASE | READ | WRITE | RESUME,
    "functions.tasks.handlers.arbitrate_expiry": BASE | READ | WRITE | RESUME,
    "functions.tasks.handlers.fail_run": BASE | READ | WRITE | RESUME | {"ecs:StopTask"},
    # A stopped sandbox task ends its run (handing the workspace on) and fails the
    # attempt's wait; it calls no ECS API: the task has stopped already.
    "functions.sandboxes.handler.stopped": BASE
    | READ
    | WRITE
    | RESUME
    | {"states:SendTaskFailure"},
    # Run triggers create and start runs; deliveries unseal destination secrets; a pull
    # request's run that ended starts its commit-status report (the source workflow):
    # only this worker does, not every function that can end a run.
    "functions.events.handler.handler": BASE
    | READ
    | WRITE
    | EVENTS
    | CONSUME
    | {"kms:Decrypt", "states:StartExecution"},
    # The source workflow: only its steps read the GitHub App's private key.
    "functions.tasks.source_handlers.ingest_source": BASE
    | READ
    | WRITE
    | OBJECTS
    | DATA_KEYS
    | SECRET,
    # Both post a pull request's comment and check runs, read from its runs' plan views.
    "functions.tasks.source_handlers.create_source_runs": BASE
    | READ
    | WRITE
    | {"states:StartExecution"}
    | SECRET
    | {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"},
    "functions.tasks.source_handlers.fail_source": BASE | READ | WRITE,
    "functions.tasks.source_handlers.report_commit_status": BASE
    | READ
    | WRITE
    | SECRET
    | {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"},
    # The outbox relay: stream records in, run events out.
    "functions.events.relay.handler": BASE | STREAM_READ | EVENTS | RELAY_FAILURES,
}


def test_every_entry_point_is_covered_by_an_expectation(stack: Synthesized) -> None:
    assert set(stack.functions()) == set(EXPECTED_ACTIONS)


@pytest.mark.parametrize("handler", sorted(EXPECTED_ACTIONS))
def test_each_function_role_allows_exactly_its_actions(stack: Synthesized, handler: str) -> None:
    # Given the function running ``handler``
    role = stack.role_of(handler)
    # Then its role allows exactly the expected actions
    assert stack.actions(role) == EXPECTED_ACTIONS[handler]
    # And no other function shares the role
    sharing = [h for h in stack.functions() if stack.role_of(h) == role]
    assert sharing == [handler]
    # And it has no managed policies (AWS-managed or otherwise)
    assert not stack.of_type("AWS::IAM::Role")[role].get("ManagedPolicyArns")


def service_of(stack: Synthesized, role_arn: Any) -> str | None:
    """The service principal that may assume the role ``role_arn`` refers to."""
    role = ref(role_arn)
    if role is None:
        return None
    assume = stack.of_type("AWS::IAM::Role")[role]["AssumeRolePolicyDocument"]
    return str(assume["Statement"][0]["Principal"].get("Service"))


def test_scheduler_may_only_invoke_the_fire_function(stack: Synthesized) -> None:
    # Given the role EventBridge Scheduler assumes
    (role,) = [
        name
        for name, props in stack.of_type("AWS::IAM::Role").items()
        if service_of(stack, {"Fn::GetAtt": [name, "Arn"]}) == "scheduler.amazonaws.com"
    ]
    # Then it may invoke exactly the fire-schedule function, and nothing else
    grants = list(stack.grants(role))
    fire = stack.function("functions.scheduler.handler.fire")["LogicalId"]
    assert [(action, ref(resource)) for action, resource, _ in grants] == [
        ("lambda:InvokeFunction", fire)
    ]


def _resource_owner(stack: Synthesized, resource: Any) -> str | None:
    """The logical ID a granted resource belongs to (through a Join or a reference)."""
    found = ref(resource)
    if found:
        return found
    if isinstance(resource, dict) and "Fn::Join" in resource:
        for part in resource["Fn::Join"][1]:
            owner = ref(part)
            if owner and owner not in {"AWS::Partition", "AWS::Region", "AWS::AccountId"}:
                return owner
    return None


def _event_queue(stack: Synthesized, suffix: str = "-run-events") -> str:
    (queue,) = [
        k
        for k, p in stack.of_type("AWS::SQS::Queue").items()
        if str(p.get("QueueName", "")).endswith(suffix)
    ]
    return queue


@pytest.mark.parametrize("handler", sorted(EXPECTED_ACTIONS))
def test_each_action_names_our_resources(stack: Synthesized, handler: str) -> None:
    table, _ = stack.one("AWS::DynamoDB::Table")
    key, _ = stack.data_key()
    (bucket,) = [
        k
        for k, p in stack.of_type("AWS::S3::Bucket").items()
        if "LoggingConfiguration" in p  # the artifact bucket logs to the access-log bucket
    ]
    cluster, _ = stack.one("AWS::ECS::Cluster")
    definition, _ = stack.one("AWS::ECS::TaskDefinition")
    queue = _event_queue(stack)
    relay_failures = _event_queue(stack, "-run-events-relay-failures")
    secrets = set(stack.of_type("AWS::SecretsManager::Secret"))
    owners = {
        "dynamodb": {table},
        "kms": {key, *stack.signing_keys()},
        "s3": {bucket},
        "sqs": {queue, relay_failures},
        "secretsmanager": secrets,
    }
    for action, resource, condition in stack.grants(stack.role_of(handler)):
        service = action.split(":")[0]
        if service == "xray" or action == "dynamodb:ListStreams":
            # Then only tracing and listing streams are granted on every resource (they
            # have no resource types)
            assert resource == "*"
            continue
        assert resource != "*", f"{handler}: {action} on every resource"
        if service in owners:
            assert _resource_owner(stack, resource) in owners[service], (handler, action)
        if action == "ecs:RunTask":
            assert ref(resource) == definition
            assert ref(condition["ArnEquals"]["ecs:cluster"]) == cluster
        if action == "ecs:StopTask":
            assert _resource_owner(stack, resource) == cluster
            assert ref(condition["ArnEquals"]["ecs:cluster"]) == cluster
        if action == "iam:PassRole" and service_of(stack, resource) == "scheduler.amazonaws.com":
            assert condition == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}
        elif action == "iam:PassRole":
            assert condition == {"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}
        if service == "scheduler":
            arn_tail = resource["Fn::Join"][1][-1]
            assert arn_tail.startswith(":schedule/"), (handler, action)
            assert arn_tail.endswith("-schedules/*"), (handler, action)
        if action == "ecs:TagResource":
            assert condition == {"StringEquals": {"ecs:CreateAction": "RunTask"}}


def test_object_grants_are_limited_to_the_prefixes_each_api_uses(stack: Synthesized) -> None:
    def prefixes(handler: str) -> set[str]:
        found = set()
        for action, resource, _ in stack.grants(stack.role_of(handler)):
            if action == "s3:GetObject":
                found.add(resource["Fn::Join"][1][-1])
        return found

    # The run API reads and writes artifacts and the configuration inbox
    assert prefixes("functions.api.app.handler") == {"/artifacts/*", "/inbox/*"}
    # The Cloud API only artifacts (state versions), and policy evaluation only reads them
    assert prefixes("functions.cloud_api.handler.handler") == {"/artifacts/*"}
    assert prefixes("functions.tasks.handlers.evaluate_policy") == {"/artifacts/*"}


def test_the_sandbox_may_only_be_started_with_its_own_roles(stack: Synthesized) -> None:
    # Given the runner task definition's roles
    _, definition = stack.one("AWS::ECS::TaskDefinition")
    roles = {ref(definition["TaskRoleArn"]), ref(definition["ExecutionRoleArn"])}
    # Then StartRunner may pass exactly those two roles
    passed = {
        ref(resource)
        for action, resource, _ in stack.grants(
            stack.role_of("functions.tasks.handlers.start_runner")
        )
        if action == "iam:PassRole"
    }
    assert passed == roles


def test_the_runner_task_role_has_no_permissions_at_all(stack: Synthesized) -> None:
    # Given the role the sandbox's containers run with
    _, definition = stack.one("AWS::ECS::TaskDefinition")
    task_role = ref(definition["TaskRoleArn"])
    assert task_role is not None
    # Then nothing is granted to it: the runner works through session-bound URLs only
    assert stack.statements(task_role) == []
    assert not stack.of_type("AWS::IAM::Role")[task_role].get("ManagedPolicyArns")


def test_the_execution_role_reaches_neither_table_bucket_nor_key(stack: Synthesized) -> None:
    # Given the role ECS pulls the image and writes logs with
    _, definition = stack.one("AWS::ECS::TaskDefinition")
    execution_role = ref(definition["ExecutionRoleArn"])
    assert execution_role is not None
    # Then it may only pull images and write logs
    services = {action.split(":")[0] for action in stack.actions(execution_role)}
    assert services <= {"ecr", "logs"}
