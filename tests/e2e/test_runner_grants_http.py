"""The runner moves its inputs and outputs with the grants its session start handed over,
over real HTTP, and asks the routes only for a grant that is stale or refused."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runplane.domain.errors import NotFound
from runplane.domain.runner_reports import Failed
from runplane.local.gateway import Gateway
from runplane.runner import main as runner_main
from runplane.runner.main import Runner
from runplane.store import run_parts
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, new_workspace
from tests.e2e.test_runner_authority_http import open_apply_attempt

DOWNLOAD = "POST /api/v1/runner/downloads/"
BEGIN_UPLOAD = "POST /api/v1/runner/uploads"


@dataclass
class Calls:
    """The runner's calls through the gateway, and the session starts' replies."""

    routes: list[str] = field(default_factory=list)
    starts: list[dict[str, Any]] = field(default_factory=list)

    def count(self, prefix: str) -> int:
        return sum(1 for route in self.routes if route.startswith(prefix))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    seen = Calls()
    handle = Gateway.handle

    def recorded(gateway: Gateway, method: str, target: str, *rest: Any) -> dict[str, Any]:
        response = handle(gateway, method, target, *rest)
        path = target.split("?", 1)[0]
        seen.routes.append(f"{method} {path}")
        if path == "/api/v1/runner/sessions" and response.get("statusCode") == 201:
            seen.starts.append(json.loads(response["body"]))
        return response

    monkeypatch.setattr(Gateway, "handle", recorded)
    return seen


@dataclass
class Sandbox:
    env: dict[str, str]
    configuration_id: str
    plan_id: str


@pytest.fixture
def sandbox(local: Local) -> Iterator[Sandbox]:
    """An open apply attempt of a run awaiting approval, and a bootstrap handle for it
    naming the run's configuration and plan, as the workflow mints it."""
    ws = new_workspace(local, "grants")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    configuration_id = run_parts.require(run["id"], "input").body["configuration_artifact_id"]
    plan_id = run_parts.require(run["id"], "plan").body["plan_artifact_id"]
    binding, handle = open_apply_attempt(local, run["id"], [configuration_id, plan_id])
    env = {
        "RUNPLANE_CONTROL_PLANE_URL": local.url,
        "RUNPLANE_RUN_ID": run["id"],
        "RUNPLANE_ATTEMPT_ID": binding.attempt_id,
        "RUNPLANE_PHASE": "apply",
        "RUNPLANE_SANDBOX_ID": binding.sandbox_id,
        "RUNPLANE_BOOTSTRAP": handle,
    }
    yield Sandbox(env, configuration_id, plan_id)
    local.client.cancel(run["id"])


def grant_secrets(start: dict[str, Any]) -> list[str]:
    grants = [*start["grants"]["downloads"].values(), *start["grants"]["uploads"].values()]
    return [str(g[k]) for g in grants for k in ("url", "data_key", "ticket") if k in g]


def test_a_runner_moves_its_artifacts_with_its_grants_and_never_logs_them(
    local: Local,
    sandbox: Sandbox,
    calls: Calls,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("runplane", "functions"):
        caplog.set_level(logging.DEBUG, logger=name)
    services = local.stack.services
    assert services is not None
    # Given an apply runner that started its session
    runner = Runner(sandbox.env, tmp_path)
    runner.start()

    # When it downloads its plan and configuration, uploads its log, and the log is
    # given every grant's secret to print
    plan = runner.download(sandbox.plan_id)
    configuration = runner.download(sandbox.configuration_id)
    secrets = grant_secrets(calls.starts[0])
    runner.log.write("".join(f"[{secret}]\n" for secret in secrets))
    log_id, _ = runner.upload("logs", runner.log.bytes())

    # Then the downloads are the run's plan and configuration, and the log is stored
    org = runner.manifest["organization"]
    org_id = services.workspaces.organization_id_of(org)
    assert plan == services.artifacts.read(org_id, sandbox.plan_id)
    assert configuration == services.artifacts.read(org_id, sandbox.configuration_id)
    stored = services.artifacts.read(org_id, log_id)
    # And neither download nor the upload's begin called a route: one register only
    assert calls.count(DOWNLOAD) == 0
    assert "POST /api/v1/runner/uploads" not in calls.routes
    assert calls.routes.count(f"POST /api/v1/runner/uploads/{log_id}/register") == 1
    # And no URL, data key or ticket is in the runner's log, its output or the handlers'
    # and the gateway's logs (all at DEBUG)
    assert len(secrets) == 2 * 2 + 3  # two downloads' URL and key; the log's URL, key, ticket
    handler_logs = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    printed = capsys.readouterr()
    for secret in secrets:
        assert secret not in stored.decode()
        assert secret not in handler_logs
        assert secret not in printed.out + printed.err
    assert stored.count(b"[redacted]") == len(secrets)


def test_a_runner_asks_the_routes_for_a_grant_that_is_stale_or_refused(
    local: Local,
    sandbox: Sandbox,
    calls: Calls,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = local.stack.services
    assert services is not None
    # Given an apply runner whose grants from its session start are past their URLs'
    # lifetime (its clock moved on)
    stale = Runner(sandbox.env, tmp_path / "stale")
    stale.start()
    later = time.monotonic() + calls.starts[0]["grants"]["expires_in"]
    with monkeypatch.context() as clock:
        clock.setattr(time, "monotonic", lambda: later)

        # When it downloads its plan and uploads a log
        plan = stale.download(sandbox.plan_id)
        stale_log, _ = stale.upload("logs", b"uploaded after the grants went stale\n")

    # Then it asked the routes for both, and both worked
    assert calls.count(DOWNLOAD) == 1
    assert calls.routes.count(BEGIN_UPLOAD) == 1
    org_id = services.workspaces.organization_id_of(stale.manifest["organization"])
    assert plan == services.artifacts.read(org_id, sandbox.plan_id)
    assert services.artifacts.read(org_id, stale_log) == b"uploaded after the grants went stale\n"

    # Given the same session started again (a replay hands over fresh grants), whose
    # download URL and upload ticket the control plane then refuses
    refused = Runner(sandbox.env, tmp_path / "refused")
    refused.start()
    wire = calls.starts[1]["grants"]
    path, query = wire["downloads"][sandbox.plan_id]["url"].split("?", 1)
    wire["downloads"][sandbox.plan_id]["url"] = f"{path}-gone?{query}"
    wire["uploads"]["logs"]["ticket"] = calls.starts[0]["grants"]["uploads"]["logs"]["ticket"]
    refused.grants = runner_main.Grants(wire, received=time.monotonic())

    # When it downloads its plan and uploads a log
    plan = refused.download(sandbox.plan_id)
    refused_log, _ = refused.upload("logs", b"uploaded after a refused ticket\n")

    # Then each was refused once and then granted by its route
    assert calls.count(DOWNLOAD) == 2
    assert calls.routes.count(BEGIN_UPLOAD) == 2
    assert plan == services.artifacts.read(org_id, sandbox.plan_id)
    assert services.artifacts.read(org_id, refused_log) == b"uploaded after a refused ticket\n"


REGISTER_ALL = "POST /api/v1/runner/uploads/register"


def with_refused_ticket(sandbox: Sandbox, calls: Calls, workdir: Path) -> Runner:
    """A runner of the sandbox's session started again, its log's upload grant holding
    the first start's ticket (which the control plane refuses: not issued to it)."""
    runner = Runner(sandbox.env, workdir)
    runner.start()
    wire = calls.starts[-1]["grants"]
    wire["uploads"]["logs"]["ticket"] = calls.starts[0]["grants"]["uploads"]["logs"]["ticket"]
    runner.grants = runner_main.Grants(wire, received=time.monotonic())
    return runner


def test_a_runner_registers_its_uploads_in_one_call_and_falls_back_when_refused(
    local: Local, sandbox: Sandbox, calls: Calls, tmp_path: Path
) -> None:
    services = local.stack.services
    assert services is not None
    # Given an apply runner that started its session
    runner = Runner(sandbox.env, tmp_path / "together")
    runner.start()

    # When it uploads its log through the grants, registered together
    [(log_id, _)] = runner.upload_all([("logs", b"registered together\n")])

    # Then one call registered it, and it reads back
    org_id = services.workspaces.organization_id_of(runner.manifest["organization"])
    assert services.artifacts.read(org_id, log_id) == b"registered together\n"
    assert calls.routes.count(REGISTER_ALL) == 1
    assert not [r for r in calls.routes if r.endswith("/register") and r != REGISTER_ALL]

    # Given the same session started again, whose upload ticket the control plane refuses
    refused = with_refused_ticket(sandbox, calls, tmp_path / "refused")

    # When it uploads its log the same way
    [(second_id, _)] = refused.upload_all([("logs", b"registered on its own\n")])

    # Then the call registering them together was refused, and the log went up afresh
    # through begin-upload and its own register
    assert calls.routes.count(REGISTER_ALL) == 2
    assert calls.routes.count(BEGIN_UPLOAD) == 1
    assert f"POST /api/v1/runner/uploads/{second_id}/register" in calls.routes
    assert services.artifacts.read(org_id, second_id) == b"registered on its own\n"


RESULT = "POST /api/v1/runner/result"


def test_a_result_registers_the_uploads_it_names_only_with_its_report(
    local: Local, sandbox: Sandbox, calls: Calls, tmp_path: Path
) -> None:
    services = local.stack.services
    assert services is not None
    # Given an apply runner whose log went up through its grant, not yet registered
    runner = Runner(sandbox.env, tmp_path)
    runner.start()
    [(log_id, _)] = runner.upload_all([("logs", b"with the result\n")], with_result=True)
    assert not [route for route in calls.routes if route.endswith("/register")]

    # When it reports its phase, though its run is not applying yet
    with pytest.raises(runner_main.CallFailed) as refused:
        runner.report(Failed(reason="the engine failed", log_artifact_id=log_id))

    # Then the report was refused (the run moved on: final, sent once), and the log it
    # names is not registered either: the call wrote nothing
    assert refused.value.status == 409
    assert calls.routes.count(RESULT) == 1
    assert not [route for route in calls.routes if route.endswith("/register")]
    org_id = services.workspaces.organization_id_of(runner.manifest["organization"])
    with pytest.raises(NotFound):
        services.artifacts.read(org_id, log_id)


def test_a_result_whose_upload_is_refused_registers_it_afresh_and_names_it(
    local: Local, sandbox: Sandbox, calls: Calls, tmp_path: Path
) -> None:
    services = local.stack.services
    assert services is not None
    # Given an apply runner whose upload ticket the control plane refuses (another
    # session's), its log gone up through the grant
    Runner(sandbox.env, tmp_path / "first").start()
    runner = with_refused_ticket(sandbox, calls, tmp_path / "refused")
    [(log_id, _)] = runner.upload_all([("logs", b"registered afresh\n")], with_result=True)

    # When it reports its phase
    with pytest.raises(runner_main.CallFailed) as refused:
        runner.report(Failed(reason="the engine failed", log_artifact_id=log_id))

    # Then the result call refused the upload; so did its own register, so the log went
    # up afresh under a new ID with its own register, and the result was sent again
    # naming it (and refused as its run is not applying)
    assert refused.value.status == 409
    assert calls.routes.count(RESULT) == 2
    assert calls.routes.count(BEGIN_UPLOAD) == 1
    registers = [route for route in calls.routes if route.endswith("/register")]
    assert registers[0] == f"POST /api/v1/runner/uploads/{log_id}/register"
    fresh_id = registers[1].removeprefix("POST /api/v1/runner/uploads/").removesuffix("/register")
    assert len(registers) == 2
    assert fresh_id != log_id
    org_id = services.workspaces.organization_id_of(runner.manifest["organization"])
    assert services.artifacts.read(org_id, fresh_id) == b"registered afresh\n"


@pytest.mark.parametrize("count", [0, 9])
def test_registering_none_or_too_many_uploads_at_once_is_invalid(
    sandbox: Sandbox, tmp_path: Path, count: int
) -> None:
    # Given a runner with a session
    runner = Runner(sandbox.env, tmp_path)
    runner.start()
    upload = {"artifact_id": "art-x", "ticket": "t", "size": 1, "sha256": "0" * 64}
    # When it asks to register no upload, or more than a phase could have
    with pytest.raises(runner_main.CallFailed) as refused:
        runner.api.call("POST", "/api/v1/runner/uploads/register", {"uploads": [upload] * count})
    # Then the call is invalid, saying where
    assert refused.value.status == 422
    assert "uploads" in str(refused.value)


def test_an_apply_whose_start_is_refused_never_runs_the_engine(
    local: Local, sandbox: Sandbox, tmp_path: Path
) -> None:
    # Given an apply runner whose apply-start handle the control plane does not know,
    # and an engine that leaves a mark if it is ever run
    mark = tmp_path / "engine-ran"
    engine = tmp_path / "engine"
    engine.write_text(f"#!/bin/sh\ntouch {mark}\n", encoding="utf-8")
    engine.chmod(0o755)
    env = {
        **sandbox.env,
        "RUNPLANE_APPLY_START": "aps_" + "0" * 43,
        "RUNPLANE_ENGINE": str(engine),
    }
    run_id = sandbox.env["RUNPLANE_RUN_ID"]
    attempt = run_parts.require(run_id, "attempt#apply")
    run_parts.change(
        run_id,
        "attempt#apply",
        expected_state=attempt.state,
        body={**attempt.body, "lock_id": "lock-1", "fence": 1},
        now=datetime.now(UTC),
    ).commit()
    runner = Runner(env, tmp_path / "work")
    runner.start()

    # When it applies (the configuration is prepared while the start is redeemed)
    with pytest.raises(runner_main.CallFailed) as refused:
        runner.apply()

    # Then the refused start is the error, the engine never ran, and the run did not move
    assert "/api/v1/runner/apply-start" in str(refused.value)
    assert not mark.exists()
    assert 400 <= refused.value.status < 500
    assert local.client.review(run_id)["status"] == "awaiting_approval"
    if runner.relay is not None:
        runner.relay.stop()
