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
