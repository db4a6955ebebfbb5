"""A run's logs in a real browser: followed live they read as a reload renders them, the
runner's steps stand out, every log colour is readable, and a long line fits a phone."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import RUN_TIMEOUT_MS, Shoot
from tests.browser.test_destroy_and_drift import CONTRAST, DESKTOP, PHONE, contrast
from tests.browser.test_run_page import sign_in
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, config, new_workspace

# What the page shows of a log, as text and as its styled runs.
_SHOWN = """pre => [pre.textContent,
  [...pre.querySelectorAll("span")].map(span => [span.className, span.textContent])]"""

# One span of each colour class (and a step) at the end of the log, as the script adds them.
_EVERY_CLASS = """pre => {
  const classes = ["log-step", "ansi-bold"];
  for (let n = 0; n < 16; n++) { classes.push("ansi-fg-" + n); }
  for (const name of classes) {
    const span = document.createElement("span");
    span.className = name + " probe";
    span.textContent = name + " ";
    pre.appendChild(span);
  }
}"""


def merged(spans: list[list[str]]) -> list[tuple[str, str]]:
    """Styled runs with neighbours of one style joined (reads may split a run in two)."""
    runs: list[tuple[str, str]] = []
    for classes, text in spans:
        if runs and runs[-1][0] == classes:
            runs[-1] = (classes, runs[-1][1] + text)
        else:
            runs.append((classes, text))
    return runs


def test_a_followed_log_reads_as_a_reload_renders_it_at_desktop_and_phone_widths(
    local: Local, page: Page, shoot: Shoot, tmp_path: Path
) -> None:
    # Given a plan whose output has one very long word, and its page opened at once
    text = (HELLO / "main.tf").read_text(encoding="utf-8")
    long_word = "platform-" + "x" * 400
    assert '"platform team"' in text
    directory = config(tmp_path, text.replace('"platform team"', f'"{long_word}"'))
    run = local.client.create_run(new_workspace(local, "browser-logs"), directory, kind="plan_only")
    sign_in(page, local)
    page.goto(f"/ui/runs/{run['id']}")

    # When the page follows the run to its end by itself
    log = page.locator("#plan-log pre")
    expect(log).to_have_attribute("data-done", "1", timeout=RUN_TIMEOUT_MS)
    expect(log).to_contain_text("Plan: 1 to add")
    followed = log.evaluate(_SHOWN)

    # Then a reload shows the same text, with the runner's steps marked the same way
    page.reload()
    reloaded = page.locator("#plan-log pre").evaluate(_SHOWN)
    assert followed[0] == reloaded[0]
    assert merged(followed[1]) == merged(reloaded[1])
    assert ["log-step", "==> Planning\n"] in reloaded[1]
    # And the engine's planned change is coloured as the engine colours it
    assert any(c == "ansi-fg-2" and "+ resource" in t for c, t in reloaded[1])
    assert "-no-color" not in reloaded[0]
    assert "/engine/" not in reloaded[0]

    for width in (DESKTOP, PHONE):
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        log = page.locator("#plan-log pre")
        log.evaluate(_EVERY_CLASS)
        # Then nothing is wider than the screen, the long word wraps
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        # And the steps are bold, and every class's colour is readable on the log
        step = log.locator(".log-step").first
        assert step.evaluate("e => getComputedStyle(e).fontWeight") == "700"
        probes = log.locator(".probe")
        expect(probes).to_have_count(18)
        for probe in probes.all():
            assert contrast(probe) >= CONTRAST, probe.get_attribute("class")
        shoot(f"logs-{width}")
