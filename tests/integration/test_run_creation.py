"""Creating a run stores its variables with it, in one write; a creation that is refused
leaves nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from runplane.domain.entities import Run
from runplane.domain.errors import ConcurrentChange, Conflict
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind
from runplane.services.runs import Runs
from runplane.store import run_parts
from tests.fakes import SeededIds
from tests.integration.arena import Arena, created
from tests.integration.dynamodb_requests import DynamoDBRequests


class ReusedRunId(SeededIds):
    """Issues ``run_id`` again for the next run: the one way to make the creation
    transaction refuse once the variables' object is stored, short of a DynamoDB fault."""

    def __init__(self, run_id: str) -> None:
        super().__init__(seed=99)
        self._run_id = run_id

    def new(self, kind: IdKind) -> str:
        return self._run_id if kind is IdKind.RUN else super().new(kind)


def archive_put(arena: Arena, ws_id: str, archive: bytes = b"terraform config") -> Any:
    """A configuration upload of the workspace with ``archive`` put to its URL."""
    upload = arena.runs.new_configuration_upload(arena.admin, ws_id)
    requests.put(upload.upload_url, data=archive, timeout=30).raise_for_status()
    return upload


def uploaded_configuration(arena: Arena, ws_id: str) -> str:
    """A configuration version of the workspace, uploaded and finalized: its ID."""
    upload = archive_put(arena, ws_id)
    arena.runs.finalize_configuration(arena.admin, upload.id)
    return str(upload.id)


def with_region(runs: Runs, arena: Arena, ws_id: str, cv_id: str) -> Run:
    """A plan_and_apply run of the configuration with one variable, ``region``."""
    return runs.create(
        arena.admin,
        ws_id,
        kind=RunKind.PLAN_AND_APPLY,
        configuration_version_id=cv_id,
        engine_version="1.0.3",
        variables={"region": "eu-west-1"},
    )


def test_a_refused_creation_stores_none_of_its_variables(arena: Arena) -> None:
    # Given a workspace with a run, and a configuration uploaded for a second one
    stack = arena.stack
    ws_id, existing = created(arena, "refused-create")
    upload = archive_put(arena, ws_id)
    arena.runs.finalize_configuration(arena.admin, upload.id)
    runs = stack.rewired(ids=ReusedRunId(existing)).runs
    before, objects = stack.scan(), stack.bucket_keys()

    # When the second run's creation is refused after its variables were encrypted and stored
    with pytest.raises(ConcurrentChange):
        with_region(runs, arena, ws_id, upload.id)

    # Then neither the variables' artifact record nor its object remains
    assert stack.scan() == before
    assert stack.bucket_keys() == objects


def test_a_finalize_stores_the_configuration_with_its_version_in_one_write(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace's configuration upload, its archive put
    ws_id, _ = created(arena, "finalize-once")
    upload = archive_put(arena, ws_id)
    sent = DynamoDBRequests(monkeypatch)

    # When it is finalized
    finalized = arena.runs.finalize_configuration(arena.admin, upload.id)
    operations = list(sent.operations)

    # Then the reply is the version as it now reads, after one read and one write
    assert finalized == arena.runs.configuration(arena.admin, upload.id)
    assert finalized["status"] == "uploaded"
    assert operations == ["GetItem", "TransactWriteItems"]


def test_a_second_finalize_stores_nothing(arena: Arena) -> None:
    # Given a configuration version finalized once, its archive put again
    ws_id, _ = created(arena, "finalize-twice")
    upload = archive_put(arena, ws_id)
    arena.runs.finalize_configuration(arena.admin, upload.id)
    requests.put(upload.upload_url, data=b"another config", timeout=30).raise_for_status()
    before, objects = arena.stack.scan(), arena.stack.bucket_keys()

    # When it is finalized again
    with pytest.raises(Conflict, match="already uploaded"):
        arena.runs.finalize_configuration(arena.admin, upload.id)

    # Then nothing was stored: no record, and no new object
    assert arena.stack.scan() == before
    assert arena.stack.bucket_keys() <= objects


def test_a_run_and_its_variables_are_created_in_one_write_after_one_read(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace with a configuration uploaded
    ws_id, _ = created(arena, "create-once")
    cv_id = uploaded_configuration(arena, ws_id)
    sent = DynamoDBRequests(monkeypatch)

    # When a run is created with a variable
    run = with_region(arena.runs, arena, ws_id, cv_id)
    operations = list(sent.operations)

    # Then its input names the variables, which read back
    snapshot = run_parts.require(run.id, "input").body
    stored = arena.stack.artifacts.read(arena.org.id, snapshot["variables_artifact_id"])
    assert json.loads(stored) == {"region": "eu-west-1"}
    # And it read its workspace, configuration, launch controls and the tally of the
    # workspace's variables in one request (the tally counts none: no query), and wrote
    # once
    assert operations == ["BatchGetItem", "TransactWriteItems"]


@pytest.mark.parametrize("kept", [True, False])
def test_a_workspace_s_variables_are_queried_while_its_tally_counts_any(
    arena: Arena, monkeypatch: pytest.MonkeyPatch, kept: bool
) -> None:
    # Given a workspace that has (or had, and deleted) a variable of its own
    ws_id, _ = created(arena, f"tally-{kept}")
    variables = arena.stack.services.workspace_variables
    variables.set(arena.admin, ws_id, "owner", "platform")
    if not kept:
        variables.delete(arena.admin, ws_id, "owner")
    cv_id = uploaded_configuration(arena, ws_id)
    sent = DynamoDBRequests(monkeypatch)

    # When a run is created with a variable
    run = with_region(arena.runs, arena, ws_id, cv_id)
    operations = list(sent.operations)

    # Then the run pins the workspace's variable with its own, having queried them, or
    # pins its own only, without a query once the tally counts none
    snapshot = run_parts.require(run.id, "input").body
    stored = json.loads(arena.stack.artifacts.read(arena.org.id, snapshot["variables_artifact_id"]))
    if kept:
        assert stored == {"owner": "platform", "region": "eu-west-1"}
        assert operations == ["BatchGetItem", "Query", "TransactWriteItems"]
    else:
        assert stored == {"region": "eu-west-1"}
        assert operations == ["BatchGetItem", "TransactWriteItems"]


def test_a_creations_reply_is_the_run_as_it_was_written_without_reading_it_again(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run just created, as its creation returned it
    ws_id, _ = created(arena, "creation-reply")
    run = with_region(arena.runs, arena, ws_id, uploaded_configuration(arena, ws_id))
    sent = DynamoDBRequests(monkeypatch)

    # When its review is built from that run, and then read afresh
    replied = arena.runs.review_of(run)
    built = len(sent.operations)
    read = arena.runs.review(arena.admin, run.id)

    # Then both say the same, and the reply sent one request fewer: the run's own read
    assert replied == read
    assert len(sent.operations) - built == built + 1
