"""Capability handles and runner sessions: one conditional write decides every redemption."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from runplane.domain.artifacts import ArtifactKind
from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.entities import Organization
from runplane.domain.errors import (
    CapabilityConsumed,
    CapabilityExpired,
    CapabilityWrongAttempt,
    CapabilityWrongPhase,
    CapabilityWrongSandbox,
    SessionRefused,
    UnknownCapability,
)
from runplane.services.capabilities import Minted, RunnerSessions, new_handle
from runplane.store.capabilities import DynamoRunnerSessions
from tests.integration.conftest import Stack
from tests.integration.sandbox import new_binding

BOOTSTRAP, SECRET = CapabilityKind.BOOTSTRAP, CapabilityKind.SECRET


def mint(
    stack: Stack, org: Organization, kind: CapabilityKind, binding: Binding, minutes: int = 15
) -> Minted:
    return stack.capabilities.mint(
        kind,
        binding,
        lifetime=timedelta(minutes=minutes),
        organization_id=org.id,
        inputs=["art-" + "a" * 26],
    )


def test_only_the_hash_of_a_handle_is_stored(stack: Stack, org: Organization) -> None:
    minted = mint(stack, org, BOOTSTRAP, new_binding(stack))

    assert minted.handle.startswith("rpc_")
    assert len(minted.handle) >= 4 + 43  # 256 bits in base64url
    assert minted.handle not in repr(minted)
    assert minted.handle not in str(stack.scan())


def test_a_bootstrap_handle_yields_a_session_and_an_exact_replay_the_same_one(
    stack: Stack, org: Organization
) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, BOOTSTRAP, binding)

    first = stack.sessions.start(minted.handle, binding)
    after_first = stack.scan()
    replay = stack.sessions.start(minted.handle, binding)

    assert replay.session == first.session
    assert replay.token == first.token
    assert stack.scan() == after_first  # the replay wrote nothing
    assert stack.sessions.authenticate(first.token) == first.session
    assert first.session.binding == binding
    assert first.session.inputs == ("art-" + "a" * 26,)
    assert first.token not in str(after_first)
    claims = [i for i in after_first if i["PK"]["S"] == f"JTI#{minted.jti}"]
    assert len(claims) == 1


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"attempt_id": "att-" + "z" * 26}, CapabilityWrongAttempt),
        ({"phase": Phase.APPLY}, CapabilityWrongPhase),
        ({"sandbox_id": "sbx-" + "z" * 26}, CapabilityWrongSandbox),
    ],
)
def test_a_handle_presented_for_another_binding_is_refused_and_writes_nothing(
    stack: Stack, org: Organization, change: dict[str, object], error: type[Exception]
) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, BOOTSTRAP, binding)
    before = stack.scan()

    with pytest.raises(error):
        stack.sessions.start(minted.handle, replace(binding, **change))  # type: ignore[arg-type]

    assert stack.scan() == before
    # ...and once redeemed, a replay from another sandbox is refused the same way.
    stack.sessions.start(minted.handle, binding)
    redeemed = stack.scan()
    with pytest.raises(error):
        stack.sessions.start(minted.handle, replace(binding, **change))  # type: ignore[arg-type]
    assert stack.scan() == redeemed


def test_expired_and_unknown_handles_are_refused_distinctly(
    stack: Stack, org: Organization
) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, BOOTSTRAP, binding, minutes=1)
    before = stack.scan()

    with pytest.raises(UnknownCapability):
        stack.sessions.start(new_handle(), binding)
    stack.clock.advance(timedelta(minutes=2))
    with pytest.raises(CapabilityExpired):
        stack.sessions.start(minted.handle, binding)

    assert stack.scan() == before


def test_a_replay_after_expiry_is_refused(stack: Stack, org: Organization) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, BOOTSTRAP, binding, minutes=1)
    stack.sessions.start(minted.handle, binding)
    stack.clock.advance(timedelta(minutes=2))

    with pytest.raises(CapabilityExpired):
        stack.sessions.start(minted.handle, binding)


def test_a_handle_of_another_kind_is_unknown_here(stack: Stack, org: Organization) -> None:
    binding = new_binding(stack)
    secret = mint(stack, org, SECRET, binding)
    with pytest.raises(UnknownCapability):
        stack.sessions.start(secret.handle, binding)


def test_secret_capabilities_are_strictly_one_time(stack: Stack, org: Organization) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, SECRET, binding)

    stack.capabilities.redeem_once(minted.handle, SECRET, binding)
    after = stack.scan()
    with pytest.raises(CapabilityConsumed):
        stack.capabilities.redeem_once(minted.handle, SECRET, binding)
    assert stack.scan() == after


def test_concurrent_redemptions_of_one_bootstrap_handle_share_one_session(
    stack: Stack, org: Organization
) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, BOOTSTRAP, binding)
    contenders = 6
    start = threading.Barrier(contenders)
    grants: list[object] = []

    def redeem() -> None:
        start.wait()
        grants.append(stack.sessions.start(minted.handle, binding))

    threads = [threading.Thread(target=redeem) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(grants) == contenders
    assert len({g.session.id for g in grants}) == 1  # type: ignore[attr-defined]
    sessions = [i for i in stack.scan() if i["PK"]["S"].startswith("SESSION#")]
    assert len(sessions) == 1


def test_concurrent_redemptions_of_a_one_time_secret_have_one_winner(
    stack: Stack, org: Organization
) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, SECRET, binding)
    contenders = 6
    start = threading.Barrier(contenders)
    outcomes: list[object] = []

    def redeem() -> None:
        start.wait()
        try:
            stack.capabilities.redeem_once(minted.handle, SECRET, binding)
            outcomes.append("won")
        except CapabilityConsumed as refused:
            outcomes.append(refused)

    threads = [threading.Thread(target=redeem) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert outcomes.count("won") == 1
    assert len(outcomes) == contenders


def test_revocation_is_immediate(stack: Stack, org: Organization) -> None:
    binding = new_binding(stack)
    minted = mint(stack, org, BOOTSTRAP, binding)
    grant = stack.sessions.start(minted.handle, binding)

    assert stack.sessions.revoke_attempt(binding.attempt_id) == 1

    with pytest.raises(SessionRefused, match="revoked"):
        stack.sessions.authenticate(grant.token)
    with pytest.raises(SessionRefused, match="revoked"):
        stack.sessions.start(minted.handle, binding)


def test_sessions_end_with_their_authority_window(stack: Stack, org: Organization) -> None:
    sessions = RunnerSessions(
        stack.clock, stack.ids, DynamoRunnerSessions(), lifetime=timedelta(hours=1)
    )
    binding = new_binding(stack)
    grant = sessions.start(mint(stack, org, BOOTSTRAP, binding).handle, binding)
    sessions.authenticate(grant.token)

    stack.clock.advance(timedelta(hours=1))
    with pytest.raises(SessionRefused, match="expired"):
        sessions.authenticate(grant.token)
    with pytest.raises(ValueError, match="four-hour"):
        RunnerSessions(stack.clock, stack.ids, DynamoRunnerSessions(), lifetime=timedelta(hours=5))


def test_malformed_and_unknown_session_tokens_are_refused(stack: Stack) -> None:
    for token in ("", "Bearer x", "rps_" + "A" * 43):
        with pytest.raises(SessionRefused):
            stack.sessions.authenticate(token)


def test_no_handle_token_or_key_reaches_logs_errors_or_the_table(
    stack: Stack, org: Organization, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="runplane")
    binding = new_binding(stack)
    minted = mint(stack, org, BOOTSTRAP, binding)
    secrets_seen = [minted.handle]
    errors: list[str] = []
    for wrong in (replace(binding, sandbox_id="sbx-" + "q" * 26), binding, binding):
        try:
            grant = stack.sessions.start(minted.handle, wrong)
            secrets_seen.append(grant.token)
        except Exception as refused:
            errors.append(str(refused))
    upload = stack.transfers.begin_upload(grant.session, ArtifactKind.PLAN)
    secrets_seen += [upload.data_key.hex(), repr(upload.data_key)[2:-1]]

    logged = "\n".join(
        f"{r.getMessage()} {r.__dict__}" for r in caplog.records if r.name.startswith("runplane")
    )
    assert "bootstrap redemption refused" in logged
    assert "bootstrap redemption accepted" in logged
    assert minted.jti in logged
    assert errors
    table = str(stack.scan())
    for secret in secrets_seen:
        assert secret not in logged
        assert all(secret not in error for error in errors)
        assert secret not in table
    assert upload.data_key.hex() not in repr(upload)
