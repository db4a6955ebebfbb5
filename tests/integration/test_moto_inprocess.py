"""The embedded stack's Step Functions and Lambda requests reach moto without a socket.

The workflow's starts and task results, and the interpreter's Lambda invocations,
are served by moto's application on the calling thread (``moto_inprocess``); the
interpreter builds its Lambda client once (``moto_stepfunctions``)."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer

from runplane.adapters.object_store import ObjectChanged, ObjectMissing, ObjectStore
from runplane.local import moto_inprocess
from runplane.local.moto_stepfunctions import clear_lambda_routes, enable_step_functions
from runplane.local.stack import _configure_moto, free_port
from tests.integration.server_connections import accepted_connections

ROLE = "arn:aws:iam::123456789012:role/runplane-test-sfn"


def test_a_workflow_and_its_lambda_tasks_run_without_a_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given moto's server, served in process under both names the stack uses for it
    connections = accepted_connections(monkeypatch)
    port = free_port()
    monkeypatch.setitem(os.environ, "MOTO_PORT", str(port))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    _configure_moto(endpoint)
    assert server._server is not None
    served = (endpoint, f"http://localhost:{port}")
    for name in served:
        moto_inprocess.serve_in_process(name, server._server.app)
    # And two Lambda tasks routed to handlers that note the thread they ran on
    ran_on: list[str] = []

    def double(event: dict[str, Any], context: Any) -> dict[str, Any]:
        ran_on.append(threading.current_thread().name)
        return {"n": event["n"] * 2}

    enable_step_functions({"double": double})
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": "double", "Payload.$": "$"},
        "OutputPath": "$.Payload",
    }
    definition = {
        "StartAt": "One",
        "States": {"One": {**task, "Next": "Two"}, "Two": {**task, "End": True}},
    }
    before = len(connections)
    try:
        sfn = boto3.session.Session(region_name="us-east-1").client(
            "stepfunctions", endpoint_url=endpoint
        )
        machine = sfn.create_state_machine(
            name="inprocess", definition=json.dumps(definition), roleArn=ROLE
        )["stateMachineArn"]

        # When two executions run to their end
        outputs = []
        for name in ("first", "second"):
            arn = sfn.start_execution(
                stateMachineArn=machine, name=name, input=json.dumps({"n": 3})
            )["executionArn"]
            deadline = time.monotonic() + 30
            while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
                assert time.monotonic() < deadline, "the execution did not end"
                time.sleep(0.05)
            outputs.append((described["status"], json.loads(described.get("output") or "null")))

        # Then both succeeded with the handlers' results, every task ran on its
        # execution's own thread, and no request opened a connection
        assert outputs == [("SUCCEEDED", {"n": 12}), ("SUCCEEDED", {"n": 12})]
        assert len(ran_on) == 4
        assert len(connections) == before
    finally:
        clear_lambda_routes()
        for name in served:
            moto_inprocess.stop_serving(name)
        requests.post(f"{endpoint}/moto-api/reset", timeout=30)
        server.stop()


def test_the_interpreter_builds_one_lambda_client_per_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the stack's Step Functions patches
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    enable_step_functions({})
    client_for = lambda_eval_utils.boto_client_for  # type: ignore[attr-defined]

    # When the interpreter asks for a Lambda client twice, then for another server's
    monkeypatch.setitem(os.environ, "MOTO_PORT", "5101")
    first = client_for(region="us-east-1", service="lambda")
    again = client_for(region="us-east-1", service="lambda")
    monkeypatch.setitem(os.environ, "MOTO_PORT", "5102")
    other = client_for(region="us-east-1", service="lambda")

    # Then the first is reused, and the other server gets its own, naming it
    assert again is first
    assert other is not first
    assert other.meta.endpoint_url == "http://localhost:5102"


def test_the_stacks_s3_requests_run_without_a_socket_and_stream_in_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given moto's server served in process, and the artifact store's object store on it
    connections = accepted_connections(monkeypatch)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    assert server._server is not None
    moto_inprocess.serve_in_process(endpoint, server._server.app)
    try:
        s3 = boto3.session.Session(region_name="us-east-1").client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="inprocess")
        objects = ObjectStore(s3, "inprocess")
        body = bytes(range(256)) * 40_000  # over two multipart parts

        # When an object is uploaded in parts, read back in pieces, looked up, and a
        # missing one and a changed one are asked for
        sent = (body[i : i + 65_536] for i in range(0, len(body), 65_536))
        stored = objects.upload_stream("dir/a b", sent)
        with objects.open("dir/a b", stored.etag) as read:
            pieces = []
            while piece := read(100_000):
                pieces.append(piece)
        head = objects.head("dir/a b")
        with pytest.raises(ObjectMissing):
            objects.head("dir/missing")
        with pytest.raises(ObjectChanged), objects.open("dir/a b", '"another-etag"'):
            pass

        # Then the object came back whole, in pieces no larger than asked for, with
        # moto's answers and errors, and no request opened a connection
        assert b"".join(pieces) == body
        assert max(len(piece) for piece in pieces) == 100_000
        assert (head.size, head.etag) == (len(body), stored.etag)
        assert connections == []
    finally:
        moto_inprocess.stop_serving(endpoint)
        requests.post(f"{endpoint}/moto-api/reset", timeout=30)
        server.stop()
