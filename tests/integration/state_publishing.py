"""Publishing state on moto, as the moto tests that need a workspace's state do it. Who
may publish (the lock holder, never past a run's writer authority) is tested in the
service tier (tests/service/test_state_publication.py, test_workspace_lock.py)."""

from __future__ import annotations

import base64
import hashlib
import json

from runplane.domain.entities import Workspace
from runplane.domain.identity import Principal
from tests.integration.conftest import Stack

LINEAGE = "9d0c3a4e-0000-4000-8000-000000000001"


def raw_state(serial: int, value: str = "v") -> bytes:
    return json.dumps(
        {
            "version": 4,
            "terraform_version": "1.0.3",
            "serial": serial,
            "lineage": LINEAGE,
            "outputs": {"x": {"value": value, "type": "string"}},
            "resources": [],
        }
    ).encode()


def publish(stack: Stack, who: Principal, ws: Workspace, serial: int, value: str = "v") -> object:
    raw = raw_state(serial, value)
    return stack.state.create(
        who,
        ws.id,
        serial=serial,
        md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
        lineage=LINEAGE,
        state_b64=base64.b64encode(raw).decode(),
    )
