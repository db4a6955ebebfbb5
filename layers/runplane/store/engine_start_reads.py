"""What a runner's engine starts a phase by reading, on the table
(``services.repositories.access.EngineStartReads``). Only the Cloud API's runner calls
read them: the batch read and the identity map are imported on first use, so a cold start
elsewhere skips them."""

from __future__ import annotations

from contextlib import AbstractContextManager

from runplane.domain.read_ahead import ReadAhead


class DynamoEngineStartReads:
    def read_ahead(self, run_id: str, workspace_id: str) -> ReadAhead:
        from runplane.store import run_batch

        return run_batch.engine_start_items(run_id, workspace_id)

    def serving(self, ahead: ReadAhead) -> AbstractContextManager[None]:
        from runplane.store import prefetch

        return prefetch.serving_ahead(ahead)
