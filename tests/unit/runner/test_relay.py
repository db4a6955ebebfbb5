"""The engine relay over real HTTP: every call reaches the control plane unchanged, a
repeated read is answered from the phase's memory until the engine writes."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import socketserver
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runplane.runner import relay as relay_module
from runplane.runner.relay import EngineRelay

WORKSPACE = "/stage/api/v2/organizations/acme/workspaces/prod"
VARS = "/stage/api/v2/workspaces/ws-1/vars"
RUNS = "/stage/api/v2/workspaces/ws-1/runs"
ENTITLEMENTS = "/stage/api/v2/organizations/acme/entitlement-set"
FIRST_READS = "/stage/api/v2/runner/first-reads"
LOCK = "/stage/api/v2/workspaces/ws-1/actions/lock"
CURRENT = "/stage/api/v2/workspaces/ws-1/current-state-version"
PING = "/stage/api/v2/ping"
SESSION_TOKEN = "rps_session"
# What the engine holds instead of the session: good for its phase's relay only.
LOCAL_SECRET = "relay-local-secret"


AUTH: dict[str, Any] = {"local_secret": LOCAL_SECRET, "authorization": lambda: SESSION_TOKEN}


@dataclass
class Upstream:
    """A control plane that records what reaches it and answers ``replies[path]``."""

    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    replies: dict[str, tuple[int, str, bytes]] = field(default_factory=dict)
    base: str = ""

    def count(self, method: str, path: str) -> int:
        return sum(1 for m, p, _, _ in self.seen if (m, p) == (method, path))


STOP_POLL = 0.02


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    state = Upstream()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.seen.append((self.command, self.path, dict(self.headers.items()), body))
            status, content_type, data = state.replies.get(
                self.path.split("?", 1)[0], (404, "application/vnd.api+json", b'{"errors":[]}')
            )
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("TFP-API-Version", "2.5")
            if status != 204:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if status != 204:
                self.wfile.write(data)

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # Polled for shutdown every 20 ms, as the relay's own server is: at the default
    # half second, each test's teardown waited out most of it.
    thread = threading.Thread(target=server.serve_forever, args=(STOP_POLL,), daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{server.server_port}/stage"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def relay(upstream: Upstream) -> Iterator[EngineRelay]:
    started = EngineRelay(upstream.base, **AUTH).start()
    yield started
    started.stop()


def call(
    relay: EngineRelay,
    method: str,
    path: str,
    body: bytes | None = None,
    token: str = LOCAL_SECRET,
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port_of(relay))
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/vnd.api+json"}
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), data


def port_of(relay: EngineRelay) -> int:
    port = urllib.parse.urlsplit(relay.base_url).port
    assert port is not None
    return port


def document(payload: dict[str, Any]) -> tuple[int, str, bytes]:
    return 200, "application/vnd.api+json", json.dumps(payload).encode()


def test_a_repeated_read_reaches_the_control_plane_once_and_answers_the_same(
    upstream: Upstream, relay: EngineRelay
) -> None:
    # Given a control plane that knows the workspace
    upstream.replies[WORKSPACE] = document({"data": {"id": "ws-1"}})

    # When the engine reads it three times
    answers = [call(relay, "GET", WORKSPACE) for _ in range(3)]

    # Then the control plane saw one read, with the engine's credentials, and every
    # answer is its answer
    assert upstream.count("GET", WORKSPACE) == 1
    assert upstream.seen[0][2]["Authorization"] == "Bearer rps_session"
    assert {(status, data) for status, _, data in answers} == {(200, b'{"data": {"id": "ws-1"}}')}
    assert all(headers["TFP-API-Version"] == "2.5" for _, headers, _ in answers)
    assert (relay.forwarded, relay.answered_from_memory) == (1, 2)


def test_the_ping_is_kept_and_relayed_without_a_body(
    upstream: Upstream, relay: EngineRelay
) -> None:
    upstream.replies[PING] = (204, "text/plain", b"")
    first, second = call(relay, "GET", PING), call(relay, "GET", PING)
    assert first[0] == second[0] == 204
    assert first[2] == second[2] == b""
    assert upstream.count("GET", PING) == 1


def test_a_read_outside_the_repeatable_ones_is_relayed_every_time(
    upstream: Upstream, relay: EngineRelay
) -> None:
    upstream.replies[RUNS] = document({"data": []})
    for _ in range(2):
        assert call(relay, "GET", RUNS)[0] == 200
    assert upstream.count("GET", RUNS) == 2


def test_a_write_is_relayed_unchanged_and_forgets_every_kept_read(
    upstream: Upstream, relay: EngineRelay
) -> None:
    # Given a workspace read once
    upstream.replies[WORKSPACE] = document({"data": {"attributes": {"locked": False}}})
    upstream.replies[LOCK] = document({"data": {"attributes": {"locked": True}}})
    call(relay, "GET", WORKSPACE)

    # When the engine locks it, then reads it again
    body = b'{"data":{"type":"","attributes":{"reason":"Locked by Terraform"}}}'
    status, _, locked = call(relay, "POST", LOCK, body)
    upstream.replies[WORKSPACE] = document({"data": {"attributes": {"locked": True}}})
    _, _, after = call(relay, "GET", WORKSPACE)

    # Then the lock reached the control plane as sent, and the read after it is fresh
    assert status == 200
    assert b'"locked": true' in locked
    method, path, headers, sent = next(s for s in upstream.seen if s[0] == "POST")
    assert (method, path, sent) == ("POST", LOCK, body)
    assert headers["Authorization"] == "Bearer rps_session"
    assert headers["Content-Type"] == "application/vnd.api+json"
    assert upstream.count("GET", WORKSPACE) == 2
    assert b'"locked": true' in after


def test_a_state_not_there_yet_is_kept_as_such(upstream: Upstream, relay: EngineRelay) -> None:
    # Given a workspace with no state yet (404), read twice
    for _ in range(2):
        assert call(relay, "GET", CURRENT)[0] == 404
    # Then the control plane was asked once
    assert upstream.count("GET", CURRENT) == 1


@pytest.mark.parametrize("status", [401, 403, 409, 500, 503])
def test_a_refused_or_failed_read_is_asked_again(
    upstream: Upstream, relay: EngineRelay, status: int
) -> None:
    upstream.replies[WORKSPACE] = (status, "application/vnd.api+json", b'{"errors": []}')
    for _ in range(2):
        assert call(relay, "GET", WORKSPACE)[0] == status
    assert upstream.count("GET", WORKSPACE) == 2


def test_another_session_never_gets_a_kept_answer(upstream: Upstream) -> None:
    # Given a relay whose runner renews its session between two reads
    sessions = ["rps_one"]
    relay = EngineRelay(
        upstream.base, local_secret=LOCAL_SECRET, authorization=lambda: sessions[-1]
    ).start()
    upstream.replies[WORKSPACE] = document({"data": {"id": "ws-1"}})
    try:
        call(relay, "GET", WORKSPACE)
        sessions.append("rps_two")
        call(relay, "GET", WORKSPACE)
    finally:
        relay.stop()
    # Then each session's read reached the control plane, with that session
    assert [headers["Authorization"] for _, _, headers, _ in upstream.seen] == [
        "Bearer rps_one",
        "Bearer rps_two",
    ]


def test_the_engine_never_sees_or_needs_the_session(upstream: Upstream, relay: EngineRelay) -> None:
    # Given a control plane that knows the workspace
    upstream.replies[WORKSPACE] = document({"data": {"id": "ws-1"}})
    # When the engine calls with the relay's own secret
    status, headers, data = call(relay, "GET", WORKSPACE)
    # Then the control plane got the session, and nothing the engine got names it
    assert status == 200
    assert upstream.seen[0][2]["Authorization"] == f"Bearer {SESSION_TOKEN}"
    assert SESSION_TOKEN not in data.decode() + json.dumps(headers)


@pytest.mark.parametrize("token", ["", "rps_session", "relay-local-secreT", LOCAL_SECRET + "x"])
def test_a_call_without_the_relays_secret_is_refused_and_reaches_nothing(
    upstream: Upstream, relay: EngineRelay, token: str
) -> None:
    # Given a process holding anything but this phase's secret (the session included)
    upstream.replies[WORKSPACE] = document({"data": {"id": "ws-1"}})
    # When it calls through the relay
    status, _, data = call(relay, "GET", WORKSPACE, token=token)
    # Then it is refused, and the control plane saw nothing
    assert status == 401
    assert json.loads(data)["errors"][0]["status"] == "401"
    assert upstream.seen == []


@pytest.mark.parametrize(
    "path",
    [
        "/stage/api/v1/runner/result",
        "/stage/api/v1/runner/uploads",
        "/stage/api/v2/../v1/runner/result",
        "/stage/api/v2/%2e%2e/v1/runner/result",
        "/stage/api/v2/%2E%2E%2Fv1/runner/heartbeat",
        "/stage/api/v2/workspaces/ws-1/..%2f..%2f..%2fv1/runner/result",
        "/stage/api/v2/./ping",
        "/api/v2/ping",
        "/stage/dashboard/runs",
        "http://127.0.0.1:9/stage/api/v2/ping",
    ],
)
def test_only_the_cloud_apis_paths_are_relayed(
    upstream: Upstream, relay: EngineRelay, path: str
) -> None:
    # Given an engine holding the relay's secret
    # When it calls a path that is not the Cloud API's (the runner's own routes, where
    # results are reported, or a way around the prefix)
    status, _, _ = call(relay, "POST", path, body=b"{}")
    # Then the relay refuses it and nothing reaches the control plane
    assert status == 404
    assert upstream.seen == []


def test_the_control_planes_own_urls_name_the_relay(upstream: Upstream, relay: EngineRelay) -> None:
    # Given a current state version whose download URL names the control plane
    download = f"{upstream.base}/api/v2/state-versions/sv-1/download"
    upstream.replies[CURRENT] = document({"data": {"attributes": {"download": download}}})
    upstream.replies["/stage/api/v2/state-versions/sv-1/download"] = (
        200,
        "application/json",
        b'{"version": 4}',
    )

    # When the engine reads it, then downloads twice what it names
    _, _, data = call(relay, "GET", CURRENT)
    named = json.loads(data)["data"]["attributes"]["download"]
    assert named == f"{relay.base_url}/api/v2/state-versions/sv-1/download"
    path = urllib.parse.urlsplit(named).path
    states = [call(relay, "GET", path)[2] for _ in range(2)]

    # Then the download came through the relay, once
    assert states == [b'{"version": 4}'] * 2
    assert upstream.count("GET", "/stage/api/v2/state-versions/sv-1/download") == 1


def test_an_answer_too_large_to_keep_is_relayed_each_time(
    upstream: Upstream, relay: EngineRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay_module, "MAX_KEPT_ANSWER", 10)
    upstream.replies[WORKSPACE] = document({"data": {"id": "a workspace of some size"}})
    for _ in range(2):
        assert call(relay, "GET", WORKSPACE)[0] == 200
    assert upstream.count("GET", WORKSPACE) == 2


def test_an_unreachable_control_plane_is_a_502_and_the_relay_keeps_serving() -> None:
    # Given a relay towards a port nothing listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    relay = EngineRelay(f"http://127.0.0.1:{port}", **AUTH).start()
    try:
        # When the engine calls twice
        answers = [call(relay, "GET", "/api/v2/ping") for _ in range(2)]
    finally:
        relay.stop()
    # Then each call is told, in a sentence, that the control plane could not be reached
    for status, _, data in answers:
        assert status == 502
        assert b"the control plane could not be reached" in data


class _OneRequestPerConnection(socketserver.BaseRequestHandler):
    """Answers one request and closes, although it said the connection stays open: a
    kept-alive connection closed while idle, as a load balancer does."""

    def handle(self) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            received += chunk
        body = b'{"data": {"id": "ws-1"}}'
        self.request.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )


def test_a_kept_alive_connection_closed_while_idle_is_replaced() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _OneRequestPerConnection)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(STOP_POLL,), daemon=True).start()
    relay = EngineRelay(f"http://127.0.0.1:{server.server_address[1]}", **AUTH).start()
    try:
        # Given one engine connection whose calls the relay sends on one upstream connection
        connection = http.client.HTTPConnection("127.0.0.1", port_of(relay))
        statuses = []
        for _ in range(3):
            connection.request(
                "GET",
                "/api/v2/workspaces/ws-1/runs",
                headers={"Authorization": f"Bearer {LOCAL_SECRET}"},
            )
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
        connection.close()
    finally:
        relay.stop()
        server.shutdown()
        server.server_close()
    # Then every call was answered, on a fresh connection each time the old one had gone
    assert statuses == [200, 200, 200]
    assert relay.forwarded == 3


def test_a_relay_refuses_an_upstream_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="not an http"):
        EngineRelay("ftp://example.com", **AUTH)


@pytest.fixture
def apply_relay(upstream: Upstream) -> Iterator[EngineRelay]:
    """The relay of an apply, whose run took the workspace's lock before it started."""
    started = EngineRelay(upstream.base, lock_held=True, **AUTH).start()
    yield started
    started.stop()


def test_a_lock_the_phase_holds_keeps_the_state_and_forgets_the_workspace(
    upstream: Upstream, apply_relay: EngineRelay
) -> None:
    # Given an apply's engine that read its workspace and current state
    upstream.replies[WORKSPACE] = document({"data": {"attributes": {"locked": False}}})
    upstream.replies[CURRENT] = document({"data": {"id": "sv-1"}})
    upstream.replies[LOCK] = document({"data": {"attributes": {"locked": True}}})
    call(apply_relay, "GET", WORKSPACE)
    call(apply_relay, "GET", CURRENT)

    # When the control plane confirms its lock, and it reads both again
    assert call(apply_relay, "POST", LOCK, b"{}")[0] == 200
    _, _, state = call(apply_relay, "GET", CURRENT)
    call(apply_relay, "GET", WORKSPACE)

    # Then the lock reached the control plane, the state came from memory (nothing can
    # have published since), and the workspace, whose answer names the lock, was asked
    assert upstream.count("POST", LOCK) == 1
    assert upstream.count("GET", CURRENT) == 1
    assert json.loads(state) == {"data": {"id": "sv-1"}}
    assert upstream.count("GET", WORKSPACE) == 2


@pytest.mark.parametrize("status", [401, 409, 500])
def test_a_refused_lock_forgets_the_state_too(
    upstream: Upstream, apply_relay: EngineRelay, status: int
) -> None:
    # Given an apply's engine that read its current state
    upstream.replies[CURRENT] = document({"data": {"id": "sv-1"}})
    upstream.replies[LOCK] = (status, "application/vnd.api+json", b'{"errors": []}')
    call(apply_relay, "GET", CURRENT)

    # When its lock is refused, and it reads the state again
    assert call(apply_relay, "POST", LOCK, b"{}")[0] == status
    call(apply_relay, "GET", CURRENT)

    # Then the control plane was asked again
    assert upstream.count("GET", CURRENT) == 2


def test_a_lock_forgets_the_state_where_the_phase_holds_no_lock(
    upstream: Upstream, relay: EngineRelay
) -> None:
    # Given an engine (not an apply's) that read its current state
    upstream.replies[CURRENT] = document({"data": {"id": "sv-1"}})
    upstream.replies[LOCK] = document({"data": {"attributes": {"locked": True}}})
    call(relay, "GET", CURRENT)

    # When it locks the workspace and reads the state again
    call(relay, "POST", LOCK, b"{}")
    call(relay, "GET", CURRENT)

    # Then the read after the lock is fresh: another writer may have published before it
    assert upstream.count("GET", CURRENT) == 2


@pytest.fixture
def reading_first(upstream: Upstream) -> Iterator[EngineRelay]:
    """A relay that asks for the phase's first reads at once."""
    started = EngineRelay(upstream.base, first_reads=True, **AUTH).start()
    yield started
    started.stop()


def first_read(path: str, status: int, payload: bytes, content_type: str) -> dict[str, Any]:
    return {
        "path": path.removeprefix("/stage/api/v2/"),
        "status": status,
        "headers": [["Content-Type", content_type], ["Content-Length", str(len(payload))]],
        "body": base64.b64encode(payload).decode(),
    }


def test_the_first_reads_come_in_one_call_and_answer_the_engine_until_it_writes(
    upstream: Upstream, reading_first: EngineRelay
) -> None:
    # Given a control plane whose first reads answer the entitlements, the workspace
    # (naming its own URL), the variables (none: 404) and a read the relay never keeps
    own_url = f"{upstream.base}/api/v2/workspaces/ws-1".encode()
    workspace = b'{"data": {"links": {"self": "' + own_url + b'"}}}'
    answers = [
        first_read(ENTITLEMENTS, 200, b'{"data": {"id": "org-1"}}', "application/vnd.api+json"),
        first_read(WORKSPACE, 200, workspace, "application/vnd.api+json"),
        first_read(VARS, 404, b'{"errors": []}', "application/vnd.api+json"),
        first_read(RUNS, 200, b'{"data": "never kept"}', "application/vnd.api+json"),
    ]
    upstream.replies[FIRST_READS] = document({"answers": answers})
    upstream.replies[RUNS] = document({"data": []})
    upstream.replies[LOCK] = document({"data": {"attributes": {"locked": True}}})
    upstream.replies[WORKSPACE] = document({"data": {"attributes": {"locked": True}}})

    # When the engine pings, reads its entitlements, workspace, variables and runs
    call(reading_first, "GET", PING)
    entitlements = call(reading_first, "GET", ENTITLEMENTS)
    read = call(reading_first, "GET", WORKSPACE)
    variables = call(reading_first, "GET", VARS)
    runs = call(reading_first, "GET", RUNS)

    # Then only the ping, one call for the first reads (with the engine's credentials)
    # and the read the relay does not keep reached the control plane
    assert [(m, p) for m, p, _, _ in upstream.seen] == [
        ("GET", PING),
        ("GET", FIRST_READS),
        ("GET", RUNS),
    ]
    assert upstream.seen[1][2]["Authorization"] == f"Bearer {SESSION_TOKEN}"
    # And each answer is the one the first reads carried, naming the relay's URLs
    assert entitlements[:1] + entitlements[2:] == (200, b'{"data": {"id": "org-1"}}')
    assert read[0] == 200
    assert f"{reading_first.base_url}/api/v2/workspaces/ws-1".encode() in read[2]
    assert read[1]["Content-Type"] == "application/vnd.api+json"
    assert variables[0] == 404
    assert json.loads(runs[2]) == {"data": []}

    # And once the engine writes, its next read of the workspace reaches the control plane
    call(reading_first, "POST", LOCK, b"{}")
    assert json.loads(call(reading_first, "GET", WORKSPACE)[2])["data"]["attributes"] == {
        "locked": True
    }
    assert upstream.count("GET", WORKSPACE) == 1
    assert upstream.count("GET", FIRST_READS) == 1


@pytest.mark.parametrize(
    "reply",
    [
        (404, "application/vnd.api+json", b'{"errors": []}'),
        (200, "application/json", b'{"answers": [{"path": "ping"}]}'),
        (200, "application/json", b"not json"),
    ],
)
def test_first_reads_refused_or_garbled_leave_the_engine_reading_one_by_one(
    upstream: Upstream, reading_first: EngineRelay, reply: tuple[int, str, bytes]
) -> None:
    # Given a control plane that refuses the first reads, or answers them garbled
    upstream.replies[FIRST_READS] = reply
    upstream.replies[WORKSPACE] = document({"data": {"id": "ws-1"}})
    upstream.replies[ENTITLEMENTS] = document({"data": {"id": "org-1"}})

    # When the engine reads its entitlements and workspace, twice
    answers = [call(reading_first, "GET", path) for path in [ENTITLEMENTS, WORKSPACE] * 2]

    # Then the first reads were asked once, and each read went up once and was kept
    assert [status for status, _, _ in answers] == [200] * 4
    assert upstream.count("GET", FIRST_READS) == 1
    assert upstream.count("GET", ENTITLEMENTS) == upstream.count("GET", WORKSPACE) == 1


UNLOCK = "/stage/api/v2/workspaces/ws-1/actions/unlock"
FORCE_UNLOCK = "/stage/api/v2/workspaces/ws-1/actions/force-unlock"
OTHER_LOCK = "/stage/api/v2/workspaces/ws-2/actions/lock"
STATE_UPLOAD = "/stage/api/v2/workspaces/ws-1/state-versions"
LOCKED = b'{"data": {"id": "ws-1", "type": "workspaces", "attributes": {"locked": true}}}'


def confirmation(path: str, status: int = 200, payload: bytes = LOCKED) -> dict[str, Any]:
    """A first reads' answer to the engine's POST to ``path``."""
    return {**first_read(path, status, payload, "application/vnd.api+json"), "method": "POST"}


@pytest.fixture
def applying(upstream: Upstream) -> Iterator[EngineRelay]:
    """The relay of an apply (its run holds the workspace's lock) that asks for the
    phase's first reads at once, as the runner starts it."""
    started = EngineRelay(upstream.base, lock_held=True, first_reads=True, **AUTH).start()
    yield started
    started.stop()


def test_an_applys_lock_and_unlock_are_answered_once_each_from_the_first_reads(
    upstream: Upstream, applying: EngineRelay
) -> None:
    # Given first reads that carry the workspace, its state version, and the control
    # plane's answers to the run's lock and unlock of that workspace
    upstream.replies[FIRST_READS] = document(
        {
            "answers": [
                first_read(WORKSPACE, 200, b'{"data": {"id": "ws-1"}}', "application/json"),
                first_read(CURRENT, 200, b'{"data": {"id": "sv-1"}}', "application/json"),
                confirmation(LOCK),
                confirmation(UNLOCK),
            ]
        }
    )
    upstream.replies[LOCK] = document({"data": {"attributes": {"locked": "asked"}}})
    upstream.replies[UNLOCK] = document({"data": {"attributes": {"locked": "asked"}}})
    upstream.replies[STATE_UPLOAD] = document({"data": {"id": "sv-2"}})

    # When the engine reads them, locks, reads its state, uploads, unlocks, and then
    # locks and unlocks once more
    call(applying, "GET", WORKSPACE)
    locked = call(applying, "POST", LOCK, b'{"data": {"attributes": {"reason": "x"}}}')
    call(applying, "GET", CURRENT)
    call(applying, "POST", STATE_UPLOAD, b"{}")
    unlocked = call(applying, "POST", UNLOCK, b"")
    again = [call(applying, "POST", path, b"") for path in (LOCK, UNLOCK)]

    # Then the first lock and unlock were the control plane's confirmations, a valid
    # JSON:API workspace document each, and neither went up
    for status, headers, data in (locked, unlocked):
        assert status == 200
        assert headers["Content-Type"] == "application/vnd.api+json"
        assert json.loads(data)["data"]["type"] == "workspaces"
    # And the state read after the lock was still the one the first reads carried
    assert upstream.count("GET", CURRENT) == 0
    # And the upload, and the second lock and unlock, went up: each answer is used once
    assert [(m, p) for m, p, _, _ in upstream.seen] == [
        ("GET", FIRST_READS),
        ("POST", STATE_UPLOAD),
        ("POST", LOCK),
        ("POST", UNLOCK),
    ]
    assert [json.loads(data)["data"]["attributes"]["locked"] for _, _, data in again] == [
        "asked",
        "asked",
    ]


@pytest.mark.parametrize(
    "path",
    [OTHER_LOCK, FORCE_UNLOCK, LOCK + "?force=true", "/stage/api/v2/workspaces/ws-1/actions/lock/"],
)
def test_a_write_the_first_reads_did_not_answer_goes_up(
    upstream: Upstream, applying: EngineRelay, path: str
) -> None:
    # Given first reads confirming the run's lock and unlock of its own workspace
    upstream.replies[FIRST_READS] = document(
        {"answers": [confirmation(LOCK), confirmation(UNLOCK)]}
    )
    upstream.replies[path.split("?", 1)[0]] = document({"data": {"id": "forwarded"}})
    call(applying, "GET", WORKSPACE)

    # When the engine POSTs to another workspace's lock, a force-unlock, or a lock path
    # that is not exactly the confirmed one
    status, _, data = call(applying, "POST", path, b"{}")

    # Then it reached the control plane, which answered it
    assert upstream.count("POST", path) == 1
    assert (status, json.loads(data)) == (200, {"data": {"id": "forwarded"}})


@pytest.mark.parametrize("status", [403, 409])
def test_a_refused_confirmation_is_not_kept_and_the_engine_meets_the_refusal(
    upstream: Upstream, applying: EngineRelay, status: int
) -> None:
    # Given first reads whose lock and unlock answers are refusals (the session lost
    # its apply authority), and a control plane that refuses them again
    refusal = b'{"errors": [{"status": "409", "title": "run not applying"}]}'
    upstream.replies[FIRST_READS] = document(
        {"answers": [confirmation(LOCK, status, refusal), confirmation(UNLOCK, status, refusal)]}
    )
    upstream.replies[LOCK] = (status, "application/vnd.api+json", refusal)
    upstream.replies[UNLOCK] = (status, "application/vnd.api+json", refusal)
    call(applying, "GET", WORKSPACE)

    # When the engine locks and unlocks
    answers = [call(applying, "POST", path, b"{}") for path in (LOCK, UNLOCK)]

    # Then both went up and the engine got the control plane's own refusal
    assert upstream.count("POST", LOCK) == upstream.count("POST", UNLOCK) == 1
    assert [(code, data) for code, _, data in answers] == [(status, refusal)] * 2


def test_first_reads_answer_no_other_write(upstream: Upstream, applying: EngineRelay) -> None:
    # Given first reads that claim to answer a state upload, and a lock as a read
    upstream.replies[FIRST_READS] = document(
        {
            "answers": [
                confirmation(STATE_UPLOAD),
                {**confirmation(LOCK), "method": "GET"},
                {**confirmation(UNLOCK), "method": "PUT"},
            ]
        }
    )
    for path in (STATE_UPLOAD, LOCK, UNLOCK):
        upstream.replies[path] = document({"data": {"id": "forwarded"}})
    call(applying, "GET", WORKSPACE)

    # When the engine uploads, locks and unlocks
    for path in (STATE_UPLOAD, LOCK, UNLOCK):
        call(applying, "POST", path, b"{}")

    # Then each reached the control plane
    assert [upstream.count("POST", path) for path in (STATE_UPLOAD, LOCK, UNLOCK)] == [1, 1, 1]


def test_a_phase_that_holds_no_lock_sends_its_lock_and_unlock(
    upstream: Upstream, reading_first: EngineRelay
) -> None:
    # Given a plan's relay (its run holds no lock) whose first reads carry lock and
    # unlock answers anyway
    upstream.replies[FIRST_READS] = document(
        {"answers": [confirmation(LOCK), confirmation(UNLOCK)]}
    )
    upstream.replies[LOCK] = document({"data": {"id": "forwarded"}})
    upstream.replies[UNLOCK] = document({"data": {"id": "forwarded"}})
    call(reading_first, "GET", WORKSPACE)

    # When its engine locks and unlocks
    answers = [call(reading_first, "POST", path, b"{}") for path in (LOCK, UNLOCK)]

    # Then both went up, as they always have
    assert upstream.count("POST", LOCK) == upstream.count("POST", UNLOCK) == 1
    assert all(json.loads(data) == {"data": {"id": "forwarded"}} for _, _, data in answers)


def test_a_renewed_session_sends_its_own_lock(upstream: Upstream) -> None:
    # Given an apply's relay whose first reads, asked with one session, confirm the lock
    sessions = ["rps_one"]
    relay = EngineRelay(
        upstream.base,
        local_secret=LOCAL_SECRET,
        authorization=lambda: sessions[-1],
        lock_held=True,
        first_reads=True,
    ).start()
    upstream.replies[FIRST_READS] = document({"answers": [confirmation(LOCK)]})
    upstream.replies[LOCK] = document({"data": {"id": "forwarded"}})
    try:
        call(relay, "GET", WORKSPACE)
        # When the runner renews the session before the engine locks
        sessions.append("rps_two")
        call(relay, "POST", LOCK, b"{}")
    finally:
        relay.stop()
    # Then the lock went up with the renewed session
    assert [h["Authorization"] for m, _, h, _ in upstream.seen if m == "POST"] == ["Bearer rps_two"]
