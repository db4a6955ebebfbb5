"""Documents derived from code must match it: run `make docs` when this fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from runplane import docs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", docs.DOCUMENTS)
def test_generated_blocks_are_current(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    assert docs.render(text) == text, f"{name} is stale: run `make docs`"


def test_every_block_is_used_somewhere() -> None:
    texts = "".join((ROOT / name).read_text(encoding="utf-8") for name in docs.DOCUMENTS)
    for block in docs.BLOCKS:
        assert f"<!-- generated:{block} -->" in texts


def test_a_changed_table_makes_the_page_stale() -> None:
    text = (ROOT / "docs/run-lifecycle.md").read_text(encoding="utf-8")
    edited = text.replace("| `queued` | `planning` |", "| `queued` | `applying` |")
    assert edited != text
    assert docs.render(edited) == text
