"""The Cloud API's services refuse bad input, writing nothing (a second lock: the service
tier's tests/service/test_workspace_lock.py)."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import InvalidInput, StateRejected
from runplane.domain.identity import Permission, Principal
from tests.integration.conftest import Stack

LINEAGE = "9d0c3a4e-5b1f-4c2d-8e3a-0123456789ab"


def admin(stack: Stack, org: Organization, name: str = "ada") -> Principal:
    token = stack.identity.issue_token(org.id, name, list(Permission), created_by="tests").token
    return stack.identity.authenticate(f"Bearer {token}")


def test_an_organization_name_ending_in_a_newline_is_refused_and_writes_nothing(
    stack: Stack,
) -> None:
    # Given an empty table
    before = stack.scan()

    # When an organization is created with a name ending in a newline
    with pytest.raises(InvalidInput):
        stack.tenancy.create_organization("acme\n")

    # Then nothing was written
    assert stack.scan() == before


def test_a_serial_beyond_int64_is_refused_by_the_service_and_the_workspace_stays_usable(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a locked workspace, and a state whose serial no engine can hold
    ada = admin(stack, org)
    stack.workspaces.lock(ada, workspace.id, None)
    huge = json.dumps({"version": 4, "serial": 10**40, "lineage": LINEAGE}).encode()
    before = stack.scan()

    # When it is published through the service directly
    with pytest.raises(InvalidInput) as refused:
        stack.state.create(
            ada,
            workspace.id,
            serial=10**40,
            md5=hashlib.md5(huge, usedforsecurity=False).hexdigest(),
            lineage=LINEAGE,
            state_b64=base64.b64encode(huge).decode(),
        )

    # Then it is refused on the serial, nothing was written, and serial 1 still publishes
    assert refused.value.pointer == "/data/attributes/serial"
    assert stack.scan() == before
    good = json.dumps({"version": 4, "serial": 1, "lineage": LINEAGE}).encode()
    stack.state.create(
        ada,
        workspace.id,
        serial=1,
        md5=hashlib.md5(good, usedforsecurity=False).hexdigest(),
        lineage=LINEAGE,
        state_b64=base64.b64encode(good).decode(),
    )


def test_a_float_serial_inside_the_state_is_refused_and_writes_nothing(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a locked workspace, and a state whose serial is 1.0 (equal to 1 in Python)
    ada = admin(stack, org)
    stack.workspaces.lock(ada, workspace.id, None)
    raw = json.dumps({"version": 4, "serial": 1.0, "lineage": LINEAGE}).encode()
    before = stack.scan()

    # When it is published declaring serial 1
    with pytest.raises(StateRejected) as refused:
        stack.state.create(
            ada,
            workspace.id,
            serial=1,
            md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
            lineage=LINEAGE,
            state_b64=base64.b64encode(raw).decode(),
        )

    # Then it is refused and nothing was written (no version, no artifact record)
    assert "serial" in refused.value.message
    assert stack.scan() == before
