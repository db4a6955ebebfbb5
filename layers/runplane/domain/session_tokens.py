"""A runner session's token, and what it names for its calls to read.

A session's token names, ahead of its secret part, the session's binding (run,
attempt, phase) and the immutable facts its calls read: its run's workspace, the
state version the run pinned and that version's artifact record. Any process,
including one that never saw the token, can then read the session, its attempt and
what the call reads next in one request.

The session is stored under the SHA-256 of the whole token, so a token whose names
were altered is an unknown session: the names are authenticated by construction.
They only choose what is read ahead; each call still checks what it is served.

    rps_2.<run>.<attempt>.<phase>.<workspace>.<pinned version>.<state artifact>.<secret>

An absent fact is an empty field. A token of the first form (``rps_`` and the secret
alone, no ``.``) names nothing and keeps working.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runplane.domain.capabilities import SESSION_PREFIX, Binding, Phase

# What follows the prefix in a token that names its reads.
HINTED = "2."
# An ID a token may name: IDs have no dot (the separator) and are short.
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The secret part: base64url of an HMAC-SHA256, unpadded.
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")
_FIELDS = 7


class MalformedToken(ValueError):
    """A token that has the form of one naming its reads, but not exactly."""


@dataclass(frozen=True)
class SessionHints:
    """What a session's token names: its binding's run, attempt and phase, and the
    facts its calls read (``None``: not named). None of them ever changes for the
    session: a run's workspace is fixed, and only a new plan attempt (another session)
    pins another state version, whose artifact never changes either."""

    run_id: str
    attempt_id: str
    phase: Phase
    workspace_id: str | None = None
    pinned_sv_id: str | None = None
    state_artifact_id: str | None = None

    @classmethod
    def of(cls, binding: Binding) -> SessionHints:
        """A binding's, naming no fact."""
        return cls(binding.run_id, binding.attempt_id, binding.phase)

    def names(self, binding: Binding) -> bool:
        """Whether these name ``binding``'s run, attempt and phase."""
        return (self.run_id, self.attempt_id, self.phase) == (
            binding.run_id,
            binding.attempt_id,
            binding.phase,
        )

    def sayable(self) -> bool:
        """Whether a token can carry these (every ID short and without a dot)."""
        return all(
            _ID.fullmatch(value)
            for value in (self.run_id, self.attempt_id, *self._facts())
            if value is not None
        )

    def text(self) -> str:
        """The names as a token carries them (after the prefix, before the secret)."""
        fields = [self.run_id, self.attempt_id, self.phase.value, *self._facts()]
        return HINTED + ".".join(value or "" for value in fields)

    def _facts(self) -> tuple[str | None, str | None, str | None]:
        return (self.workspace_id, self.pinned_sv_id, self.state_artifact_id)


def hinted_token(hints: SessionHints, secret: str) -> str:
    """The token naming ``hints`` with the secret part ``secret``."""
    if not hints.sayable() or not _SECRET.fullmatch(secret):
        raise ValueError("a token cannot carry these names")
    return f"{SESSION_PREFIX}{hints.text()}.{secret}"


def hints_of(token: str) -> SessionHints | None:
    """What ``token`` names; ``None`` for a token of the first form (no names).
    ``MalformedToken`` for one of this form that is not exactly so: no such token
    was ever issued."""
    body = token.removeprefix(SESSION_PREFIX)
    if "." not in body:
        return None
    if not body.startswith(HINTED):
        raise MalformedToken("unknown token form")
    fields = body.removeprefix(HINTED).split(".")
    if len(fields) != _FIELDS:
        raise MalformedToken("wrong number of fields")
    run_id, attempt_id, phase, workspace_id, pinned, artifact_id, secret = fields
    if not (_ID.fullmatch(run_id) and _ID.fullmatch(attempt_id) and _SECRET.fullmatch(secret)):
        raise MalformedToken("malformed binding or secret")
    if not all(_ID.fullmatch(fact) for fact in (workspace_id, pinned, artifact_id) if fact):
        raise MalformedToken("malformed fact")
    try:
        stage = Phase(phase)
    except ValueError:
        raise MalformedToken("unknown phase") from None
    return SessionHints(
        run_id, attempt_id, stage, workspace_id or None, pinned or None, artifact_id or None
    )
