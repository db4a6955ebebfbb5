"""The repository seam of organization variable sets.

Like the seams in ``repositories/__init__.py``, it names domain types only; the DynamoDB
implementation is ``store.variable_set_store.DynamoVariableSetStore`` and the in-memory
fake ``tests/fakes_variable_sets.py``, held to the same cases by
tests/integration/test_variable_set_store_contract.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from runplane.domain.audit import AuditRecord
from runplane.domain.variable_sets import VariableSet, WorkspaceSets
from runplane.domain.variables import StoredVariable, VariableCategory, WorkspaceVariable


class VariableSetStore(Protocol):
    """An organization's variable sets, each set's variables, and the sets applied to
    each workspace by name.

    - ``all_of`` is the organization's sets in name order; ``get`` raises ``NotFound``
      for an unknown set and for another organization's; ``find_id`` is the ID of the
      organization's set of that name, or None.
    - ``create`` writes a new set, claiming its name in the organization
      (``AlreadyExists`` if taken) within the organization's limits (101st set or 11th
      global one: ``VariableSetLimit``).
    - ``update`` replaces ``current`` with ``updated`` (its name, description, global
      flag; the version one more), only at the version read (``ConcurrentChange``), a
      new name claimed (``AlreadyExists``) and the global limit kept.
    - ``delete`` removes the set at the version read (``ConcurrentChange``), its name and
      its variables; it then applies nowhere.
    - ``workspace_sets`` is the workspace's record of the sets applied to it by name
      (version 0 when it has none yet). ``apply`` and ``unapply`` add or remove the
      workspace on the set's head and write the workspace's record as ``keep`` plus or
      minus the set, each only at the version read (``ConcurrentChange``): the caller
      counts ``keep`` against the per-workspace limit.
    - ``variables`` is a set's variables in category then name order;
      ``find_variable`` returns None for an unknown one.
    - ``put_variable`` creates (``previous`` None) or replaces exactly the
      ``previous`` version read (``ConcurrentChange``) while the set exists
      (``NotFound``), within the set's count (``VariableSetLimit``) and byte
      (``VariablesTooLarge``) limits. ``delete_variable`` removes exactly the version
      read (``ConcurrentChange``).

    Every write records its organization audit event ``event_id`` (names, IDs, the
    category and the sensitive flag; never a value) and a refused write writes nothing.
    """

    def all_of(self, org_id: str) -> list[VariableSet]: ...

    def get(self, org_id: str, set_id: str) -> VariableSet: ...

    def find_id(self, org_id: str, name: str) -> str | None: ...

    def create(
        self, variable_set: VariableSet, *, event_id: str, audit: AuditRecord | None = None
    ) -> None: ...

    def update(
        self,
        current: VariableSet,
        updated: VariableSet,
        *,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...

    def delete(
        self,
        current: VariableSet,
        *,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...

    def workspace_sets(self, org_id: str, workspace_id: str) -> WorkspaceSets: ...

    def apply(
        self,
        current: VariableSet,
        applied: WorkspaceSets,
        keep: tuple[str, ...],
        *,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...

    def unapply(
        self,
        current: VariableSet,
        applied: WorkspaceSets,
        keep: tuple[str, ...],
        *,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...

    def variables(self, set_id: str) -> list[StoredVariable]: ...

    def find_variable(
        self, set_id: str, category: VariableCategory, name: str
    ) -> StoredVariable | None: ...

    def put_variable(
        self,
        current: VariableSet,
        *,
        variable: WorkspaceVariable,
        size: int,
        wrapped_key: bytes | None,
        sealed: bytes | None,
        previous: StoredVariable | None,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...

    def delete_variable(
        self,
        current: VariableSet,
        *,
        previous: StoredVariable,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...
