"""Run triggers and notifications on the embedded stack: the CLI over real HTTP, the real
engine, the in-process event queue, and webhook receivers on 127.0.0.1 that verify
every signature."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from runplane.client import Client, Connection
from runplane.domain import notifications as rules
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cli import Capture, cli_json, connect
from tests.e2e.test_managed_runs import HELLO

T = TypeVar("T")


@dataclass
class Received:
    event: str
    run_id: str
    organization_id: str
    signed: bool


class Receiver:
    """A webhook endpoint answering from a script of statuses (then 200), checking each
    body's HMAC against the destination's secret once it is known."""

    def __init__(self, statuses: tuple[int, ...] = ()) -> None:
        self.statuses = list(statuses)
        self.secret = b""
        self.received: list[Received] = []
        receiver = self

        class Handle(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                document = json.loads(body)
                signature = self.headers.get(rules.SIGNATURE_HEADER, "")
                receiver.received.append(
                    Received(
                        document["event"],
                        document["run"]["id"],
                        document["organization_id"],
                        rules.verify(receiver.secret, body, signature),
                    )
                )
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None: ...

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/private-path"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers() -> Iterator[Callable[..., Receiver]]:
    made: list[Receiver] = []

    def make(*statuses: int) -> Receiver:
        made.append(Receiver(statuses))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def eventually(check: Callable[[], T | None], timeout: float = 90) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not hold in time")
        time.sleep(0.3)


def destination(
    capsys: Capture, argv: list[str], workspace: str, url: str, *events: str
) -> dict[str, Any]:
    created: dict[str, Any] = cli_json(
        capsys,
        "workspace",
        "notify",
        workspace,
        "create",
        "--destination-url",
        url,
        "--events",
        *events,
        *argv,
    )
    return created


def deliveries(capsys: Capture, argv: list[str], workspace: str, dest: str) -> list[Any]:
    listed = cli_json(capsys, "workspace", "notify", workspace, "deliveries", dest, *argv)
    return list(listed["deliveries"])


def test_an_applied_run_queues_its_dependent_and_notifies_through_failures(
    local: Local, capsys: Capture, receivers: Callable[..., Receiver]
) -> None:
    # Given workspaces A and B (B has planned before, so its configuration is known)
    argv = connect(local)
    a = cli_json(capsys, "workspace", "create", unique("source"), *argv)["id"]
    b = cli_json(capsys, "workspace", "create", unique("dependent"), *argv)["id"]
    first = local.client.create_run(b, HELLO, kind="plan_only")
    assert local.client.watch(first["id"], timeout=180)["status"] == "succeeded"
    # And A made a source of B through the CLI
    triggers = cli_json(capsys, "workspace", "triggers", b, "--add", a, *argv)
    assert [s["id"] for s in triggers["sources"]] == [a]
    # And A notifies a receiver that fails twice, and one that is down
    flaky = receivers(500, 500)
    flaky_dest = destination(capsys, argv, a, flaky.url, "applied")
    flaky.secret = flaky_dest["signing_secret"].encode()
    down_dest = destination(capsys, argv, a, f"http://127.0.0.1:{closed_port()}/x", "applied")
    assert "private-path" not in json.dumps(flaky_dest["url"])

    # When a run in A is approved and applies
    run = local.client.create_run(a, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=180)

    # Then it applied, whatever its receivers answer
    assert (done["status"], done["label"], done["failure"]) == ("succeeded", "Applied", None)

    # And one run was queued in B, naming A's run, and it plans with the real engine
    def triggered() -> dict[str, Any] | None:
        runs = [r for r in local.client.list_runs(b) if r["id"] != first["id"]]
        return runs[0] if runs else None

    queued = eventually(triggered)
    review = local.client.review(queued["id"])
    assert review["trigger"]["source_run_id"] == run["id"]
    assert review["trigger"]["source_workspace_id"] == a
    assert review["kind"] == "plan_and_apply"
    assert review["created_by"] == f"system:trigger:{run['id']}"
    waiting = local.client.watch(queued["id"], until=["awaiting_approval"], timeout=180)
    assert waiting["status"] == "awaiting_approval"
    local.client.decide(queued["id"], "reject", "test over")
    # And A's review lists what it queued
    assert local.client.review(run["id"])["triggered_runs"] == [
        {"workspace_id": b, "run_id": queued["id"], "skipped": None}
    ]

    # And the flaky receiver got the applied event on the third attempt, each signed
    def delivered() -> list[Any] | None:
        listed = deliveries(capsys, argv, a, flaky_dest["id"])
        return listed if listed and listed[0]["status"] == "delivered" else None

    [delivery] = eventually(delivered)
    assert [(x["attempt"], x["response_code"]) for x in delivery["attempts"]] == [
        (1, 500),
        (2, 500),
        (3, 200),
    ]
    # (backoff: each retry was scheduled later than the one before)
    waits = [x["next_attempt_in_seconds"] for x in delivery["attempts"][:2]]
    assert waits[0] < waits[1]
    assert [(r.event, r.run_id, r.signed) for r in flaky.received] == [
        ("applied", run["id"], True)
    ] * 3

    # And the receiver that is down has attempts on record, with no response code
    def attempted() -> list[Any] | None:
        listed = deliveries(capsys, argv, a, down_dest["id"])
        return listed if listed and listed[0]["attempts"] else None

    [unanswered] = eventually(attempted)
    assert unanswered["status"] in {"retrying", "delivering", "failed"}
    assert unanswered["attempts"][0]["response_code"] is None
    assert local.client.review(run["id"])["status"] == "succeeded"
    local.client.watch(queued["id"], timeout=120)


def test_one_organizations_events_never_reach_anothers_destinations(
    local: Local, capsys: Capture, receivers: Callable[..., Receiver]
) -> None:
    # Given two organizations, each with a same-named workspace notifying its own receiver
    other_org, other_token = local.other_organization(unique("other-org"))
    name = unique("twin")
    sides = []
    for argv in (connect(local), connect(local, other_token, other_org)):
        workspace = cli_json(capsys, "workspace", "create", name, *argv)["id"]
        receiver = receivers()
        created = destination(capsys, argv, workspace, receiver.url, "needs_attention")
        receiver.secret = created["signing_secret"].encode()
        token, org = argv[3], argv[5]
        sides.append((Client(Connection(local.url, token, org)), workspace, receiver))

    # When both run at the same time and await approval
    runs = [client.create_run(workspace, HELLO) for client, workspace, _ in sides]
    for (client, _, _), run in zip(sides, runs, strict=True):
        client.watch(run["id"], until=["awaiting_approval"], timeout=180)

    # Then each destination records exactly one delivery, of its own organization's run
    for (client, workspace, receiver), run in zip(sides, runs, strict=True):
        [dest] = client._call("GET", f"/api/v1/workspaces/{workspace}/notifications")[
            "destinations"
        ]
        path = f"/api/v1/workspaces/{workspace}/notifications/{dest['id']}/deliveries"

        def delivered(path: str = path, client: Client = client) -> list[Any] | None:
            listed = list(client._call("GET", path)["deliveries"])
            return listed if listed and listed[0]["status"] == "delivered" else None

        assert [d["run_id"] for d in eventually(delivered)] == [run["id"]]
        # And its receiver got that one event, signed with its own secret
        assert [(r.event, r.run_id, r.signed) for r in receiver.received] == [
            ("needs_attention", run["id"], True)
        ]
    assert len({r.received[0].organization_id for _, _, r in sides}) == 2
    for (client, _, _), run in zip(sides, runs, strict=True):
        client.decide(run["id"], "reject", "test over")
        client.watch(run["id"], timeout=60)
