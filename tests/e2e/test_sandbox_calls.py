"""What a sandbox calls in a full run with the real engine: the engine reaches the Cloud
API through the runner's relay, reading each repeatable thing once per phase until it
writes, and the runner registers a phase's uploads with its result."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from runplane.local.gateway import Gateway
from runplane.store import workspaces as workspace_store
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


def test_each_phase_reads_its_workspace_and_state_once_until_it_writes(
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
    assert workspace_store.get_workspace(ws).current_state_version_id is not None
    # And the plan's engine (init, plan, show) read the workspace, its entitlements and
    # its state once each
    name = workspace_store.get_workspace(ws).name
    by_name = next(call for call in plan_calls if call.endswith(f"/workspaces/{name}"))
    entitlements = by_name.split("/workspaces/")[0] + "/entitlement-set"
    current = f"GET /api/v2/workspaces/{ws}/current-state-version"
    assert plan_calls[by_name] == 1
    assert plan_calls[entitlements] == 1
    assert plan_calls[current] == 1
    # And each phase's runner registered its uploads (the plan, plan JSON and log; the
    # apply's log) with its result: no register call of their own
    assert not [call for call in sandbox_calls if call.endswith("/register")]
    assert plan_calls["POST /api/v1/runner/result"] == 1
    assert sandbox_calls["POST /api/v1/runner/result"] == 2
    # And the apply's engine read them again once,
    apply_calls = sandbox_calls - plan_calls
    assert apply_calls[by_name] == 1
    assert apply_calls[entitlements] == 1
    # and its state once: its lock, which the run held already, changes no state
    assert apply_calls[f"POST /api/v2/workspaces/{ws}/actions/lock"] == 1
    assert apply_calls[current] == 1
    assert apply_calls[f"POST /api/v2/workspaces/{ws}/state-versions"] == 1
