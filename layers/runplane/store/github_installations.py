"""GitHub App installations organizations hold, and the connect flows that claim them.

Three items per held installation, always written together:
- ``GHINSTALLATION#<id>``/``HOLDER``: which organization holds it (one at most);
- ``GHORG#<org>``/``INSTALLATION#<id>``: what was proved, by whom, and how many of
  the organization's workspaces are bound with it (bindings move this count in
  their own transaction, so a binding exists only while its installation is held);
- ``GHORG#<org>``/``COUNT``: how many the organization holds, capped on claim.

A connect flow is keyed by the hash of its cookie secret and holds no secret.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute

from runplane.domain.errors import Conflict, GitHubConnectRefused, GitHubInstallationTaken
from runplane.domain.github import Binding
from runplane.domain.github_connect import AuditNote, ConnectFlow, GitHubAccount, Installation
from runplane.store import audit
from runplane.store.models import TableItem, org_event_key
from runplane.store.transaction import Item, OnRefused, Transaction


class GitHubConnectItem(TableItem):
    org_id = UnicodeAttribute()
    started_by = UnicodeAttribute()
    # The dashboard session that started the flow: it must still be open at the end.
    session_hash = UnicodeAttribute()
    installation_id = NumberAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    valid_until = UTCDateTimeAttribute()


class GitHubHolderItem(TableItem):
    installation_id = NumberAttribute()
    org_id = UnicodeAttribute()
    claimed_at = UTCDateTimeAttribute()


class GitHubHeldItem(TableItem):
    installation_id = NumberAttribute()
    org_id = UnicodeAttribute()
    account_login = UnicodeAttribute()
    account_type = UnicodeAttribute()
    account_id = NumberAttribute()
    verified_github_user = UnicodeAttribute()
    claimed_by = UnicodeAttribute()
    claimed_at = UTCDateTimeAttribute()
    bindings = NumberAttribute(default=0)


class GitHubHeldCountItem(TableItem):
    total = NumberAttribute(default=0)


def connect_key(secret_hash: str) -> tuple[str, str]:
    return f"GHCONNECT#{secret_hash}", "GHCONNECT"


def holder_key(installation_id: int) -> tuple[str, str]:
    return f"GHINSTALLATION#{int(installation_id)}", "HOLDER"


def held_key(org_id: str, installation_id: int) -> tuple[str, str]:
    return f"GHORG#{org_id}", f"INSTALLATION#{int(installation_id)}"


def count_key(org_id: str) -> tuple[str, str]:
    return f"GHORG#{org_id}", "COUNT"


# -- connect flows ---------------------------------------------------------------------------


def put_connect(secret_hash: str, flow: ConnectFlow, now: datetime) -> Transaction:
    return Transaction().put_new(
        GitHubConnectItem(
            *connect_key(secret_hash),
            org_id=flow.organization_id,
            started_by=flow.started_by,
            session_hash=flow.session_hash,
            installation_id=flow.installation_id,
            created_at=now,
            valid_until=flow.valid_until,
            # DynamoDB's TTL sweeps abandoned flows; validity is checked on read.
            expires_at=flow.valid_until,
        )
    )


def get_connect(secret_hash: str) -> ConnectFlow | None:
    try:
        item = GitHubConnectItem.get(*connect_key(secret_hash), consistent_read=True)
    except GitHubConnectItem.DoesNotExist:
        return None
    installation = item.installation_id
    return ConnectFlow(
        item.org_id,
        item.started_by,
        item.session_hash,
        None if installation is None else int(installation),
        item.valid_until,
    )


def _used(current: Item | None) -> Exception:
    return GitHubConnectRefused("flow_used", "this connection was already finished or abandoned")


def choose_installation(secret_hash: str, installation_id: int) -> Transaction:
    """Record the installation GitHub's setup callback named, once per flow."""
    return Transaction().update(
        GitHubConnectItem(*connect_key(secret_hash)),
        [GitHubConnectItem.installation_id.set(installation_id)],
        condition=GitHubConnectItem.pk.exists()
        & GitHubConnectItem.installation_id.does_not_exist(),
        on_refused=_used,
    )


def consume_connect(secret_hash: str) -> Transaction:
    """Delete the flow if it is still there: of two callbacks with one cookie, exactly
    one goes on to redeem its code."""
    return Transaction().delete(
        GitHubConnectItem(*connect_key(secret_hash)),
        condition=GitHubConnectItem.pk.exists(),
        on_refused=_used,
    )


# -- held installations ----------------------------------------------------------------------


def _installation(item: GitHubHeldItem) -> Installation:
    return Installation(
        installation_id=int(item.installation_id),
        organization_id=item.org_id,
        account=GitHubAccount(item.account_login, item.account_type, int(item.account_id)),
        verified_github_user=item.verified_github_user,
        claimed_by=item.claimed_by,
        claimed_at=item.claimed_at,
        bindings=int(item.bindings or 0),
    )


def holder_of(installation_id: int) -> str | None:
    """The organization holding the installation, or None."""
    try:
        item = GitHubHolderItem.get(*holder_key(installation_id), consistent_read=True)
    except GitHubHolderItem.DoesNotExist:
        return None
    return item.org_id


def held(org_id: str, installation_id: int) -> Installation | None:
    try:
        item = GitHubHeldItem.get(*held_key(org_id, installation_id), consistent_read=True)
    except GitHubHeldItem.DoesNotExist:
        return None
    return _installation(item)


def held_by(org_id: str) -> list[Installation]:
    return [
        _installation(item)
        for item in GitHubHeldItem.query(
            f"GHORG#{org_id}", GitHubHeldItem.sk.startswith("INSTALLATION#"), consistent_read=True
        )
    ]


def _audit(org_id: str, installation_id: int, note: AuditNote, now: datetime) -> Transaction:
    return Transaction().put_new(
        audit.audit_item(
            key=org_event_key(org_id, f"{now.isoformat()}#{note.event_id}"),
            event_id=note.event_id,
            org_id=org_id,
            subject_id=f"github-installation-{installation_id}",
            type=note.type,
            actor=note.actor,
            at=now,
            details=note.details,
        )
    )


def _taken(installation_id: int) -> OnRefused:
    def refuse(current: Item | None) -> Exception:
        return GitHubInstallationTaken(
            f"GitHub App installation {installation_id} is connected to another organization; "
            "an admin of that organization must release it first"
        )

    return refuse


def claim(installation: Installation, *, cap: int, note: AuditNote, now: datetime) -> Transaction:
    """Hold a new installation (refused if another organization holds it, or this one
    already holds ``cap``)."""
    org, number = installation.organization_id, installation.installation_id

    def full(current: Item | None) -> Exception:
        return GitHubInstallationTaken(
            f"this organization already holds {cap} GitHub App installations; "
            "release one it no longer uses first"
        )

    counter = GitHubHeldCountItem(*count_key(org))
    return (
        Transaction()
        .put(
            GitHubHolderItem(
                *holder_key(number), installation_id=number, org_id=org, claimed_at=now
            ),
            condition=GitHubHolderItem.pk.does_not_exist(),
            on_refused=_taken(number),
        )
        .put(_held_item(installation), condition=GitHubHeldItem.pk.does_not_exist())
        .update(
            counter,
            [GitHubHeldCountItem.total.add(1)],
            condition=GitHubHeldCountItem.total.does_not_exist()
            | (GitHubHeldCountItem.total < cap),
            on_refused=full,
        )
        .extend([_audit(org, number, note, now)])
    )


def verify_again(installation: Installation, *, note: AuditNote, now: datetime) -> Transaction:
    """Record a new proof for an installation this organization already holds."""
    org, number = installation.organization_id, installation.installation_id
    return (
        Transaction()
        .update(
            GitHubHeldItem(*held_key(org, number)),
            [
                GitHubHeldItem.account_login.set(installation.account.login),
                GitHubHeldItem.account_type.set(installation.account.kind),
                GitHubHeldItem.account_id.set(installation.account.id),
                GitHubHeldItem.verified_github_user.set(installation.verified_github_user),
                GitHubHeldItem.claimed_by.set(installation.claimed_by),
                GitHubHeldItem.claimed_at.set(now),
            ],
            condition=GitHubHeldItem.pk.exists(),
            on_refused=_taken(number),
        )
        .check(
            GitHubHolderItem,
            holder_key(number),
            GitHubHolderItem.org_id == org,
            _taken(number),
        )
        .extend([_audit(org, number, note, now)])
    )


def _held_item(installation: Installation) -> GitHubHeldItem:
    return GitHubHeldItem(
        *held_key(installation.organization_id, installation.installation_id),
        installation_id=installation.installation_id,
        org_id=installation.organization_id,
        account_login=installation.account.login,
        account_type=installation.account.kind,
        account_id=installation.account.id,
        verified_github_user=installation.verified_github_user,
        claimed_by=installation.claimed_by,
        claimed_at=installation.claimed_at,
        bindings=0,
    )


def release(
    org_id: str,
    installation_id: int,
    *,
    bindings: int,
    note: AuditNote,
    now: datetime,
) -> Transaction:
    """Stop holding an installation whose binding count is still ``bindings`` (0 for an
    admin's release; 1 when its last binding is being removed in the same write)."""

    def changed(current: Item | None) -> Exception:
        if current is None:
            return Conflict(
                f"GitHub App installation {installation_id} is not held by this organization"
            )
        return Conflict(
            f"GitHub App installation {installation_id} is still used by "
            f"{int(current.get('bindings') or 0)} workspace binding(s); unbind them first"
        )

    return (
        Transaction()
        .delete(
            GitHubHeldItem(*held_key(org_id, installation_id)),
            condition=GitHubHeldItem.bindings == bindings,
            on_refused=changed,
        )
        .delete(
            GitHubHolderItem(*holder_key(installation_id)),
            condition=GitHubHolderItem.org_id == org_id,
        )
        .update(
            GitHubHeldCountItem(*count_key(org_id)),
            [GitHubHeldCountItem.total.add(-1)],
            condition=GitHubHeldCountItem.total > 0,
        )
        .extend([_audit(org_id, installation_id, note, now)])
    )


def _not_held(installation_id: int) -> OnRefused:
    def refuse(current: Item | None) -> Exception:
        return GitHubInstallationTaken(
            f"GitHub App installation {installation_id} is not connected to this organization: "
            "an admin connects it from the dashboard's GitHub page first"
        )

    return refuse


def use(org_id: str, installation_id: int) -> Transaction:
    """One more binding of the organization uses the installation (which it must hold)."""
    return Transaction().update(
        GitHubHeldItem(*held_key(org_id, installation_id)),
        [GitHubHeldItem.bindings.add(1)],
        condition=GitHubHeldItem.pk.exists(),
        on_refused=_not_held(installation_id),
    )


def still_held(org_id: str, installation_id: int) -> Transaction:
    """A binding that keeps its installation: it must still be held."""
    return Transaction().check(
        GitHubHeldItem,
        held_key(org_id, installation_id),
        GitHubHeldItem.pk.exists(),
        _not_held(installation_id),
    )


def stop_using(
    org_id: str, installation: Installation, note: AuditNote, now: datetime
) -> Transaction:
    """One binding fewer: the last one going releases the installation with it."""
    if installation.bindings <= 1:
        return release(org_id, installation.installation_id, bindings=1, note=note, now=now)

    def changed(current: Item | None) -> Exception:
        return Conflict("the installation's bindings changed meanwhile; try again")

    return Transaction().update(
        GitHubHeldItem(*held_key(org_id, installation.installation_id)),
        [GitHubHeldItem.bindings.add(-1)],
        condition=GitHubHeldItem.bindings == installation.bindings,
        on_refused=changed,
    )


def binding_change(
    binding: Binding | None,
    previous: Binding | None,
    *,
    now: datetime,
    release_note: Callable[[], AuditNote],
) -> Transaction:
    """The installation side of a workspace binding replacing ``previous`` (either may be
    None), for the binding's own transaction: the new installation must be held by the
    organization and counts one more binding; the previous one counts one fewer and is
    released with its last (``release_note`` is called only when the previous one is
    still held)."""
    write = Transaction()
    before = None if previous is None else previous.installation_id
    after = None if binding is None else binding.installation_id
    if binding is not None:
        org = binding.organization_id
        if before == after:
            write.extend([still_held(org, binding.installation_id)])
        else:
            write.extend([use(org, binding.installation_id)])
    if previous is not None and before != after:
        org = previous.organization_id
        current = held(org, previous.installation_id)
        if current is not None:
            write.extend([stop_using(org, current, release_note(), now)])
    return write


class DynamoGitHubInstallations:
    """The ``GitHubInstallationStore`` seam on the table (services/repositories/access.py)."""

    def put_connect(self, secret_hash: str, flow: ConnectFlow, now: datetime) -> None:
        put_connect(secret_hash, flow, now).commit()

    def connect_flow(self, secret_hash: str) -> ConnectFlow | None:
        return get_connect(secret_hash)

    def choose_installation(self, secret_hash: str, installation_id: int) -> None:
        choose_installation(secret_hash, installation_id).commit()

    def consume_connect(self, secret_hash: str) -> None:
        consume_connect(secret_hash).commit()

    def holder_of(self, installation_id: int) -> str | None:
        return holder_of(installation_id)

    def held(self, org_id: str, installation_id: int) -> Installation | None:
        return held(org_id, installation_id)

    def held_by(self, org_id: str) -> list[Installation]:
        # Sort keys order IDs as text (10 before 9): the seam promises numbers.
        return sorted(held_by(org_id), key=lambda i: i.installation_id)

    def claim(
        self, installation: Installation, *, cap: int, note: AuditNote, now: datetime
    ) -> None:
        claim(installation, cap=cap, note=note, now=now).commit()

    def verify_again(self, installation: Installation, *, note: AuditNote, now: datetime) -> None:
        verify_again(installation, note=note, now=now).commit()

    def release(self, org_id: str, installation_id: int, *, note: AuditNote, now: datetime) -> None:
        release(org_id, installation_id, bindings=0, note=note, now=now).commit()
