"""Holding GitHub App installations against moto's DynamoDB: one holder when two
organizations claim at once, and bindings counted in their own writes, the last one
releasing the installation. The seam's promises (the cap, refusals writing nothing)
are the contract's (test_access_store_contract.py), the connect flow's rules the
service tier's (tests/service/test_github_installations.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from runplane.domain.errors import Conflict, GitHubInstallationTaken
from runplane.domain.github_connect import AuditNote, GitHubAccount, Installation
from runplane.store import github_installations as store
from tests.integration.conftest import Stack


def _installation(org_id: str, number: int) -> Installation:
    return Installation(
        installation_id=number,
        organization_id=org_id,
        account=GitHubAccount("acme", "Organization", 7),
        verified_github_user="alice",
        claimed_by="user:web-1",
        claimed_at=datetime.now(UTC),
        bindings=0,
    )


def _note(tag: str) -> AuditNote:
    return AuditNote(f"evt-{tag}", "github.installation.connected", "user:web-1", {})


def _claim(org_id: str, number: int, cap: int = 3) -> None:
    now = datetime.now(UTC)
    store.claim(
        _installation(org_id, number), cap=cap, note=_note(f"{org_id}-{number}"), now=now
    ).commit()


def test_two_organizations_claiming_one_installation_at_once_leave_one_holder(
    stack: Stack,
) -> None:
    # When two organizations claim installation 9 at the same moment, ten times over
    def claim(org_id: str) -> str:
        try:
            _claim(org_id, 9)
        except (GitHubInstallationTaken, Conflict):
            return "refused"
        return "held"

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(claim, ["org-a", "org-b"]))

    # Then exactly one holds it, with its organization's items only
    assert sorted(outcomes) == ["held", "refused"]
    holder = store.holder_of(9)
    assert holder in ("org-a", "org-b")
    loser = "org-b" if holder == "org-a" else "org-a"
    assert store.held(loser, 9) is None
    assert store.held_by(loser) == []


def test_bindings_are_counted_and_the_last_one_releases_the_installation(
    stack: Stack,
) -> None:
    # Given an installation held and used by two bindings
    _claim("org-a", 5)
    store.use("org-a", 5).commit()
    store.use("org-a", 5).commit()
    held = store.held("org-a", 5)
    assert held is not None
    assert held.bindings == 2

    # Then an admin's release is refused while it is used
    with pytest.raises(Conflict) as busy:
        store.release("org-a", 5, bindings=0, note=_note("r"), now=datetime.now(UTC)).commit()
    assert "still used by 2" in busy.value.message

    # When the bindings go one by one
    now = datetime.now(UTC)
    store.stop_using("org-a", held, _note("s1"), now).commit()
    after_one = store.held("org-a", 5)
    assert after_one is not None
    assert after_one.bindings == 1
    store.stop_using("org-a", after_one, _note("s2"), now).commit()

    # Then the last one released it: another organization may claim it now
    assert store.holder_of(5) is None
    _claim("org-b", 5)
    assert store.holder_of(5) == "org-b"

    # And an organization cannot use an installation it does not hold
    with pytest.raises(GitHubInstallationTaken):
        store.use("org-a", 5).commit()
