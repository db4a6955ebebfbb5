"""What a runner's engine starts a phase by reading, on the table
(``services.repositories.access.EngineStartReads``). Only the Cloud API's runner calls
read them: the batch read is imported on first use, so a cold start elsewhere skips it.
Both the read and what it serves go through the request's identity map (``scope``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from runplane.domain.read_ahead import ReadAhead
from runplane.store.request_reads import REQUEST, RequestScope


class DynamoEngineStartReads:
    def __init__(self, scope: RequestScope = REQUEST) -> None:
        self._scope = scope

    def read_ahead(self, run_id: str, workspace_id: str) -> ReadAhead:
        from runplane.store import run_batch

        return run_batch.engine_start_items(run_id, workspace_id, reads=self._scope.reads())

    def serving(self, ahead: ReadAhead) -> AbstractContextManager[None]:
        return self._serving(ahead)

    @contextmanager
    def _serving(self, ahead: ReadAhead) -> Iterator[None]:
        with self._scope.serving_ahead(ahead):
            yield
