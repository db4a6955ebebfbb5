"""A cold start's first request imports and builds only the Router its path reaches,
and every answer is the one the full app (every Router) would give."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from functions.api import app as run_api
from functions.cloud_api import app as cloud_api
from functions.isolation import IsolatedRestResolver
from functions.route_groups import RouteGroups

ROOT = Path(__file__).resolve().parents[2]
APIS = {"run API": run_api, "Cloud API": cloud_api}
ROUTER_PACKAGES = {"run API": "functions.api.routers", "Cloud API": "functions.cloud_api"}
OPENAPI_MODELS = "aws_lambda_powertools.event_handler.openapi.models"
# Enough to build a route's service (clients, no connection): its reply comes before any I/O.
CONFIGURED = {
    "RUNPLANE_TABLE_NAME": "cold-start",
    "RUNPLANE_ARTIFACT_BUCKET": "cold-start",
    "RUNPLANE_KMS_KEY_ID": "alias/cold-start",
}


def _paths(app: IsolatedRestResolver) -> set[str]:
    return {r.path for r in [*app._static_routes, *app._dynamic_routes]}


def _first_request(module: str, event: dict[str, Any]) -> dict[str, Any]:
    """The handler's first request in a fresh interpreter: its reply, the modules it
    loaded and the AWS clients it created."""
    code = (
        "import json, sys\n"
        f"from {module} import handler\n"
        f"reply = handler(json.loads({json.dumps(json.dumps(event))}), None)\n"
        "from runplane.adapters.aws import clients_created\n"
        "loaded = {'modules': sorted(sys.modules), 'clients': sorted(clients_created())}\n"
        "print(json.dumps({'status': reply['statusCode'], **loaded}))\n"
    )
    env = {**os.environ, **CONFIGURED, "PYTHONPATH": f"{ROOT}:{ROOT}/layers"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _event(method: str, path: str, body: Any = None) -> dict[str, Any]:
    return {
        "httpMethod": method,
        "path": path,
        "resource": "/{proxy+}",
        "headers": {"Content-Type": "application/json"},
        "queryStringParameters": None,
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
        "requestContext": {"stage": "$default", "path": path},
    }


@pytest.mark.parametrize("api", APIS)
def test_each_router_table_lists_exactly_the_routes_its_router_declares(api: str) -> None:
    # Given an API's table of Routers and their routes
    module = APIS[api]

    # When each Router is built alone, and all of them together
    for name, templates in module.ROUTERS.items():
        alone = module.build_app([name])

        # Then each one serves exactly the routes the table gives it
        assert _paths(alone) == {t.rstrip("/") for t in templates}, name
    every = {t for templates in module.ROUTERS.values() for t in templates}
    # (the full app also serves the OpenAPI document: a path no Router declares)
    assert _paths(module.build_app()) - {"/api/v1/openapi.json"} == every


def test_the_run_apis_first_request_loads_only_its_router_and_its_service() -> None:
    # Given a fresh interpreter
    # When the run API's handler serves its first request, a workspace read without a caller
    first = _first_request("functions.api.app", _event("GET", "/api/v1/workspaces/ws-1"))

    # Then the workspaces route answered it (its service built, then the caller refused)
    assert first["status"] == 401
    loaded = set(first["modules"])
    assert {"functions.api.routers.workspaces", "runplane.services.workspaces"} <= loaded
    # And no other Router, their services or the OpenAPI document's models were loaded
    others = {f"functions.api.routers.{n}" for n in run_api.ROUTERS if n != "workspaces"}
    assert not others & loaded
    assert not {"runplane.services.runs", "runplane.services.schedules"} & loaded
    assert OPENAPI_MODELS not in loaded
    # And key serialization (SSH formats, bcrypt), which only the local stack's key
    # files use, was not loaded with the token verifier
    assert not {"cryptography.hazmat.primitives.serialization", "bcrypt"} & loaded
    # And reading the caller loaded neither the identity service (token store, JWT
    # verifier) nor the lifecycle that moves runs: the workspace read needs neither
    assert (
        not {
            "runplane.services.identity",
            "runplane.adapters.jwt",
            "runplane.services.lifecycle",
            "runplane.services.repositories",
        }
        & loaded
    )
    # And nothing only a runner's request needs: its authority over the workspace,
    # its attempt and its run's parts
    assert (
        not {
            "runplane.services.runner_authority",
            "runplane.services.attempts",
            "runplane.store.run_parts",
            "runplane.domain.parts",
        }
        & loaded
    )


def test_the_cloud_apis_first_request_loads_only_its_router() -> None:
    # Given a fresh interpreter
    # When the Cloud API's handler serves its first request, a state version read
    first = _first_request(
        "functions.cloud_api.handler", _event("GET", "/api/v2/state-versions/sv-1")
    )

    # Then the state route answered it (no caller: 401)
    assert first["status"] == 401
    loaded = set(first["modules"])
    assert "functions.cloud_api.state" in loaded
    # And neither the workspaces nor the runs Router (nor remote runs) was loaded
    assert not {"functions.cloud_api.workspaces", "functions.cloud_api.runs"} & loaded
    assert "runplane.services.remote_runs" not in loaded
    # And reading the caller did not load the identity service or its JWT verifier,
    # and a read created no request body models
    assert (
        not {
            "runplane.services.identity",
            "runplane.adapters.jwt",
            "functions.cloud_api.body_models",
        }
        & loaded
    )
    # And nothing only a runner's write needs: its authority over the workspace,
    # its attempt and its run's parts
    assert (
        not {
            "runplane.services.runner_authority",
            "runplane.services.attempts",
            "runplane.store.run_parts",
            "runplane.domain.parts",
        }
        & loaded
    )
    # And no repository seam: the artifact store names its records' seam for type
    # checkers only
    assert "runplane.services.repositories" not in loaded
    # And its service was built without the artifact store, which only downloads and
    # uploads use: neither the store, its envelope and keys, nor any AWS client or
    # `cryptography`, nor the capability records an upload URL's hash is named in
    assert "runplane.services.state" in loaded
    assert first["clients"] == []
    assert (
        not {
            "runplane.services.artifacts",
            "runplane.adapters.envelope",
            "runplane.adapters.keys",
            "runplane.adapters.object_store",
            "runplane.domain.artifacts",
            "runplane.domain.capabilities",
            "cryptography",
        }
        & loaded
    )
    # And nothing that moves a run: a read loads runs' records, not the transition table
    assert "runplane.store.runs" in loaded
    assert "runplane.domain.transitions" not in loaded


def _authorizer_first_request() -> set[str]:
    """The modules the authorizer has loaded once it refused its first request (no
    credentials), in a fresh interpreter."""
    code = (
        "import json, sys\n"
        "from functions.authorizer.handler import handler\n"
        "try:\n"
        "    handler({'headers': {}, 'methodArn': 'arn'}, None)\n"
        "except Exception as error:\n"
        "    refused = str(error)\n"
        "print(json.dumps({'refused': refused, 'modules': sorted(sys.modules)}))\n"
    )
    env = {**os.environ, **CONFIGURED, "PYTHONPATH": f"{ROOT}:{ROOT}/layers"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["refused"] == "Unauthorized"
    return set(result["modules"])


def test_the_authorizers_first_request_loads_neither_runner_sessions_nor_run_moves() -> None:
    # Given a fresh interpreter
    # When the authorizer refuses its first request (the identity service built)
    loaded = _authorizer_first_request()

    # Then the identity service and the token records it reads were loaded
    assert {"runplane.services.identity", "runplane.store.identity"} <= loaded
    # And not what only a runner session needs (sessions, attempts, the run's parts and
    # records), nor the lifecycle that moves runs
    assert (
        not {
            "runplane.services.capabilities",
            "runplane.services.attempts",
            "runplane.store.run_parts",
            "runplane.domain.parts",
            "runplane.store.runs",
            "runplane.domain.entities",
            "runplane.services.lifecycle",
            "runplane.services.repositories",
        }
        & loaded
    )


def test_the_dashboards_import_loads_no_recovery_rules() -> None:
    # Given a fresh interpreter
    code = (
        "import json, sys\nimport functions.dashboard.app\nprint(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, **CONFIGURED, "PYTHONPATH": f"{ROOT}:{ROOT}/layers"}

    # When the dashboard's handler module is imported
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))

    # Then its actions are loaded, but not recovery's rules (and the run parts they
    # read): they load with the first recovery form
    assert "functions.dashboard.actions" in loaded
    assert not {"runplane.domain.recovery", "runplane.domain.parts"} & loaded


def test_the_openapi_document_still_lists_every_router() -> None:
    # Given a fresh interpreter
    # When the first request is for the OpenAPI document
    first = _first_request("functions.api.app", _event("GET", "/api/v1/openapi.json"))

    # Then the full app served it, with every Router
    assert first["status"] == 200
    routers = {f"functions.api.routers.{n}" for n in run_api.ROUTERS}
    assert routers <= set(first["modules"])


def _counting(built: list[Sequence[str] | None]) -> Callable[[Sequence[str] | None], Any]:
    from aws_lambda_powertools.event_handler import Response
    from aws_lambda_powertools.event_handler.api_gateway import Router

    def build(names: Sequence[str] | None) -> IsolatedRestResolver:
        built.append(names)
        app = IsolatedRestResolver()
        for name in ("a", "b") if names is None else names:
            router = Router()  # type: ignore[no-untyped-call]
            router.get(f"/{name}/<item>")(lambda item, n=name: Response(200, body=f"{n}:{item}"))
            app.include_router(router)
        return app

    return build


def test_route_groups_build_a_group_once_and_the_full_app_for_unknown_paths() -> None:
    # Given two groups, each with one route
    built: list[Sequence[str] | None] = []
    groups = RouteGroups({"a": ("/a/<item>",), "b": ("/b/<item>",)}, _counting(built))

    # When two requests reach group a, then one an unknown path
    first = groups.resolve(_event("GET", "/a/1"), None)
    second = groups.resolve(_event("GET", "/a/2/"), None)
    unknown = groups.resolve(_event("GET", "/c/1"), None)

    # Then group a was built once, alone, and served both; the unknown path got the
    # full app's 404
    assert (first["body"], second["body"]) == ("a:1", "a:2")
    assert unknown["statusCode"] == 404
    assert built == [("a",), None]


@pytest.mark.parametrize("api", APIS)
def test_every_route_answers_as_the_full_app_answers(api: str) -> None:
    # Given every route of an API, each method, without a caller or a body
    module = APIS[api]
    full = module.build_app()
    groups = RouteGroups(module.ROUTERS, module.build_app)
    methods = ("GET", "POST", "PUT", "PATCH", "DELETE")
    paths = {re.sub(r"<[^>]+>", "x1", t) for ts in module.ROUTERS.values() for t in ts}

    # When each request is resolved through its group and through the full app (under
    # moto: a public route reads the table, and no test may reach AWS)
    with mock_aws():
        for path in sorted(paths):
            for method in methods:
                ours = _answer(groups, method, path)
                theirs = _answer(full, method, path)

                # Then the status and body (or the error raised) are the same
                assert ours == theirs, (method, path)


def _answer(resolver: Any, method: str, path: str) -> tuple[int, str] | str:
    try:
        reply = resolver.resolve(_event(method, path), None)
    except Exception as error:
        return type(error).__name__
    return reply["statusCode"], reply["body"]


def _task_step_built(step: str) -> set[str]:
    """The modules a task Lambda has loaded once its step's service is built, in a
    fresh interpreter: everything its first request holds before its first read."""
    code = (
        "import json, sys\n"
        "import functions.tasks.handlers\n"
        "from runplane.wiring import services\n"
        f"services().orchestration.{step}\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {
        **os.environ,
        **CONFIGURED,
        "RUNPLANE_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:000000000000:stateMachine:runs",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": f"{ROOT}:{ROOT}/layers",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_start_steps_first_request_loads_only_the_runner_start_service() -> None:
    # Given a fresh interpreter
    # When the task Lambda's start step builds its service (what start_runner calls)
    loaded = _task_step_built("start")

    # Then the runner start service and the clearance it takes slots with are loaded (the
    # launch controls service itself only when a launch checks them)
    assert {"runplane.services.runner_start", "runplane.domain.launch_controls"} <= loaded
    # And not the other steps' services, policy evaluation, what runners report or
    # drift findings (and the schedules' records they are kept with)
    assert (
        not {
            "runplane.services.drift",
            "runplane.store.schedules",
            # (the repository seams are read by type checkers, not at run time)
            "runplane.services.repositories",
            "runplane.services.workflow_steps",
            "runplane.services.runner_reports",
            "runplane.services.policy",
            "runplane.services.publications",
            "runplane.domain.policy",
            "runplane.domain.rego_v0",
            "runplane.domain.runner_reports",
        }
        & loaded
    )


def test_the_queue_steps_first_request_loads_the_workflow_steps_not_the_runner_ones() -> None:
    # Given a fresh interpreter
    # When the task Lambda's queue step builds its service
    loaded = _task_step_built("steps")

    # Then the workflow steps are loaded, and neither runner start nor runner reports
    assert "runplane.services.workflow_steps" in loaded
    assert not {"runplane.services.runner_start", "runplane.services.runner_reports"} & loaded


def _invocations(first_fails: bool) -> dict[str, Any]:
    """In a fresh interpreter, a handler wrapped like every Lambda handler, invoked
    three times (the first one failing, or not, after leaving a reference cycle behind;
    the collector turned off before the third): whether the collector was on during
    and after each invocation, and whether a collection then freed that cycle."""
    code = (
        "import gc, json, weakref\n"
        "from functions.observability import observed\n"
        "seen, freed = [], []\n"
        "class Node: pass\n"
        "@observed\n"
        "def handler(event, context):\n"
        "    seen.append(gc.isenabled())\n"
        "    if event.get('garbage'):\n"
        "        node = Node()\n"
        "        node.self = node\n"
        "        weakref.finalize(node, freed.append, True)\n"
        "    if event.get('fail'):\n"
        "        raise ValueError('refused')\n"
        f"for event in ({{'fail': {first_fails}, 'garbage': True}}, {{}}, 'off'):\n"
        "    if event == 'off':\n"
        "        gc.collect()\n"
        "        gc.disable()\n"
        "        event = {}\n"
        "    try:\n"
        "        handler(event, None)\n"
        "    except ValueError:\n"
        "        pass\n"
        "    seen.append(gc.isenabled())\n"
        "print(json.dumps({'seen': seen, 'freed': freed, 'frozen': gc.get_freeze_count()}))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT}/layers"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("first_fails", [False, True], ids=["replied", "raised"])
def test_only_the_processs_first_invocation_runs_with_the_collector_paused(
    first_fails: bool,
) -> None:
    # Given a fresh interpreter and a handler wrapped like every Lambda handler
    # When it is invoked three times, its first invocation leaving a reference cycle
    # behind and replying or raising
    result = _invocations(first_fails)
    seen = result["seen"]

    # Then the first invocation ran with the cyclic collector paused, and it was back
    # on once that invocation ended, by a reply or an error
    assert seen[:2] == [False, True]
    # And the second invocation ran with it on
    assert seen[2:4] == [True, True]
    # And an invocation finds the collector as the process left it: off stays off
    assert seen[4:] == [False, False]
    # And nothing was pinned: a collection freed the first invocation's cycle, and no
    # object is left frozen
    assert result["freed"] == [True]
    assert result["frozen"] == 0


def test_a_process_frozen_by_its_first_invocation_is_left_alone_for_good() -> None:
    # Given a fresh interpreter whose objects were frozen before a wrapped handler's
    # first invocation (as the test suite freezes its collection's objects)
    code = (
        "import gc, json\n"
        "from functions.observability import observed\n"
        "seen = []\n"
        "@observed\n"
        "def handler(event, context):\n"
        "    seen.append(gc.isenabled())\n"
        "gc.freeze()\n"
        "handler({}, None)\n"
        "frozen = gc.get_freeze_count()\n"
        "gc.unfreeze()\n"
        "handler({}, None)\n"
        "print(json.dumps({'seen': seen, 'frozen': frozen, 'after': gc.get_freeze_count()}))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT}/layers"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # When it is invoked, then invoked again once the objects are unfrozen
    # Then neither invocation paused the collector: the first found the process frozen,
    # and the second is not the process's first, whatever it finds
    assert result["seen"] == [True, True]
    # And the first left the frozen objects where they were
    assert result["frozen"] > 0
    assert result["after"] == 0
