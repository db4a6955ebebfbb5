from __future__ import annotations

import pytest

from runplane.domain.ids import IdKind, derived_id, kind_of

BODY = "a" * 26


def test_a_well_formed_id_names_its_kind() -> None:
    assert kind_of(f"run-{BODY}") is IdKind.RUN


@pytest.mark.parametrize(
    "candidate",
    [f"run-{BODY}\n", f"run-{BODY}x", f" run-{BODY}", f"nope-{BODY}", "run-", f"RUN-{BODY}"],
)
def test_anything_else_names_no_kind(candidate: str) -> None:
    # A trailing newline is not part of an ID: "$" alone would have accepted it.
    assert kind_of(candidate) is None


def test_a_derived_id_is_a_well_formed_id_that_the_same_parts_always_name() -> None:
    # Given a source ingestion and a workspace
    parts = (f"src-{BODY}", f"ws-{'b' * 26}")
    # When the run ID is derived twice, and for another workspace
    first, again = derived_id(IdKind.RUN, *parts), derived_id(IdKind.RUN, *parts)
    other = derived_id(IdKind.RUN, parts[0], f"ws-{'c' * 26}")
    # Then it is the same well-formed run ID both times, and another workspace's differs
    assert first == again
    assert kind_of(first) is IdKind.RUN
    assert other != first
