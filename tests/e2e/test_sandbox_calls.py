"""What a sandbox calls in a full run with the real engine: the engine reaches the Cloud
API through the runner's relay, which asks for the reads a phase starts with (and an
apply's lock and unlock) in one call and answers each repeated read from it until the
engine writes, and the runner registers a phase's uploads with its result."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from runplane.local.gateway import Gateway
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, new_workspace


@pytest.fixture
def sandbox_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The calls made with a runner session's token, by method and path."""
    seen: Counter[str] = Counter()
    handle = Gateway.handle

    def recorded(
        gateway: Gateway, method: str, target: str, headers: dict[str, str], *rest: Any
    ) -> dict[str, Any]:
        if headers.get("Authorization", "").startswith("Bearer rps_"):
            seen[f"{method} {target.split('?', 1)[0]}"] += 1
        return handle(gateway, method, target, headers, *rest)

    monkeypatch.setattr(Gateway, "handle", recorded)
    return seen


def test_each_phase_has_its_first_reads_from_one_call_until_it_writes(
    local: Local, sandbox_calls: Counter[str]
) -> None:
    # Given a plan_and_apply run of the example, planned and approved
    ws = new_workspace(local, "relay")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    plan_calls = Counter(sandbox_calls)
    local.client.decide(run["id"], "approve")

    # When it applies
    done = local.client.watch(run["id"], until=["succeeded", "failed", "errored"], timeout=120)

    # Then it succeeded and published the state the workspace now points at
    assert done["status"] == "succeeded"
    assert (
        workspace_store.get_workspace(ws, reads=IdentityMap()).current_state_version_id is not None
    )
    # And the plan's engine (init, plan, show) had its workspace, entitlements, state and
    # variables from one call of its relay, and read none of them on its own
    name = workspace_store.get_workspace(ws, reads=IdentityMap()).name
    first_reads = "GET /api/v2/runner/first-reads"
    starts = [
        f"GET /api/v2/organizations/{local.organization}/workspaces/{name}",
        f"GET /api/v2/organizations/{local.organization}/entitlement-set",
        f"GET /api/v2/workspaces/{ws}/current-state-version",
        f"GET /api/v2/workspaces/{ws}/vars",
    ]
    assert plan_calls[first_reads] == 1
    assert not [call for call in starts if plan_calls[call]]
    # And each phase's runner registered its uploads (the plan, plan JSON and log; the
    # apply's log) with its result: no register call of their own
    assert not [call for call in sandbox_calls if call.endswith("/register")]
    assert plan_calls["POST /api/v1/runner/result"] == 1
    assert sandbox_calls["POST /api/v1/runner/result"] == 2
    # And the apply's engine had them from one call too,
    apply_calls = sandbox_calls - plan_calls
    assert apply_calls[first_reads] == 1
    assert not [call for call in starts if apply_calls[call]]
    # and its lock and unlock, which only confirm the lock the run held already, came
    # with them: neither went up on its own, and only its state upload did
    assert apply_calls[f"POST /api/v2/workspaces/{ws}/actions/lock"] == 0
    assert apply_calls[f"POST /api/v2/workspaces/{ws}/actions/unlock"] == 0
    assert apply_calls[f"POST /api/v2/workspaces/{ws}/state-versions"] == 1
    assert not [call for call in sandbox_calls if "/actions/" in call]
