"""An organization holding a GitHub App installation, written as the connect flow's
last step writes it: for tiers below the dashboard (the e2e tier connects for real)."""

from __future__ import annotations

from datetime import UTC, datetime

from runplane.domain.github_connect import AuditNote, GitHubAccount, Installation
from runplane.store import github_installations as store


def hold_installation(org_id: str, installation_id: int, account: str = "acme") -> None:
    now = datetime.now(UTC)
    store.claim(
        Installation(
            installation_id=installation_id,
            organization_id=org_id,
            account=GitHubAccount(account, "Organization", 1),
            verified_github_user=f"{account}-owner",
            claimed_by="user:tests",
            claimed_at=now,
            bindings=0,
        ),
        cap=25,
        note=AuditNote(
            f"evt-hold-{org_id}-{installation_id}",
            "github.installation.connected",
            "user:tests",
            {},
        ),
        now=now,
    ).commit()
