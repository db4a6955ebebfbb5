"""GitHub source rules: signatures, event parsing and binding validation."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from runplane.domain.errors import InvalidInput
from runplane.domain.github import (
    MAX_TEXT,
    Ignored,
    SourceEvent,
    parse_event,
    preview_name,
    signature_matches,
    valid_branch,
    valid_repository,
    valid_working_directory,
)

SHA = "0123456789abcdef0123456789abcdef01234567"


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def test_a_signature_matches_only_its_exact_body_and_secret() -> None:
    body = b'{"a": 1}'
    assert signature_matches(b"s", body, sign(b"s", body))
    assert not signature_matches(b"s", body + b" ", sign(b"s", body))
    assert not signature_matches(b"other", body, sign(b"s", body))
    assert not signature_matches(b"s", body, None)
    assert not signature_matches(b"s", body, "sha1=" + sign(b"s", body)[7:])


def test_a_push_to_a_branch_is_a_source_event_and_tags_or_deletions_are_ignored() -> None:
    payload = {
        "ref": "refs/heads/main",
        "after": SHA,
        "repository": {"full_name": "Acme/Infra", "pushed_at": 1_700_000_000},
        "installation": {"id": 5},
    }
    event = parse_event("push", payload)
    assert isinstance(event, SourceEvent)
    assert (event.repository, event.branch, event.commit_sha) == ("acme/infra", "main", SHA)
    assert event.ref == "refs/heads/main"
    assert event.occurred_at is not None
    assert isinstance(parse_event("push", {**payload, "ref": "refs/tags/v1"}), Ignored)
    assert isinstance(parse_event("push", {**payload, "deleted": True}), Ignored)
    assert isinstance(parse_event("push", {**payload, "installation": None}), Ignored)
    assert isinstance(parse_event("watch", payload), Ignored)


def test_a_delivery_keeps_who_sent_it_and_what_the_commit_or_pull_request_says() -> None:
    # Given a push by alice whose head commit has a long message
    push = {
        "ref": "refs/heads/main",
        "after": SHA,
        "repository": {"full_name": "acme/infra"},
        "installation": {"id": 5},
        "sender": {"login": "alice"},
        "head_commit": {"message": "Bigger disks\n\n" + "x" * 5000},
    }
    # When it is parsed / Then the sender and the message (cut) are kept
    event = parse_event("push", push)
    assert isinstance(event, SourceEvent)
    assert event.sender == "alice"
    assert event.commit_message is not None
    assert len(event.commit_message) == MAX_TEXT
    assert event.commit_message.startswith("Bigger disks\n")
    # And a pull request keeps its title and author, and a bot is a sender
    pull = {
        "action": "opened",
        "pull_request": {
            "number": 3,
            "title": "Bump provider",
            "user": {"login": "bob"},
            "base": {"ref": "main"},
            "head": {"sha": SHA, "repo": {"full_name": "acme/infra"}},
        },
        "repository": {"full_name": "acme/infra"},
        "installation": {"id": 5},
        "sender": {"login": "renovate[bot]"},
    }
    event = parse_event("pull_request", pull)
    assert isinstance(event, SourceEvent)
    assert (event.sender, event.pull_request_author) == ("renovate[bot]", "bob")
    assert event.pull_request_title == "Bump provider"
    # And anything that is not a login is dropped, not kept as written
    for forged in ("alice bob", "a" * 40, "-alice", "", 7, None, "alice[admin]"):
        event = parse_event("push", {**push, "sender": {"login": forged}})
        assert isinstance(event, SourceEvent)
        assert event.sender is None, forged


def test_only_pull_request_actions_with_new_code_are_planned() -> None:
    payload = {
        "action": "synchronize",
        "pull_request": {
            "number": 3,
            "updated_at": "2026-01-01T00:00:00Z",
            "base": {"ref": "main"},
            "head": {"sha": SHA, "repo": {"full_name": "acme/infra"}},
        },
        "repository": {"full_name": "acme/infra"},
        "installation": {"id": 5},
    }
    event = parse_event("pull_request", payload)
    assert isinstance(event, SourceEvent)
    assert (event.ref, event.speculative, event.branch) == ("refs/pull/3/head", True, "main")
    assert not event.closes
    assert isinstance(parse_event("pull_request", {**payload, "action": "edited"}), Ignored)
    # A pull request from a fork (or a deleted one) starts nothing: its code would run
    # with the workspace's variables
    for head in ({"full_name": "mallory/infra"}, None):
        forked = {**payload["pull_request"], "head": {"sha": SHA, "repo": head}}  # type: ignore[dict-item]
        ignored = parse_event("pull_request", {**payload, "pull_request": forked})
        assert isinstance(ignored, Ignored)
        assert "runs start only for the repository's own branches" in ignored.reason
    # The repository's own branch is the same repository whatever its case
    upper = {**payload["pull_request"], "head": {"sha": SHA, "repo": {"full_name": "Acme/Infra"}}}  # type: ignore[dict-item]
    assert isinstance(parse_event("pull_request", {**payload, "pull_request": upper}), SourceEvent)
    # A close carries no code, but ends the pull request's preview workspaces
    closed = parse_event("pull_request", {**payload, "action": "closed"})
    assert isinstance(closed, SourceEvent)
    assert (closed.closes, closed.pull_request) == (True, 3)


def test_a_preview_workspaces_name_fits_a_workspace_name() -> None:
    assert preview_name("network", 7) == "network-pr-7"
    long = preview_name("n" * 90, 12345)
    assert (len(long), long[-9:]) == (90, "-pr-12345")


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "..", "a\\b", "a\nb"])
def test_working_directories_stay_inside_the_repository(bad: str) -> None:
    if bad == "":
        assert valid_working_directory(bad) == ""
        return
    with pytest.raises(InvalidInput):
        valid_working_directory(bad)


def test_names_are_normalised_or_refused() -> None:
    assert valid_working_directory("./envs//prod/") == "envs/prod"
    assert valid_repository("Acme/Infra.Live") == "acme/infra.live"
    for bad in ("acme", "acme/infra/x", "-acme/infra", "acme/infra.git"):
        with pytest.raises(InvalidInput):
            valid_repository(bad)
    for bad in ("a..b", "-x", "x.lock", "a b", "refs/heads/main", "x~1"):
        with pytest.raises(InvalidInput):
            valid_branch(bad)
