"""The seams of access: dashboard login codes and sessions, hosted-UI sign-in
pre-sessions, and the GitHub App installations an organization holds with the connect
flows that claim them.

Every key is the hash of a secret (``handle_hash``), never the secret itself, and
every type named here is a domain value. The DynamoDB implementations are in the store
modules of the same names; the in-memory ones in ``tests/fakes_access.py``; the
contract test that holds both to the same cases in
``tests/integration/test_access_store_contract.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from runplane.domain.web_session import Grant, WebSession


class WebSessionStore(Protocol):
    """Dashboard login codes and cookie sessions, each under its secret's hash.

    - ``put_login_code`` writes a new code; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``login_code`` and ``session`` read what was written, expired or not (validity is
      the caller's to check), or None for an unknown hash.
    - ``redeem`` consumes the code and opens the session in one write: of two
      redemptions of one code exactly one succeeds; the other, or a code no longer
      there, raises ``LoginLinkRefused`` and writes nothing (no session either).
    - ``put_session`` opens a session; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``delete_session`` ends a session; ending one that is not there is no error.
    """

    def put_login_code(self, code_hash: str, grant: Grant, created_by: str) -> None: ...

    def login_code(self, code_hash: str) -> Grant | None: ...

    def redeem(self, code_hash: str, secret_hash: str, session: WebSession) -> None: ...

    def put_session(self, secret_hash: str, session: WebSession) -> None: ...

    def session(self, secret_hash: str) -> WebSession | None: ...

    def delete_session(self, secret_hash: str) -> None: ...


class PreSessionStore(Protocol):
    """Hosted-UI sign-in pre-sessions, each under its cookie secret's hash; a pre-session
    holds no secret, only when it was started and until when it may be finished.

    - ``put_pre_session`` writes a new one; a hash already stored raises
      ``ConcurrentChange`` and writes nothing.
    - ``pre_session_validity`` is the ``valid_until`` written, expired or not (validity
      is the caller's to check), or None for an unknown or consumed one.
    - ``consume_pre_session`` deletes it if it is still there: of two consumptions
      exactly one succeeds; the other, or one of an unknown hash, raises
      ``SignInRefused`` (``pre_session_used``).
    """

    def put_pre_session(
        self, secret_hash: str, created_at: datetime, valid_until: datetime
    ) -> None: ...

    def pre_session_validity(self, secret_hash: str) -> datetime | None: ...

    def consume_pre_session(self, secret_hash: str) -> None: ...
