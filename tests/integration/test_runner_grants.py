"""A runner's session start hands over the grants its phase needs: a download grant per
input and an upload ticket per artifact it uploads, issued as the routes issue them."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import pytest

from runplane.domain.artifacts import ArtifactKind
from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.errors import NotFound, UploadTicketRefused
from runplane.domain.identity import Principal
from runplane.domain.plan_summary import PlanSummary
from runplane.domain.upload_tickets import TICKET_LIFETIME
from runplane.services.artifacts import DownloadGrant, UploadGrant
from runplane.store import artifacts as artifact_store
from runplane.store import run_parts
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import Arena, planned, planning, show_json, to_approval
from tests.integration.dynamodb_requests import DynamoDBRequests
from tests.integration.sandbox import fetch, put, session_for


def start(arena: Arena, run_id: str, phase: str, bootstrap: str | None = None) -> dict[str, Any]:
    """The session start's reply to the sandbox of the run's ``phase`` attempt."""
    attempt = run_parts.require(run_id, f"attempt#{phase}").body
    handle = bootstrap or arena.launcher.requests[attempt["sandbox_id"]].bootstrap
    return arena.runner_api.start(
        handle,
        run_id=run_id,
        attempt_id=attempt["attempt_id"],
        phase=phase,
        sandbox_id=attempt["sandbox_id"],
    )


def principal(arena: Arena, started: dict[str, Any]) -> Principal:
    return arena.stack.identity.authenticate(f"Bearer {started['token']}")


def download_grant(wire: dict[str, Any]) -> DownloadGrant:
    return DownloadGrant(
        wire["artifact_id"],
        wire["url"],
        wire["sha256"],
        wire["size"],
        base64.b64decode(wire["data_key"]),
    )


def upload_grant(wire: dict[str, Any]) -> UploadGrant:
    return UploadGrant(
        wire["artifact_id"],
        wire["url"],
        wire["chunk_size"],
        wire["max_size"],
        base64.b64decode(wire["data_key"]),
        wire["ticket"],
    )


def configuration_of(run_id: str) -> str:
    return str(run_parts.require(run_id, "input").body["configuration_artifact_id"])


def test_a_plan_session_start_grants_its_inputs_and_uploads_in_its_manifest_read(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a planning run's sandbox redeeming its bootstrap handle
    _, run_id = planning(arena, "plan-grants")
    requests = DynamoDBRequests(monkeypatch)

    # When it starts its session
    started = start(arena, run_id, "plan")

    # Then it read the handle's record with the attempt it is for, wrote the session,
    # then sent only the manifest's one read: the run, its input and its inputs'
    # artifact records together; no upload wrote anything
    # (the first read is this test's own, of the attempt's IDs)
    assert requests.operations[1:] == ["BatchGetItem", "TransactWriteItems", "BatchGetItem"]
    # And the reply grants the configuration (the run has no variables), readable
    grants = started["grants"]
    config = configuration_of(run_id)
    assert list(grants["downloads"]) == [config]
    assert fetch(download_grant(grants["downloads"][config])) == b"terraform config"
    # And one upload ticket per artifact a plan uploads, each for its own artifact
    assert set(grants["uploads"]) == {"plan", "plan_json", "logs"}
    assert len({g["artifact_id"] for g in grants["uploads"].values()}) == 3
    # And they are usable for the URLs' lifetime
    assert grants["expires_in"] == 300
    # And the manifest itself carries no secret
    assert "grants" not in started["manifest"]
    assert "data_key" not in str(started["manifest"])


def test_an_apply_session_start_grants_its_plan_and_only_a_log_upload(arena: Arena) -> None:
    # Given a run whose plan was stored as the runner stores it, approved and applying
    _, run_id = planning(arena, "apply-grants")
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]
    report = planned(
        arena,
        run_id,
        PlanSummary(adds=1, has_changes=True),
        show_json(("a", ["create"])),
        plan=b"the saved plan",
    )
    arena.orchestration.report_plan(run_id, attempt, report)
    plan_id = report.plan_artifact_id
    to_approval(arena, run_id)
    arena.runs.decide(arena.admin, run_id, "approve", None)
    arena.orchestration.start_runner(run_id, "apply", "token-apply")

    # When its apply sandbox starts its session
    grants = start(arena, run_id, "apply")["grants"]

    # Then it is granted its configuration and its plan, and only the log's upload
    assert set(grants["downloads"]) == {configuration_of(run_id), plan_id}
    assert fetch(download_grant(grants["downloads"][plan_id])) == b"the saved plan"
    assert set(grants["uploads"]) == {"logs"}


def test_no_grant_is_issued_for_an_artifact_the_session_may_not_download(arena: Arena) -> None:
    # Given two planning runs, and a bootstrap handle for the first run's plan attempt
    # whose inputs name only the second run's configuration
    _, mine = planning(arena, "grant-mine")
    _, theirs = planning(arena, "grant-theirs")
    attempt = run_parts.require(mine, "attempt#plan").body
    binding = Binding(mine, attempt["attempt_id"], Phase.PLAN, attempt["sandbox_id"])
    minted = arena.stack.capabilities.mint(
        CapabilityKind.BOOTSTRAP,
        binding,
        lifetime=timedelta(minutes=5),
        organization_id=arena.org.id,
        inputs=[configuration_of(theirs)],
    )

    # When that session starts
    started = start(arena, mine, "plan", bootstrap=minted.handle)

    # Then nothing is granted: its run's configuration is not among its inputs, and the
    # other run's is not what its run needs
    assert started["grants"]["downloads"] == {}
    # And the download route refuses its own run's configuration, as before
    with pytest.raises(NotFound):
        arena.runner_api.download(principal(arena, started), configuration_of(mine))


def test_the_grants_check_what_the_download_route_checks(arena: Arena) -> None:
    # Given a session whose inputs are an artifact of its organization, one of another
    # organization and one that does not exist
    stack = arena.stack
    other = stack.tenancy.create_organization("elsewhere")
    ours = stack.artifacts.put(arena.org.id, ArtifactKind.CONFIGURATION, [b"ours"])
    theirs = stack.artifacts.put(other.id, ArtifactKind.CONFIGURATION, [b"theirs"])
    wanted = [ours.id, theirs.id, "art-missing"]
    session = session_for(stack, arena.org.id, inputs=wanted).session
    records = {i: artifact_store.get(i, reads=IdentityMap()) for i in (ours.id, theirs.id)}

    # When grants are issued for all three
    grants = stack.transfers.phase_grants(session, wanted, records, [])

    # Then only its own organization's artifact is granted, as the route would
    assert [g.artifact_id for g in grants.downloads] == [ours.id]
    assert fetch(grants.downloads[0]) == b"ours"
    with pytest.raises(NotFound):
        stack.transfers.download(session, theirs.id)


def test_a_ticket_from_the_session_start_registers_like_begin_upload_s(arena: Arena) -> None:
    # Given a planning run's session and its plan ticket from the session start, with
    # the plan uploaded to its URL
    _, run_id = planning(arena, "ticket-registers")
    started = start(arena, run_id, "plan")
    runner = principal(arena, started)
    grant = upload_grant(started["grants"]["uploads"]["plan"])
    size, sha256 = put(grant, b"a plan from the manifest's ticket")

    # When it registers the upload with that ticket
    registered = arena.runner_api.register(runner, grant.artifact_id, grant.ticket, size, sha256)

    # Then the plan is an artifact of its organization, reading back as uploaded
    assert registered == {"artifact_id": grant.artifact_id, "size": size, "sha256": sha256}
    read = arena.stack.artifacts.read(arena.org.id, grant.artifact_id)
    assert read == b"a plan from the manifest's ticket"


def test_a_ticket_from_the_session_start_is_refused_as_begin_upload_s_are(arena: Arena) -> None:
    # Given two planning runs' sessions, and the first one's tickets with its plan and
    # log uploaded
    _, run_id = planning(arena, "ticket-refused")
    _, other_run = planning(arena, "ticket-other")
    started = start(arena, run_id, "plan")
    runner = principal(arena, started)
    other = principal(arena, start(arena, other_run, "plan"))
    plan = upload_grant(started["grants"]["uploads"]["plan"])
    log = upload_grant(started["grants"]["uploads"]["logs"])
    size, sha256 = put(plan, b"plan")
    put(log, b"log")
    before = arena.stack.scan()

    # When another session registers it, a ticket of another kind is presented for it,
    # or the ticket has expired
    refusals = []
    for who, ticket in ((other, plan.ticket), (runner, log.ticket)):
        with pytest.raises(UploadTicketRefused) as refused:
            arena.runner_api.register(who, plan.artifact_id, ticket, size, sha256)
        refusals.append(refused.value.reason)
    arena.stack.clock.advance(TICKET_LIFETIME)
    with pytest.raises(UploadTicketRefused) as expired:
        arena.runner_api.register(runner, plan.artifact_id, plan.ticket, size, sha256)

    # Then each is refused as begin-upload's tickets are, and nothing was written
    assert refusals == ["not_issued", "not_issued"]
    assert expired.value.reason == "expired"
    assert arena.stack.scan() == before
    with pytest.raises(NotFound):
        arena.stack.artifacts.describe(arena.org.id, plan.artifact_id)
