"""The DynamoDB run reader (``services.repositories.RunReader``)."""

from __future__ import annotations

from runplane.domain.entities import Run, RunStage
from runplane.domain.parts import RunPart
from runplane.domain.run import Stage
from runplane.store import run_parts
from runplane.store.models import RunItem
from runplane.store.runs import RunRepository, runs_partition, to_run


class DynamoRunReader:
    def __init__(self, runs: RunRepository) -> None:
        self._runs = runs

    def get_run(self, run_id: str) -> Run:
        return self._runs.get(run_id)

    def runs_of_workspace(self, workspace_id: str, limit: int | None = None) -> list[Run]:
        # The index sorts by "<created_at>#<run ID>": read backwards, newest first, and
        # stop at ``limit`` (its requests read no more than that).
        items = RunItem.gsi1.query(
            runs_partition(workspace_id), scan_index_forward=False, limit=limit
        )
        return [to_run(item) for item in items]

    def stages(self, run_id: str) -> dict[Stage, RunStage]:
        return self._runs.stages(run_id)

    def parts(self, run_id: str) -> dict[str, RunPart]:
        return run_parts.all_of(run_id)
