"""The apply's result over the in-memory unit of work: whether this attempt published the
current state is decided from the workspace's facts of its current version (written with
the pointer) when they name it, and from the versions read otherwise: facts that are
absent, or that name another version, fall back to the read and decide the same, and a
stamp of another fence never confirms, whichever way it is seen."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Never

import pytest

from runplane.domain.entities import ApplyLock, Run
from runplane.domain.parts import ApplyRecordState, AttemptBody, AttemptState, RunPart
from runplane.domain.publications import publication_of
from runplane.domain.run import RunStatus
from runplane.domain.state import StateVersion
from runplane.services.capabilities import Capabilities
from runplane.services.runner_reports import RunnerReports
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import InMemoryUnitOfWork, empty_workspace
from tests.fakes import InMemoryStateVersions, no_read_ahead
from tests.interleavings import APPLIED, published
from tests.service.conftest import Tier
from tests.service.scenarios import run_at

S = RunStatus
ATTEMPT_ID = "att-apply"
LOCK = ApplyLock("ws-1", "lock-apply", 1, "run-1")


class ReadCountingVersions(InMemoryStateVersions):
    """The in-memory versions, noting each version a unit of work reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def get(self, sv_id: str) -> StateVersion:
        self.reads.append(sv_id)
        return super().get(sv_id)


@dataclass
class Desk:
    tier: Tier
    versions: ReadCountingVersions
    reports: RunnerReports

    def run(self) -> Run:
        return self.tier.run_reader.get_run("run-1")

    def current(self, version: StateVersion, *, facts: StateVersion | None) -> None:
        """Make ``version`` current, the workspace carrying ``facts``' publication facts
        (none if None)."""
        directory = self.tier.directory.workspaces
        directory["ws-1"] = replace(
            directory["ws-1"],
            current_state_version_id=version.id,
            current_serial=version.serial,
            current_lineage=version.lineage,
            current_publication=None if facts is None else publication_of(facts),
        )

    def report(self) -> tuple[RunStatus, list[str]]:
        """The status the apply's success report leaves the run in, and the versions it
        read."""
        self.versions.reads.clear()
        status = RunStatus(self.reports.report_apply("run-1", ATTEMPT_ID, APPLIED))
        return status, list(self.versions.reads)


def _not_here() -> Never:
    raise AssertionError("an apply result reached a service the tier does not build")


@pytest.fixture
def desk(tier: Tier) -> Desk:
    """``run-1`` applying in ``ws-1`` under its apply lock (fence 1), holding the writer,
    its apply attempt open and its apply record started; no state version yet."""
    versions = ReadCountingVersions()

    def units() -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(
            tier.run_reader,
            tier.writer_queue,
            tier.sandboxes,
            directory=tier.directory,
            versions=versions,
        )

    reports = RunnerReports(
        tier.clock,
        tier.ids,
        run_lifecycle(tier.clock, tier.ids),
        Capabilities(tier.clock, tier.ids, units),
        tier.workflow,
        tier.launcher,
        control_plane_url="http://runplane.test",
        launch_controls=_not_here,
        policies=_not_here,
        units=units,
        reads_ahead=no_read_ahead,
    )
    now = tier.clock.now()
    tier.directory.workspaces["ws-1"] = replace(
        empty_workspace("ws-1", "org-acme", now),
        fence=LOCK.fence,
        lock_id=LOCK.lock_id,
        lock_run_id=LOCK.run_id,
        locked_at=now,
    )
    run = run_at(tier, S.APPLYING)
    tier.writer_queue.holders["ws-1"] = run.id
    body = {
        "attempt_id": ATTEMPT_ID,
        "sandbox_id": "sbx-apply",
        "phase": "apply",
        "launched_at": now.isoformat(),
        "slots": ["org#org-acme"],
        "sandbox_ref": "task-apply",
        "lock_id": LOCK.lock_id,
        "fence": LOCK.fence,
    }
    ledger = tier.run_reader
    ledger.add_part(
        RunPart(run.id, "attempt#apply", AttemptState.STARTED, body, "tok-apply", now, now)
    )
    ledger.add_part(RunPart(run.id, "apply", ApplyRecordState.STARTED, {}, None, now, now))
    tier.sandboxes.active["org#org-acme"] = 1
    return Desk(tier, versions, reports)


def ours(desk: Desk, sv_id: str, predecessor_id: str | None = None) -> StateVersion:
    """A version this attempt published (its run, attempt, sandbox, lock and fence)."""
    run = desk.run()
    attempt = AttemptBody.from_body(desk.tier.run_reader.parts(run.id)["attempt#apply"].body)
    version = replace(
        published(run, attempt, desk.tier.clock.now()), id=sv_id, predecessor_id=predecessor_id
    )
    desk.versions.add(version)
    return version


def another_fence(desk: Desk, sv_id: str) -> StateVersion:
    """A version stamped with this attempt's run, attempt, sandbox and lock, but another
    fence than the attempt was granted."""
    version = ours(desk, sv_id)
    stamped = replace(version, provenance={**(version.provenance or {}), "fence": LOCK.fence + 1})
    desk.versions.versions[sv_id] = stamped
    return stamped


def test_the_current_version_s_facts_confirm_the_publication_without_reading_it(
    desk: Desk,
) -> None:
    # Given the attempt's version current, the workspace carrying its facts
    version = ours(desk, "sv-1")
    desk.current(version, facts=version)
    # When the runner reports that it applied
    status, reads = desk.report()
    # Then the run succeeded, naming its version, and no version was read
    assert status is S.SUCCEEDED
    assert reads == []
    record = desk.tier.run_reader.parts("run-1")["apply"]
    assert (record.body["resulting_state_version_id"], record.body["state_published"]) == (
        "sv-1",
        True,
    )


def test_a_workspace_without_facts_reads_the_version_and_decides_the_same(desk: Desk) -> None:
    # Given the attempt's version current on a workspace that carries no facts (moved
    # before they were written, or by recovery)
    version = ours(desk, "sv-1")
    desk.current(version, facts=None)
    # When the runner reports that it applied
    status, reads = desk.report()
    # Then the version was read, and the run succeeded
    assert (status, reads) == (S.SUCCEEDED, ["sv-1"])


def test_facts_naming_another_version_are_not_used_and_never_confirm(desk: Desk) -> None:
    # Given the current version stamped under another fence, while the workspace
    # carries the facts of a version the attempt did publish, under another ID
    earlier = ours(desk, "sv-ours")
    current = another_fence(desk, "sv-current")
    desk.current(current, facts=earlier)
    # When the runner reports that it applied
    status, reads = desk.report()
    # Then the current version was read, and the run was not confirmed
    assert (status, reads) == (S.NEEDS_RECOVERY, ["sv-current"])


def test_facts_of_a_version_stamped_under_another_fence_never_confirm(desk: Desk) -> None:
    # Given the current version, stamped under another fence, carried with its facts
    current = another_fence(desk, "sv-current")
    desk.current(current, facts=current)
    # When the runner reports that it applied
    status, reads = desk.report()
    # Then the facts decide: not confirmed, though it is this run's publication
    assert (status, reads) == (S.NEEDS_RECOVERY, [])
    assert desk.tier.run_reader.parts("run-1")["apply"].body["state_published"] is True


def test_earlier_publications_of_the_apply_are_read_back_to_its_predecessor(desk: Desk) -> None:
    # Given two versions the attempt published, the second current with its facts
    first = ours(desk, "sv-1")
    second = ours(desk, "sv-2", predecessor_id=first.id)
    desk.current(second, facts=second)
    # When the runner reports that it applied
    status, reads = desk.report()
    # Then only the first was read, and the run succeeded
    assert (status, reads) == (S.SUCCEEDED, ["sv-1"])


def test_an_earlier_publication_of_another_fence_is_not_confirmed(desk: Desk) -> None:
    # Given the attempt's version current with its facts, after one of another fence
    first = another_fence(desk, "sv-1")
    second = ours(desk, "sv-2", predecessor_id=first.id)
    desk.current(second, facts=second)
    # When the runner reports that it applied
    status, reads = desk.report()
    # Then the walk read the first and refused it
    assert (status, reads) == (S.NEEDS_RECOVERY, ["sv-1"])
