"""A runner upload's ticket: what begin-upload would otherwise have stored.

Beginning an upload writes nothing. The artifact's ID is derived from the
session, the kind, a random nonce and the issue time, and its data key is
wrapped by KMS under an encryption context naming that artifact and its
organization. The ticket carries the nonce, kind, issue time and wrapped key
back to register, which re-derives the ID from its own session: a ticket
issued to another session, or for another kind or time, names another
artifact, and a wrapped key not made for this artifact does not unwrap. So
no signing key is needed: KMS is the authority and the ID is the binding.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from runplane.domain.artifacts import ArtifactKind
from runplane.domain.errors import UploadTicketRefused
from runplane.domain.ids import IdKind, derived_id, kind_of

# Long enough for a large upload started just before its URL expired.
TICKET_LIFETIME = timedelta(hours=1)
_VERSION = 1


@dataclass(frozen=True)
class UploadTicket:
    session_id: str
    kind: ArtifactKind
    nonce: str
    issued: int  # seconds since the epoch
    wrapped_key: bytes = field(repr=False)

    @property
    def artifact_id(self) -> str:
        return derived_id(
            IdKind.ARTIFACT, self.session_id, self.kind.value, self.nonce, str(self.issued)
        )

    @property
    def issued_at(self) -> datetime:
        return datetime.fromtimestamp(self.issued, UTC)

    def encode(self) -> str:
        body = {
            "v": _VERSION,
            "kind": self.kind.value,
            "nonce": self.nonce,
            "issued": self.issued,
            "key": base64.b64encode(self.wrapped_key).decode("ascii"),
        }
        return base64.urlsafe_b64encode(json.dumps(body).encode()).decode("ascii")


def issued_at(now: datetime) -> int:
    return int(now.timestamp())


def redeem(session_id: str, artifact_id: str, ticket: str, now: datetime) -> UploadTicket:
    """The ticket for ``artifact_id``, if this session was issued it and it is current.

    The wrapped key is still unproven: it must unwrap under the artifact's context."""
    parsed = _decode(session_id, artifact_id, ticket)
    if parsed.artifact_id != artifact_id:
        raise UploadTicketRefused(artifact_id, "not_issued", "this session was not issued it")
    if now >= parsed.issued_at + TICKET_LIFETIME:
        raise UploadTicketRefused(artifact_id, "expired", "begin the upload again")
    return parsed


def _decode(session_id: str, artifact_id: str, ticket: str) -> UploadTicket:
    try:
        body = json.loads(base64.urlsafe_b64decode(ticket.encode("ascii")))
        parsed = UploadTicket(
            session_id=session_id,
            kind=ArtifactKind(body["kind"]),
            nonce=str(body["nonce"]),
            issued=int(body["issued"]),
            wrapped_key=base64.b64decode(body["key"], validate=True),
        )
        if body["v"] != _VERSION or kind_of(parsed.nonce) is not IdKind.UPLOAD:
            raise ValueError("unknown ticket")
    except (ValueError, TypeError, KeyError, UnicodeError, binascii.Error):
        raise UploadTicketRefused(artifact_id, "malformed", "the ticket is not one") from None
    return parsed
