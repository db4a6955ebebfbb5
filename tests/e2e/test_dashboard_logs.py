"""The run page's logs over real HTTP: the runner's steps in words, no sandbox paths or
engine command lines, styled segments, and live reads that end at a line."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest

from functions.dashboard import actions
from runplane.domain.log_view import plain
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard import signed_in
from tests.e2e.test_managed_runs import HELLO, config, new_workspace

# What the engine's command lines named before the runner said its steps in words.
SANDBOX_WORDS = ("-no-color", "-out=", "-backend-config", "/engine/", "plan.bin", "$ terraform")


def finished_plan(local: Local, tmp_path: Path, prefix: str) -> str:
    """A finished plan-only run whose log carries markup and multi-byte characters (a
    literal of the configuration: variable values are redacted from logs)."""
    text = (HELLO / "main.tf").read_text(encoding="utf-8")
    assert '"platform team"' in text
    literal = '"plätform tēam ✓ <b>bold</b>"'
    run = local.client.create_run(
        new_workspace(local, prefix),
        config(tmp_path, text.replace('"platform team"', literal)),
        kind="plan_only",
    )
    local.client.watch(run["id"], timeout=180)
    return str(run["id"])


def test_the_run_page_shows_the_runners_steps_in_words_and_no_sandbox_internals(
    local: Local, tmp_path: Path
) -> None:
    # Given a finished plan, and its log as the CLI reads it
    run_id = finished_plan(local, tmp_path, "dash-logs-page")
    stored = local.client.log(run_id, "plan")
    browser = signed_in(local)

    # When its page is read
    page = browser.get(f"{local.url}/ui/runs/{run_id}", timeout=30).text

    # Then every reader gets the runner's steps in words, never a command line or path
    for words in SANDBOX_WORDS:
        assert words not in stored, words
        assert words not in page, words
    assert stored.startswith("==> Initializing the working directory\n")
    assert "\n==> Planning\n" in stored
    # And the page marks the steps and keeps the engine's messages, escaped
    assert '<span class="log-step">==&gt; Planning\n</span>' in page
    assert "Plan: 1 to add, 0 to change, 0 to destroy." in page
    assert "plätform tēam ✓ &lt;b&gt;bold&lt;/b&gt;" in page
    assert "<b>bold" not in page


def test_the_live_endpoint_returns_styled_segments_and_ends_each_read_at_a_line(
    local: Local, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a finished plan, and reads far shorter than its log
    run_id = finished_plan(local, tmp_path, "dash-logs-live")
    full = local.client.log(run_id, "plan")
    monkeypatch.setattr(actions, "LIVE_READ_BYTES", 256)
    browser = signed_in(local)

    # When the page follows the log from the start, as it does, to its end
    reads: list[dict[str, Any]] = []
    offset = 0
    while not (reads and reads[-1]["at_end"]):
        read = browser.get(
            f"{local.url}/ui/runs/{run_id}/logs/plan?offset={offset}", timeout=30
        ).json()
        reads.append(read)
        offset = read["next_offset"]

    # Then each read but the last ends at a line's end (no character, escape or path cut
    # in two), and together they are the stored log, byte for byte
    assert len(reads) > 3
    assert all(read["text"].endswith("\n") for read in reads[:-1])
    assert "".join(read["text"] for read in reads) == full
    assert reads[-1]["next_offset"] == len(full.encode())
    # And their segments are what the page shows of it: plain text, steps marked
    segments = [segment for read in reads for segment in read["segments"]]
    assert "".join(text for _, text in segments) == plain(full)
    assert ["log-step", "==> Planning\n"] in segments
    assert any("plätform tēam ✓ <b>bold</b>" in text for _, text in segments)


def test_another_organizations_log_is_not_found(local: Local, tmp_path: Path) -> None:
    # Given a finished plan, and a browser signed in to another organization
    run_id = finished_plan(local, tmp_path, "dash-logs-tenant")
    other, _ = local.other_organization("dash-logs-other")
    assert local.stack.services is not None
    browser = signed_in(local, local.stack.services.workspaces.organization_id_of(other))

    # When it asks for the run's log
    answer = browser.get(f"{local.url}/ui/runs/{run_id}/logs/plan?offset=0", timeout=30)

    # Then it is answered like a missing run, with nothing of the log
    assert answer.status_code == 404
    assert "Planning" not in html.unescape(answer.text)
