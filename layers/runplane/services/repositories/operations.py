"""The repository seams of the platform's operations: launch controls.

Like the seams in ``repositories/__init__.py``, each names domain types only; the
DynamoDB implementation is in ``store/`` and an in-memory fake that keeps the same
promises in ``tests/fakes_operations.py``, held to the same cases by
tests/integration/test_operations_store_contract.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from runplane.domain.launch_controls import Controls


class LaunchControlStore(Protocol):
    """Each scope's launch controls (the platform's, ``GLOBAL``, or an organization's)
    and how many sandboxes each scope is running.

    - ``read`` gives every scope's controls (``Controls()`` for a scope never set) and,
      with ``counts``, every scope's running sandboxes (0 for one never counted;
      without ``counts`` the second mapping is empty), in one consistent read. A store
      that cannot answer raises whatever it raised: the caller denies (fail closed).
    - ``get`` is one scope's controls, ``Controls()`` if never set; ``running`` its
      running sandboxes, 0 if none was ever counted.
    - ``put`` replaces the scope's controls whole, unconditionally (the last write
      wins), noting who set them and when. It never changes a running count: slots
      are taken and given back with a runner attempt's own writes, on the store
      (``store.sandbox_slots``).
    """

    def read(
        self, scopes: Sequence[str], *, counts: bool
    ) -> tuple[dict[str, Controls], dict[str, int]]: ...

    def get(self, scope: str) -> Controls: ...

    def running(self, scope: str) -> int: ...

    def put(self, scope: str, controls: Controls, *, by: str, at: datetime) -> None: ...
