"""A runner session's token names its binding and what its calls read, ahead of its
secret part; a token of the first form names nothing."""

from __future__ import annotations

import pytest

from runplane.domain.capabilities import Binding, Phase
from runplane.domain.session_tokens import (
    MalformedToken,
    SessionHints,
    hinted_token,
    hints_of,
)
from runplane.services.capabilities import session_secret, session_token

SECRET = "A" * 43
HINTS = SessionHints(
    "run-" + "a" * 26,
    "att-" + "b" * 26,
    Phase.APPLY,
    workspace_id="ws-" + "c" * 26,
    pinned_sv_id="sv-" + "d" * 26,
    state_artifact_id="art-" + "e" * 26,
)


def test_a_token_names_its_binding_and_facts_and_reads_back_the_same() -> None:
    # Given a session's names
    # When its token is made and read
    token = hinted_token(HINTS, SECRET)

    # Then it reads back exactly those names, and stays short
    assert token.startswith("rps_2.")
    assert hints_of(token) == HINTS
    assert len(token) < 300


def test_a_token_naming_no_fact_leaves_their_fields_empty() -> None:
    # Given a session whose run pinned no state (and whose start knew no workspace)
    bare = SessionHints.of(Binding("run-1", "att-1", Phase.PLAN, "sbx-1"))

    # When its token is made and read
    token = hinted_token(bare, SECRET)

    # Then the facts read back as not named
    assert token == f"rps_2.run-1.att-1.plan....{SECRET}"
    assert hints_of(token) == bare


def test_a_token_of_the_first_form_names_nothing() -> None:
    # Given a token issued before tokens named their reads
    token = session_secret("rpc_handle", "cap-1")

    # When it is read
    # Then it names nothing (and is still a token: its session authenticates it)
    assert token.startswith("rps_")
    assert hints_of(token) is None


@pytest.mark.parametrize(
    "token",
    [
        f"rps_3.run-1.att-1.plan....{SECRET}",  # an unknown form
        f"rps_2.run-1.att-1.plan...{SECRET}",  # a field missing
        f"rps_2.run-1.att-1.plan.....{SECRET}",  # a field too many
        f"rps_2.run-1.att-1.destroy....{SECRET}",  # no such phase
        f"rps_2..att-1.plan....{SECRET}",  # no run
        "rps_2.run-1.att-1.plan....short",  # not a secret part
        f"rps_2.run-1.att-1.plan.ws/1...{SECRET}",  # not an ID
        f"rps_2.run-1.att-1.plan.{'w' * 65}...{SECRET}",  # too long an ID
    ],
)
def test_a_token_of_this_form_that_is_not_exactly_so_is_malformed(token: str) -> None:
    # Given a token no start issued
    # When it is read
    # Then it is malformed
    with pytest.raises(MalformedToken):
        hints_of(token)


def test_names_a_token_cannot_carry_give_a_token_of_the_first_form() -> None:
    # Given a session whose run ID holds the separator
    odd = SessionHints("run.1", "att-1", Phase.PLAN)

    # When its token is derived
    token = session_token("rpc_handle", "cap-1", odd)

    # Then it is of the first form, naming nothing
    assert not odd.sayable()
    assert token == session_secret("rpc_handle", "cap-1")
    with pytest.raises(ValueError, match="cannot carry"):
        hinted_token(odd, SECRET)


def test_a_token_s_secret_part_depends_on_its_names() -> None:
    # Given one handle and JTI
    # When tokens naming different facts are derived
    one = session_token("rpc_handle", "cap-1", HINTS)
    other = session_token(
        "rpc_handle", "cap-1", SessionHints(HINTS.run_id, HINTS.attempt_id, HINTS.phase)
    )

    # Then each is derived again the same, and their secret parts differ too
    assert one == session_token("rpc_handle", "cap-1", HINTS)
    assert one.rsplit(".", 1)[1] != other.rsplit(".", 1)[1]
