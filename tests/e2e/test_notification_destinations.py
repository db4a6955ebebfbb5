"""Notification destinations on internal addresses, over real HTTP on the embedded
stack (which allows loopback receivers only because the tests ask it to): refused on
save with a typed error and nothing written, in either organization; the stack's own
gateway and moto are refused even so; ``test`` answers delivered or not, nothing else."""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from runplane.client import ApiError, Client, Connection
from tests.e2e.conftest import Local, unique
from tests.unit.adapters.servers import Receiver, closed_port


@pytest.fixture
def two_organizations(local: Local) -> list[tuple[Client, str]]:
    """A client and a new workspace in each of two organizations."""
    other_org, other_token = local.other_organization(unique("notify-org"))
    sides = []
    for token, org in ((local.admin_token, local.organization), (other_token, other_org)):
        client = Client(Connection(local.url, token, org))
        sides.append((client, client.create_workspace(unique("notify"))["id"]))
    return sides


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def internal_urls(local: Local) -> list[str]:
    gateway_port = urlsplit(local.url).port
    moto_port = os.environ["MOTO_PORT"]
    return [
        # The stack's own servers: refused although loopback receivers are allowed
        f"http://127.0.0.1:{gateway_port}/api/v1/organizations",
        f"http://127.0.0.1:{moto_port}/moto-api/reset",
        f"http://2130706433:{moto_port}/moto-api/reset",
        f"http://localhost:{moto_port}/moto-api/reset",
        f"http://[::ffff:127.0.0.1]:{moto_port}/moto-api/reset",
        # Every other internal address
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/x",
        "http://192.168.1.1/x",
        "http://172.16.0.1/x",
        "http://[fe80::1]/x",
        "http://[fd00::1]/x",
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
        "http://[::ffff:a9fe:a9fe]/x",
    ]


def destinations(client: Client, workspace: str) -> list[object]:
    return list(
        client._call("GET", f"/api/v1/workspaces/{workspace}/notifications")["destinations"]
    )


def test_internal_destinations_are_refused_on_save_in_every_organization(
    local: Local, two_organizations: list[tuple[Client, str]]
) -> None:
    for client, workspace in two_organizations:
        for url in internal_urls(local):
            # When a destination on an internal address is saved
            with pytest.raises(ApiError) as refused:
                client._call(
                    "POST",
                    f"/api/v1/workspaces/{workspace}/notifications",
                    {"name": "n", "kind": "webhook", "url": url, "events": ["applied"]},
                )
            # Then it is a typed 422 with a sentence, and nothing was written
            assert (refused.value.status, refused.value.code) == (422, "DESTINATION_NOT_ALLOWED"), (
                url
            )
            assert "public address" in refused.value.detail
            assert destinations(client, workspace) == []
    # And the stack still serves both organizations (moto was never reached)
    for client, workspace in two_organizations:
        assert client.workspace(workspace)["id"] == workspace


def test_the_test_action_says_only_delivered_or_not(
    two_organizations: list[tuple[Client, str]], receiver: Receiver
) -> None:
    client, workspace = two_organizations[0]
    base = f"/api/v1/workspaces/{workspace}/notifications"
    answers = []
    for url in (receiver.url(), f"http://127.0.0.1:{closed_port()}/x"):
        created = client._call(
            "POST", base, {"name": "t", "kind": "webhook", "url": url, "events": ["applied"]}
        )
        answers.append(client._call("POST", f"{base}/{created['id']}/actions/test"))
    open_answer, closed_answer = answers
    # The same shape either way: no status code, no error class
    assert set(open_answer) == set(closed_answer) == {"destination_id", "delivered"}
    assert (open_answer["delivered"], closed_answer["delivered"]) == (True, False)
    assert len(receiver.requests) == 1
