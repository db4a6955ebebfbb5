"""Which hosts a notification destination may name (docs/notifications.md)."""

from __future__ import annotations

import ipaddress

import pytest

from runplane.domain import notifications as rules
from runplane.domain.errors import InvalidInput

PUBLIC = rules.AddressPolicy()
LOOPBACK_ALLOWED = rules.AddressPolicy(allow_loopback=True, refused_ports=frozenset({8700, 5000}))

INTERNAL_URLS = [
    "https://127.0.0.1/x",
    "https://127.9.9.9/x",
    "https://[::1]/x",
    "https://2130706433/x",  # 127.0.0.1 as one decimal number
    "https://0x7f000001/x",
    "https://0x7f.1/x",
    "https://0177.0.0.1/x",  # octal
    "https://127.1/x",
    "https://017700000001/x",
    "https://localhost/x",
    "https://LOCALHOST./x",
    "https://hooks.localhost/x",
    "https://169.254.169.254/latest/meta-data",
    "https://[fe80::1]/x",
    "https://10.0.0.1/x",
    "https://10.255.255.255/x",
    "https://172.16.0.1/x",
    "https://192.168.1.1/x",
    "https://100.64.0.1/x",  # shared address space (carrier NAT)
    "https://0.0.0.0/x",
    "https://0/x",
    "https://[::]/x",
    "https://224.0.0.1/x",
    "https://[ff02::1]/x",
    "https://240.0.0.1/x",
    "https://255.255.255.255/x",
    "https://[fc00::1]/x",
    "https://[fd12:3456::1]/x",
    "https://[::ffff:127.0.0.1]/x",  # IPv4-mapped
    "https://[::ffff:a9fe:a9fe]/x",  # 169.254.169.254, mapped
    "https://[::ffff:10.0.0.1]/x",
    "https://[2002:7f00:1::]/x",  # 6to4 of 127.0.0.1
    "https://[64:ff9b::a00:1]/x",  # NAT64 of 10.0.0.1
    "https://[::127.0.0.1]/x",  # IPv4-compatible (reserved)
    "https://[2001:db8::1]/x",  # documentation
    "https://08.0.0.1/x",  # not an address, yet numeric: refused, not guessed
    "https://1.2.3.4.5/x",
    "https://256.0.0.1/x",
]

PUBLIC_URLS = [
    "https://hooks.slack.com/services/T/B/x",
    "https://example.com/hook",
    "https://8.8.8.8/hook",
    "https://134744072/hook",  # 8.8.8.8 as one number: public, allowed
    "https://[2606:4700:4700::1111]/hook",
    "https://[::ffff:8.8.8.8]/hook",
    "https://1.1.1.1:8443/hook",
    "https://localhost.example.com/hook",  # only localhost itself and its subdomains
]


@pytest.mark.parametrize("url", INTERNAL_URLS)
def test_internal_destinations_are_refused_with_a_typed_error(url: str) -> None:
    with pytest.raises(rules.DestinationNotAllowed) as refused:
        rules.check_destination(url, PUBLIC)
    assert isinstance(refused.value, InvalidInput)
    assert (refused.value.code, refused.value.http_status) == ("DESTINATION_NOT_ALLOWED", 422)
    assert refused.value.pointer == "/url"
    assert "/x" not in refused.value.message


@pytest.mark.parametrize("url", PUBLIC_URLS)
def test_public_destinations_are_accepted(url: str) -> None:
    rules.check_destination(url, PUBLIC)


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0x7f000001", "0x7F.0.0.1", "0177.0.0.01", "127.1", "127.0.1", "127.0.0.1."],
)
def test_every_integer_spelling_of_loopback_reads_as_loopback(host: str) -> None:
    assert rules.literal_address(host) == ipaddress.IPv4Address("127.0.0.1")


def test_names_are_not_addresses() -> None:
    assert rules.literal_address("example.com") is None
    assert rules.literal_address("1e100.net") is None
    assert rules.literal_address("0x7f.example") is None


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "::1", "::ffff:127.0.0.1", "10.0.0.1", "169.254.169.254", "fe80::1%eth0"],
)
def test_resolved_internal_addresses_are_refused(address: str) -> None:
    assert not PUBLIC.allows(ipaddress.ip_address(address), 443)


def test_loopback_allowance_admits_loopback_only_and_never_the_refused_ports() -> None:
    # The embedded stack under test: its receivers are on 127.0.0.1 ...
    rules.check_destination("http://127.0.0.1:9999/x", LOOPBACK_ALLOWED)
    rules.check_destination("http://[::1]:9999/x", LOOPBACK_ALLOWED)
    rules.check_destination("http://localhost:9999/x", LOOPBACK_ALLOWED)
    # ... but never its gateway's or moto's port, whatever the spelling of the host
    for url in (
        "http://127.0.0.1:8700/",
        "http://2130706433:5000/moto-api/reset",
        "http://localhost:5000/moto-api/reset",
        "https://example.com:8700/",
    ):
        with pytest.raises(rules.DestinationNotAllowed):
            rules.check_destination(url, LOOPBACK_ALLOWED)
    # ... and every other internal address is still refused
    for url in ("http://10.0.0.1:9999/", "http://169.254.169.254/", "http://[fe80::1]:9999/"):
        with pytest.raises(rules.DestinationNotAllowed):
            rules.check_destination(url, LOOPBACK_ALLOWED)
