"""Remote operations on moto with a fake clock: what expires, and what a refusal writes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runplane.domain.capabilities import Phase
from runplane.domain.errors import LaunchDenied, NotFound, UploadUrlExpired
from runplane.domain.run import RunKind
from runplane.domain.tfe_runs import ExecutionMode, TfeRunStatus, tfe_status
from runplane.services.launch_controls import Controls, LaunchControls
from runplane.services.remote_runs import LOG_URL_SECONDS, RemoteRuns, RunRequest
from runplane.store.launch_controls import DynamoLaunchControls
from tests.integration.arena import Arena, created, planning

UPLOAD_SECONDS = 300


def remote_runs(arena: Arena) -> RemoteRuns:
    return arena.stack.services.remote_runs


def remote_workspace(arena: Arena, name: str) -> str:
    created = arena.stack.workspaces.create(
        arena.admin, arena.org.name, name, execution_mode=ExecutionMode.REMOTE
    )
    return created.id


def test_an_expired_upload_url_is_410_and_stores_nothing(arena: Arena) -> None:
    # Given a configuration version whose upload URL has outlived its lifetime
    remote = remote_runs(arena)
    version = remote.new_configuration_version(
        arena.admin, remote_workspace(arena, "late"), speculative=True, auto_queue=False
    )
    assert version.upload_token is not None
    arena.stack.clock.current += timedelta(seconds=UPLOAD_SECONDS)
    before, objects = arena.stack.scan(), arena.stack.bucket_keys()

    # When the archive arrives
    with pytest.raises(UploadUrlExpired):
        remote.upload(version.upload_token, b"archive")

    # Then nothing was written and the version is still pending
    assert arena.stack.scan() == before
    assert arena.stack.bucket_keys() == objects
    assert remote.configuration_version(arena.admin, version.id).status == "pending"


def test_a_denied_launch_writes_nothing(arena: Arena) -> None:
    # Given an uploaded configuration version, and launches disabled for the organization
    remote = remote_runs(arena)
    ws_id = remote_workspace(arena, "denied")
    version = remote.new_configuration_version(
        arena.admin, ws_id, speculative=False, auto_queue=False
    )
    assert version.upload_token is not None
    remote.upload(version.upload_token, b"archive")
    controls = LaunchControls(
        arena.stack.clock, DynamoLaunchControls(), region="us-east-1", policy_runtime="none"
    )
    controls.set(arena.admin, "organization", Controls(launches_enabled=False))
    before, objects = arena.stack.scan(), arena.stack.bucket_keys()

    # When a run is created through the TFE runs API
    with pytest.raises(LaunchDenied):
        remote.create(arena.admin, ws_id, version.id, RunRequest())

    # Then the refusal wrote nothing
    assert arena.stack.scan() == before
    assert arena.stack.bucket_keys() == objects


def test_a_log_read_url_expires_and_names_one_run(arena: Arena) -> None:
    # Given runs planning, and a log-read URL of the first one's plan
    remote = remote_runs(arena)
    _, first = planning(arena, "logs-a")
    _, second = planning(arena, "logs-b")
    run = arena.stack.lifecycle.runs.get(first)
    _, _, run_id, phase, expires, grant = remote.log_url_path(run, Phase.PLAN).split("/")

    # When it is read now, for another run, and after it expired
    now = remote.log_by_grant(run_id, Phase(phase), int(expires), grant, 0, 1024)
    with pytest.raises(NotFound):
        remote.log_by_grant(second, Phase(phase), int(expires), grant, 0, 1024)
    arena.stack.clock.current += timedelta(seconds=LOG_URL_SECONDS)
    with pytest.raises(NotFound):
        remote.log_by_grant(run_id, Phase(phase), int(expires), grant, 0, 1024)

    # Then only the first read was served (the log has not started: just STX)
    assert now.data == b"\x02"


def test_an_apply_behind_another_runs_reservation_reads_pending_until_handed_it(
    arena: Arena,
) -> None:
    # Given a run holding a workspace's writer reservation (planning), an apply queued
    # behind it, one not dispatched yet, and a speculative plan of the same workspace
    remote = remote_runs(arena)
    ws_id, holder = planning(arena, "queue-holder")
    _, queued = created(arena, "queue-queued", ws_id)
    arena.orchestration.queue(queued)
    waited = arena.orchestration.wait_for_writer(queued, "token-queued", arena.scope_of(queued))
    _, fresh = created(arena, "queue-fresh", ws_id)
    _, speculative = created(arena, "queue-plan", ws_id, RunKind.SPECULATIVE)

    # When they are read as TFE clients read them
    runs = [arena.stack.lifecycle.runs.get(r) for r in (holder, queued, fresh, speculative)]
    views = {view.run.id: view.facts for view in remote.views(runs)}

    # Then the applies wait behind the holder, pending; the holder and the plan wait
    # behind nobody
    assert waited["held"] is False
    assert (views[queued].waiting_for, views[fresh].waiting_for) == (holder, holder)
    assert tfe_status(views[queued]) is TfeRunStatus.PENDING
    assert tfe_status(remote.read(arena.admin, fresh).facts) is TfeRunStatus.PENDING
    assert views[holder].waiting_for is None
    assert views[speculative].waiting_for is None
    assert tfe_status(views[speculative]) is TfeRunStatus.PLAN_QUEUED

    # When the holder is canceled, handing the reservation to the queued apply
    arena.runs.cancel(arena.admin, holder, arena.launcher)

    # Then that apply is queued to plan, and the other one waits behind it
    assert tfe_status(remote.read(arena.admin, queued).facts) is TfeRunStatus.PLAN_QUEUED
    assert remote.read(arena.admin, fresh).facts.waiting_for == queued
