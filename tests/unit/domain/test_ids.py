from __future__ import annotations

import pytest

from runplane.domain.ids import IdKind, kind_of

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
