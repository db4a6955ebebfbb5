"""Concurrent requests from two organizations through the embedded gateway: every
request runs with its own caller's identity, whatever else is in flight."""

from __future__ import annotations

import random
import sys
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import requests

from runplane.client import Client, Connection
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO

REQUESTS = 240
THREADS = 12
SWITCH_INTERVAL = 1e-5


@dataclass(frozen=True)
class Tenant:
    name: str
    organization: str
    token: str
    workspace_id: str
    workspace_name: str
    run_id: str
    # Approval windows this tenant writes: disjoint from the other tenant's.
    windows: range


@dataclass(frozen=True)
class Outcome:
    label: str
    status: int
    body: Any


def _tenant(local: Local, name: str, organization: str, token: str, windows: range) -> Tenant:
    client = Client(Connection(local.url, token, organization))
    workspace = client.create_workspace(unique(f"{name}-ws"))
    run = client.create_run(workspace["id"], HELLO, kind="plan_only")
    return Tenant(name, organization, token, workspace["id"], workspace["name"], run["id"], windows)


def _requests_for(
    me: Tenant, other: Tenant, url: str, rng: random.Random
) -> list[tuple[str, Callable[[requests.Session], requests.Response]]]:
    """One of each kind of request ``me`` can send: on its own objects and on the other's."""
    auth = {"Authorization": f"Bearer {me.token}"}
    window = rng.choice(me.windows)

    def call(method: str, path: str, json: Any = None) -> Any:
        return lambda s: s.request(method, f"{url}{path}", headers=auth, json=json, timeout=60)

    own, theirs = me.workspace_id, other.workspace_id
    lock_body = {"data": {"type": "", "attributes": {"reason": f"by {me.name}"}}}
    describe = {
        "data": {
            "type": "workspaces",
            "attributes": {"description": f"by {me.name} #{rng.randrange(10**6)}"},
        }
    }
    own_by_name = f"/api/v2/organizations/{me.organization}/workspaces/{me.workspace_name}"
    their_by_name = f"/api/v2/organizations/{other.organization}/workspaces/{other.workspace_name}"
    return [
        (
            "patch own",
            call("PATCH", f"/api/v1/workspaces/{own}", {"approval_window_seconds": window}),
        ),
        (
            "patch theirs",
            call("PATCH", f"/api/v1/workspaces/{theirs}", {"approval_window_seconds": window}),
        ),
        ("review own", call("GET", f"/api/v1/runs/{me.run_id}")),
        ("review theirs", call("GET", f"/api/v1/runs/{other.run_id}")),
        ("list own", call("GET", f"/api/v1/workspaces/{own}/runs")),
        ("list theirs", call("GET", f"/api/v1/workspaces/{theirs}/runs")),
        ("read own", call("GET", f"/api/v2/workspaces/{own}")),
        ("read theirs", call("GET", f"/api/v2/workspaces/{theirs}")),
        ("read own by name", call("GET", own_by_name)),
        ("read theirs by name", call("GET", their_by_name)),
        ("describe own", call("PATCH", own_by_name, describe)),
        ("describe theirs", call("PATCH", their_by_name, describe)),
        ("lock own", call("POST", f"/api/v2/workspaces/{own}/actions/lock", lock_body)),
        ("unlock own", call("POST", f"/api/v2/workspaces/{own}/actions/unlock")),
        ("lock theirs", call("POST", f"/api/v2/workspaces/{theirs}/actions/lock", lock_body)),
    ]


def _check_own(me: Tenant, label: str, status: int, body: Any) -> str | None:
    """Why a response to ``me`` about its own objects shows another caller, if it does."""
    # The tenant races its own lock and unlock: 409 is an honest answer.
    if label in {"lock own", "unlock own"} and status == 409:
        return None
    if status != 200:
        return f"{label}: {status} {body}"
    if label == "patch own" and (
        body["id"] != me.workspace_id or body["approval_window_seconds"] not in me.windows
    ):
        return f"{label}: {body}"
    if label == "review own" and body["workspace_id"] != me.workspace_id:
        return f"{label}: {body['workspace_id']}"
    if label.startswith(("read own", "lock own", "unlock own", "describe own")):
        data = body["data"]
        org = data["relationships"]["organization"]["data"]["id"]
        if data["id"] != me.workspace_id or org != me.organization:
            return f"{label}: {data['id']} of {org}"
        if label == "describe own" and not data["attributes"]["description"].startswith(
            f"by {me.name} "
        ):
            return f"{label}: {data['attributes']['description']}"
    return None


def test_concurrent_callers_of_two_organizations_never_act_as_each_other(local: Local) -> None:
    # Given two organizations, each with a workspace and a run
    other_org, other_token = local.other_organization(unique("tenant-b"))
    a = _tenant(local, "a", local.organization, local.admin_token, range(1000, 2000))
    b = _tenant(local, "b", other_org, other_token, range(2000, 3000))
    rng = random.Random(20260214)
    mix: list[tuple[Tenant, str, Callable[[requests.Session], requests.Response]]] = []
    while len(mix) < REQUESTS:
        me, other = (a, b) if rng.random() < 0.5 else (b, a)
        mix.extend((me, label, send) for label, send in _requests_for(me, other, local.url, rng))
    rng.shuffle(mix)
    sessions = threading.local()

    def send(entry: tuple[Tenant, str, Callable[[requests.Session], requests.Response]]) -> Any:
        me, label, request = entry
        if not hasattr(sessions, "session"):
            sessions.session = requests.Session()
        response = request(sessions.session)
        try:
            body = response.json()
        except ValueError:
            body = response.text
        return me, Outcome(label, response.status_code, body)

    # When they all send their mixed requests at once, on many threads (the gateway
    # serves them in this process; switching threads often makes interleavings likely)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            results = list(pool.map(send, mix))
    finally:
        sys.setswitchinterval(interval)

    # Then no request failed on the server
    statuses = Counter(outcome.status for _, outcome in results)
    server_errors = [(me.name, o.label, o.body) for me, o in results if o.status >= 500]
    assert server_errors == [], server_errors
    # And nobody reached the other organization's objects: each one is a 404 to them
    crossed = [
        (me.name, o.label, o.status) for me, o in results if "theirs" in o.label and o.status != 404
    ]
    assert crossed == [], crossed
    # And every answer about a caller's own objects was about that caller's objects
    wrong = [
        f"{me.name} {why}"
        for me, o in results
        if "own" in o.label and (why := _check_own(me, o.label, o.status, o.body))
    ]
    assert wrong == [], wrong
    # And each workspace holds only values its own organization wrote...
    for tenant in (a, b):
        stored = workspace_store.get_workspace(tenant.workspace_id, reads=IdentityMap())
        assert stored.approval_window_seconds in tenant.windows
        assert (stored.description or "").startswith(f"by {tenant.name} ")
        # ...and is locked, if at all, only by its own organization's caller
        if stored.lock_holder:
            assert stored.lock_reason == f"by {tenant.name}"
    assert sum(statuses.values()) == len(mix) >= 200
    print(f"\n{len(mix)} requests on {THREADS} threads: {dict(sorted(statuses.items()))}")
