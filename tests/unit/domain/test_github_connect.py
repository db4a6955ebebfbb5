"""The rules that decide whether a GitHub user may connect an installation."""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from runplane.domain.errors import GitHubConnectRefused, InvalidInput
from runplane.domain.github_connect import (
    ConnectBinding,
    GitHubAccount,
    GitHubUser,
    account_of,
    authorize_url,
    install_url,
    installation_from_query,
    require_administrator,
)

ALICE = GitHubUser("alice", 11)
ORG = GitHubAccount("acme", "Organization", 900)


def test_state_and_verifier_come_from_the_secret_and_the_challenge_is_s256() -> None:
    # Given two connect secrets
    one, other = ConnectBinding.of("secret-one"), ConnectBinding.of("secret-two")
    # Then each derives its own state and verifier, stable for the same secret
    assert one == ConnectBinding.of("secret-one")
    assert one.state != other.state
    assert one.verifier != other.verifier
    # And the challenge is BASE64URL(SHA256(verifier)) without padding (RFC 7636)
    digest = hashlib.sha256(one.verifier.encode()).digest()
    assert one.challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    # And only the exact state matches
    assert one.state_matches(one.state)
    for presented in (None, "", other.state, one.state + "x", "é" * 10):
        assert not one.state_matches(presented)


def test_the_urls_carry_the_state_and_the_challenge() -> None:
    binding = ConnectBinding.of("s")
    authorize = urlsplit(authorize_url("https://github.example/", "Iv1.abc", binding))
    query = {k: v[0] for k, v in parse_qs(authorize.query).items()}
    assert authorize.path == "/login/oauth/authorize"
    assert query["client_id"] == "Iv1.abc"
    assert (query["state"], query["code_challenge"]) == (binding.state, binding.challenge)
    assert query["code_challenge_method"] == "S256"
    install = install_url("https://github.example", "my app/x", binding)
    assert install.startswith("https://github.example/apps/my%20app%2Fx/installations/new?")
    assert f"state={binding.state}" in install


def test_only_an_installation_github_lists_for_the_user_has_an_account() -> None:
    listed: list[Any] = [
        {"id": 1, "account": {"login": "acme", "type": "Organization", "id": 900}},
        {"id": 2, "account": "not a mapping"},
        "garbage",
    ]
    assert account_of(listed, 1) == ORG
    assert account_of(listed, 2) is None
    assert account_of(listed, 3) is None


@pytest.mark.parametrize(
    ("membership", "allowed"),
    [
        ({"state": "active", "role": "admin"}, True),
        ({"state": "pending", "role": "admin"}, False),
        ({"state": "active", "role": "member"}, False),
        (None, False),
    ],
)
def test_an_organization_installation_needs_an_active_owner(
    membership: dict[str, str] | None, allowed: bool
) -> None:
    if allowed:
        require_administrator(ALICE, ORG, membership)
        return
    with pytest.raises(GitHubConnectRefused) as refused:
        require_administrator(ALICE, ORG, membership)
    assert refused.value.reason == "not_organization_owner"


def test_a_user_installation_needs_that_very_user() -> None:
    require_administrator(ALICE, GitHubAccount("alice", "User", 11), None)
    # Same login, another account ID (a renamed and re-registered login): refused
    with pytest.raises(GitHubConnectRefused):
        require_administrator(ALICE, GitHubAccount("alice", "User", 12), None)
    with pytest.raises(GitHubConnectRefused) as refused:
        require_administrator(ALICE, GitHubAccount("acme", "Enterprise", 1), None)
    assert refused.value.reason == "unsupported_account"


def test_the_setup_callbacks_installation_id_is_a_number_or_nothing() -> None:
    assert installation_from_query(None) is None
    assert installation_from_query("") is None
    assert installation_from_query("4242") == 4242
    for bad in ("-1", "12a", "1" * 17, "0x10"):
        with pytest.raises(InvalidInput):
            installation_from_query(bad)
