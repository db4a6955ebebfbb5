"""The AWS-style standby pool on the embedded stack: runner processes started ahead with
only a ticket claim their phase over real HTTP through the gateway (docs/standby.md).

The session's stack turns the pool on for this module (``use_standby_pool``) and off
after it. What the claims answered is read from the gateway's own request log (the
status line of each HTTP request, never a body); the tickets from the standbys'
process environments, where their launch put them.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runplane.client import ApiError, Client, Connection
from runplane.domain.standby import Standby, StandbyStatus
from runplane.runner.standby_pool import CLAIM_PATH, TICKET
from runplane.store import run_parts
from runplane.store.prefetch import IdentityMap
from runplane.store.standby import DynamoStandbys
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO, config, new_workspace

POOL_SIZE = 2
CLAIM_LINE = re.compile(r'"POST ' + re.escape(CLAIM_PATH) + r' HTTP/1\.[01]" (\d{3})')


@pytest.fixture(scope="module")
def pooled(embedded: Local) -> Iterator[Local]:
    embedded.stack.activate()
    embedded.stack.use_standby_pool(POOL_SIZE)
    try:
        yield embedded
    finally:
        embedded.stack.use_standby_pool(0)


class _GatewayLog(logging.Handler):
    """The gateway's request lines (method, path, status), as its server logs them."""

    def __init__(self) -> None:
        super().__init__(level=0)
        self.lines: list[str] = []
        self.everything: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.getMessage()} {record.__dict__}"
        self.everything.append(text)
        if record.name == "runplane.local.gateway":
            self.lines.append(record.getMessage())

    def claims(self) -> list[int]:
        return [int(m.group(1)) for line in self.lines if (m := CLAIM_LINE.search(line))]


@pytest.fixture
def gateway_log() -> Iterator[_GatewayLog]:
    handler = _GatewayLog()
    gateway = logging.getLogger("runplane.local.gateway")
    level = gateway.level
    gateway.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger().removeHandler(handler)
        gateway.setLevel(level)


def _waiting() -> dict[str, Standby]:
    """The pool's waiting standbys by their task reference."""
    return {
        s.task: s
        for s in DynamoStandbys().pool()
        if s.status is StandbyStatus.WAITING and s.task is not None
    }


def _ticket_of(reference: str) -> str:
    """A waiting standby's ticket, from the environment its launch started it with."""
    pid = int(reference.removeprefix("pid:"))
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    (ticket,) = [
        e.split(b"=", 1)[1].decode() for e in environ if e.startswith(f"{TICKET}=".encode())
    ]
    return ticket


def _claim(local: Local, ticket: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(  # noqa: S310 - the stack's loopback gateway
        local.url + CLAIM_PATH,
        data=json.dumps({"ticket": ticket}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310
            return reply.status, json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _sandbox_ref(run_id: str, phase: str) -> str:
    return str(
        run_parts.require(run_id, f"attempt#{phase}", reads=IdentityMap()).body["sandbox_ref"]
    )


def _runner_logs(local: Local, references: set[str]) -> str:
    """The runner's own output of each of these sandboxes (kept beside its directory)."""
    assert local.stack.launcher is not None
    texts = []
    for reference in references:
        workdir = local.stack.launcher.sandboxes[reference]
        texts.append(workdir.with_name(f"{workdir.name}.log").read_text(errors="replace"))
    return "\n".join(texts)


def test_both_phases_run_on_standbys_that_claimed_them_over_http_once(
    pooled: Local, gateway_log: _GatewayLog
) -> None:
    # Given a pool of two waiting standbys, each started with its ticket and no run
    launcher = pooled.stack.launcher
    assert launcher is not None
    before = _waiting()
    assert len(before) == POOL_SIZE
    tickets = {reference: _ticket_of(reference) for reference in before}
    for reference in before:
        environ = Path(f"/proc/{reference.removeprefix('pid:')}/environ").read_bytes()
        assert b"RUNPLANE_BOOTSTRAP=" not in environ
        assert b"RUNPLANE_RUN_ID=" not in environ
    started_before = len(launcher.pool_standbys)

    # When a plan-and-apply run of the example is planned, approved and applied
    ws = new_workspace(pooled, "pooled")
    run = pooled.client.create_run(ws, HELLO)
    pooled.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    pooled.client.decide(run["id"], "approve")
    done = pooled.client.watch(run["id"], timeout=120)

    # Then it applied, each phase on a standby of the pool, not on a launched runner
    assert done["status"] == "succeeded"
    plan_ref, apply_ref = _sandbox_ref(run["id"], "plan"), _sandbox_ref(run["id"], "apply")
    assert plan_ref != apply_ref
    assert {plan_ref, apply_ref} <= set(launcher.pool_standbys)
    assert plan_ref in before  # the plan's launch found the pool full
    # And each claimed its phase once over HTTP: two claims answered 200, no refusal
    statuses = gateway_log.claims()
    assert statuses.count(200) == 2
    assert 401 not in statuses
    assert set(statuses) <= {200, 204}
    # And the claimed standbys' records are gone, and the pool was refilled
    remaining = {s.task for s in DynamoStandbys().pool()}
    assert plan_ref not in remaining
    assert apply_ref not in remaining
    assert len(_waiting()) == POOL_SIZE
    assert len(launcher.pool_standbys) == started_before + 2

    # When the plan's spent ticket is presented again, and a forged one for a waiting standby
    records = DynamoStandbys().pool()
    used = _claim(pooled, tickets[plan_ref])
    waiting_id = next(iter(_waiting().values())).standby_id
    forged = _claim(pooled, f"rsb_{waiting_id}.{secrets.token_urlsafe(32)}")
    garbage = _claim(pooled, "rsb_not-a-standby.whatever")

    # Then each is refused with 401 and nothing was written
    for status, body in (used, forged, garbage):
        assert status == 401
        assert "environment" not in body
        assert json.dumps(body).find("STANDBY_REFUSED") >= 0
    assert DynamoStandbys().pool() == records

    # And no ticket, handle or environment reached this process's logs or the runners' own
    logged = "\n".join(gateway_log.everything)
    runners = _runner_logs(pooled, {plan_ref, apply_ref})
    for text in (logged, runners):
        for secret in tickets.values():
            assert secret not in text
        for marker in ("rpc_", "rps_", "RUNPLANE_BOOTSTRAP", "RUNPLANE_STANDBY_TICKET"):
            assert marker not in text, marker


def _output_config(tmp_path: Path, name: str) -> Path:
    return config(tmp_path, f'output "{name}" {{ value = "{name}" }}\n', name=name)


def test_two_organizations_runs_at_once_each_get_their_own_standby(
    pooled: Local, tmp_path: Path
) -> None:
    if not pooled.stack.isolates_tenants:
        pytest.skip("the stack serves one organization when its sandboxes are not isolated")
    launcher = pooled.stack.launcher
    assert launcher is not None
    # Given two organizations, each with a workspace and a configuration of its own
    other_name, other_token = pooled.other_organization(unique("pooled-org"))
    other = Client(Connection(pooled.url, other_token, other_name))
    ours = pooled.client
    cases = [
        (ours, str(ours.create_workspace(unique("pooled-a"))["id"]), "ours"),
        (other, str(other.create_workspace(unique("pooled-b"))["id"]), "theirs"),
    ]
    pool_before = set(_waiting())

    # When both plan at once
    results: dict[str, dict[str, Any]] = {}

    def plan(client: Client, workspace: str, name: str) -> None:
        run = client.create_run(workspace, _output_config(tmp_path, name), kind="plan_only")
        results[name] = client.watch(run["id"], timeout=120)

    threads = [threading.Thread(target=plan, args=case) for case in cases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)

    # Then each planned its own configuration on a standby of its own
    references = {}
    for client, _, name in cases:
        done = results[name]
        assert done["status"] == "succeeded"
        assert done["plan"]["summary"]["output_changes"] == {name: "create"}
        references[name] = _sandbox_ref(done["id"], "plan")
        # (and the other organization cannot see the run)
        stranger = other if client is ours else ours
        with pytest.raises(ApiError) as refused:
            stranger.review(done["id"])
        assert refused.value.status == 404
    assert references["ours"] != references["theirs"]
    assert set(references.values()) <= set(launcher.pool_standbys)
    assert references["ours"] in pool_before or references["theirs"] in pool_before
    # And the pool is full again
    assert len(_waiting()) == POOL_SIZE
