"""The webhook client against real sockets on 127.0.0.1: the checked address is the one
connected to, every resolved address is checked, and one deadline bounds a POST."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from runplane.adapters.webhooks import NO_ANSWER, NOT_ALLOWED, PostResult, WebhookClient
from runplane.domain.notifications import AddressPolicy, IPAddress
from tests.unit.adapters.servers import Receiver, Trickler, closed_port

LOOPBACK = AddressPolicy(allow_loopback=True)


class FakeResolver:
    """Answers every name with fixed addresses, counting lookups."""

    def __init__(self, *addresses: str) -> None:
        import ipaddress

        self.addresses = [ipaddress.ip_address(a) for a in addresses]
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> Sequence[IPAddress]:
        self.lookups.append(host)
        return self.addresses


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def post(client: WebhookClient, url: str) -> PostResult:
    return client.post(url, b'{"event": "applied"}', {"X-Runplane-Event": "applied"})


def test_a_public_name_resolving_to_loopback_is_not_delivered(receiver: Receiver) -> None:
    # Given a name that looks public but resolves to 127.0.0.1, where a receiver listens
    resolver = FakeResolver("127.0.0.1")
    client = WebhookClient(AddressPolicy(), resolver=resolver)
    # When a delivery is made to it
    result = post(client, f"http://hooks.example.com:{receiver.port}/x")
    # Then nothing reaches the receiver and the outcome names no port or error class
    assert result == PostResult(None, NOT_ALLOWED)
    assert receiver.requests == []
    assert resolver.lookups == ["hooks.example.com"]


def test_one_internal_address_among_public_ones_refuses_the_name(receiver: Receiver) -> None:
    client = WebhookClient(AddressPolicy(), resolver=FakeResolver("8.8.8.8", "127.0.0.1"))
    assert post(client, f"http://hooks.example.com:{receiver.port}/x") == PostResult(
        None, NOT_ALLOWED
    )
    assert receiver.requests == []


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "2130706433", "[::ffff:127.0.0.1]", "localhost", "a.localhost"]
)
def test_internal_hosts_are_refused_before_any_connection(receiver: Receiver, host: str) -> None:
    resolver = FakeResolver("127.0.0.1")
    client = WebhookClient(AddressPolicy(), resolver=resolver)
    assert post(client, f"http://{host}:{receiver.port}/x") == PostResult(None, NOT_ALLOWED)
    assert receiver.requests == []


def test_the_checked_address_is_connected_to_and_the_name_kept_as_host(
    receiver: Receiver,
) -> None:
    # Given a name nothing else could resolve, resolved once by the seam to 127.0.0.1
    resolver = FakeResolver("127.0.0.1")
    client = WebhookClient(LOOPBACK, resolver=resolver)
    # When a delivery is made
    result = post(client, f"http://receiver.invalid:{receiver.port}/hooks/p?q=1")
    # Then it reached the checked address, naming the host it was sent for
    assert result == PostResult(200, None)
    assert resolver.lookups == ["receiver.invalid"]
    [(path, headers, body)] = receiver.requests
    assert path == "/hooks/p?q=1"
    assert headers["Host"] == f"receiver.invalid:{receiver.port}"
    assert body == b'{"event": "applied"}'


def test_refused_ports_are_never_reached_even_on_allowed_loopback(receiver: Receiver) -> None:
    policy = AddressPolicy(allow_loopback=True, refused_ports=frozenset({receiver.port}))
    client = WebhookClient(policy, resolver=FakeResolver("127.0.0.1"))
    assert post(client, f"http://127.0.0.1:{receiver.port}/moto-api/reset") == PostResult(
        None, NOT_ALLOWED
    )
    assert receiver.requests == []


def test_redirects_are_answered_not_followed() -> None:
    target = Receiver()
    redirecting = Receiver(status=302, location=f"http://127.0.0.1:{target.port}/elsewhere")
    try:
        client = WebhookClient(LOOPBACK)
        assert post(client, f"http://127.0.0.1:{redirecting.port}/x") == PostResult(302, None)
        assert target.requests == []
    finally:
        target.close()
        redirecting.close()


def test_a_closed_port_is_no_answer() -> None:
    client = WebhookClient(LOOPBACK)
    assert post(client, f"http://127.0.0.1:{closed_port()}/x") == PostResult(None, NO_ANSWER)


@pytest.mark.parametrize("bytes_every_seconds", [0.2, None])
def test_an_endpoint_trickling_its_answer_is_cut_at_the_total_deadline(
    bytes_every_seconds: float | None,
) -> None:
    # Given an endpoint that answers one byte at a time, forever (or never)
    trickler = Trickler(bytes_every_seconds)
    try:
        client = WebhookClient(LOOPBACK, deadline_seconds=1.5)
        # When a delivery is made to it
        started = time.monotonic()
        result = post(client, f"http://127.0.0.1:{trickler.port}/x")
        # Then it ends at the deadline, with no answer, though bytes kept coming
        elapsed = time.monotonic() - started
        assert result == PostResult(None, NO_ANSWER)
        assert 1.4 <= elapsed < 2.5
        if bytes_every_seconds:
            assert trickler.sent >= 4
    finally:
        trickler.close()


def test_a_name_that_does_not_resolve_is_no_answer() -> None:
    def failing(host: str, port: int) -> Sequence[IPAddress]:
        raise socket.gaierror("no such name")

    client = WebhookClient(AddressPolicy(), resolver=failing)
    assert post(client, "https://nowhere.invalid/x") == PostResult(None, NO_ANSWER)


def test_a_hung_resolver_costs_the_deadline_only() -> None:
    release = threading.Event()

    def hanging(host: str, port: int) -> Sequence[IPAddress]:
        release.wait(10)
        return []

    client = WebhookClient(AddressPolicy(), resolver=hanging, deadline_seconds=0.5)
    started = time.monotonic()
    try:
        assert post(client, "https://slow.example/x") == PostResult(None, NO_ANSWER)
        assert time.monotonic() - started < 1.5
    finally:
        release.set()
