"""The run log as the dashboard shows it: colour as classes, no terminal controls, no
sandbox paths, and reads that stop where the next one can start cleanly."""

from __future__ import annotations

import pytest

from runplane.domain.log_view import plain, readable_end, render

# Terraform 1.0.3's own words, as it prints them in a sandbox (-no-color, and no
# TF_IN_AUTOMATION: a run's env variables may unset it).
SAVED_PLAN = (
    "Plan: 1 to add, 0 to change, 0 to destroy.\n"
    "\n"
    "Saved the plan to: /work/engine/plan.bin\n"
    "\n"
    "To perform exactly these actions, run the following command to apply:\n"
    '    terraform apply "/work/engine/plan.bin"\n'
)
# The same engine with colour on: a plan's outputs and a diagnostic's box.
COLOURED_OUTPUTS = (
    "\x1b[1mChanges to Outputs:\x1b[0m\x1b[0m\n"
    '  \x1b[32m+\x1b[0m \x1b[0m\x1b[1m\x1b[0mgreeting\x1b[0m\x1b[0m = "hello"\n'
)
COLOURED_ERROR = (
    "\x1b[31m╷\x1b[0m\x1b[0m\n"
    "\x1b[31m│\x1b[0m \x1b[0m\x1b[1m\x1b[31mError: \x1b[0m\x1b[0m\x1b[1m"
    "Invalid value for input variable\x1b[0m\n"
    "\x1b[31m│\x1b[0m \x1b[0m\x1b[0m  on x.tfvars line 1:\n"
)


def test_the_engines_sandbox_paths_are_shown_relative_to_its_directory() -> None:
    # Given a plan's log that names the saved plan by its sandbox path
    # When it is shown
    shown = plain(SAVED_PLAN)

    # Then the plan file is named as the user knows it, and every other word stays
    assert "/work" not in shown
    assert "Saved the plan to: plan.bin\n" in shown
    assert '    terraform apply "plan.bin"\n' in shown
    assert shown.startswith("Plan: 1 to add, 0 to change, 0 to destroy.\n")


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        # the local stack's sandboxes, and the engine's configuration directory
        (
            "Error: Failed to read /tmp/sbx-ab12_x/engine/config/.terraform/modules.json",
            "Error: Failed to read .terraform/modules.json",
        ),
        ("-backend-config=/work/runner/backend.hcl", "-backend-config=backend.hcl"),
        # not a sandbox path: a URL, a relative path, a word that only looks like one
        ("see https://example.com/engine/docs", "see https://example.com/engine/docs"),
        ("modules/engine/main.tf line 3", "modules/engine/main.tf line 3"),
        ("the /engine/ word", "the /engine/ word"),
    ],
)
def test_only_absolute_paths_through_the_sandbox_are_shortened(line: str, shown: str) -> None:
    assert plain(line) == shown


def test_colours_and_bold_become_classes_and_reset_ends_them() -> None:
    # Given the engine's coloured output
    # When it is rendered
    segments = render(COLOURED_OUTPUTS + COLOURED_ERROR)

    # Then its text is what a terminal shows, in the styles it shows
    assert "".join(text for _, text in segments) == (
        "Changes to Outputs:\n"
        '  + greeting = "hello"\n'
        "╷\n"
        "│ Error: Invalid value for input variable\n"
        "│   on x.tfvars line 1:\n"
    )
    assert ("ansi-bold", "Changes to Outputs:") in segments
    assert ("ansi-fg-2", "+") in segments
    assert ("ansi-fg-1", "│") in segments
    assert ("ansi-bold ansi-fg-1", "Error: ") in segments
    assert ("ansi-bold", "Invalid value for input variable") in segments


@pytest.mark.parametrize(
    ("sgr", "classes"),
    [
        ("1;31", "ansi-bold ansi-fg-1"),
        ("91", "ansi-fg-9"),
        ("1;97", "ansi-bold ansi-fg-15"),
        ("1;31;22", "ansi-fg-1"),
        ("1;31;39", "ansi-bold"),
        ("31;", ""),  # an empty parameter is 0: a reset after the 31
        # 256-colour and true-colour: their numbers are not attributes (5 is not blink,
        # 1 is not bold), and they set no class
        ("38;5;1", ""),
        ("38;2;1;31;32", ""),
        ("48;5;1;1", "ansi-bold"),
        ("41", ""),  # a background: ignored
        ("4:3", ""),  # a sub-parameter form
    ],
)
def test_sgr_parameters(sgr: str, classes: str) -> None:
    assert render(f"\x1b[{sgr}mword") == [(classes, "word")]


def test_a_style_ends_with_its_line() -> None:
    # Given a colour set on one line and never reset
    # When rendered
    segments = render("\x1b[32mgreen\nplain\n")

    # Then the next line starts plain (a read that starts at a line renders the same)
    assert segments == [("ansi-fg-2", "green\n"), ("", "plain\n")]
    assert render("plain\n") == [("", "plain\n")]


def test_the_runners_step_lines_are_marked() -> None:
    segments = render("==> Planning\nNo changes.\n==> Reading the saved plan\n")

    assert segments == [
        ("log-step", "==> Planning\n"),
        ("ansi-bold", "No changes.\n"),
        ("log-step", "==> Reading the saved plan\n"),
    ]


def test_an_unstyled_engine_line_is_coloured_by_what_it_says() -> None:
    # Given a plan's log as the engine writes it without colour
    log = (
        "- Installing runplane/test v0.1.0...\n"
        "  # test_thing.a will be created\n"
        '  + resource "test_thing" "a" {\n'
        '      ~ name = "a" -> "b"\n'
        '-/+ resource "test_thing" "c" {\n'
        '  - resource "test_thing" "d" {\n'
        ' <= data "test_thing" "e" {\n'
        "│ Error: Invalid reference\n"
        "Warning: Deprecated\n"
        "Plan: 1 to add, 1 to change, 1 to destroy.\n"
        "\x1b[35m  + styled by the log itself\x1b[0m\n"
    )

    # Then each line has the colour the engine gives it: changes by their symbol when
    # indented (init's "- Installing" is not a change), diagnostics and summaries bold,
    # and a line with its own style keeps it
    assert [render(line)[0][0] for line in log.splitlines(keepends=True)] == [
        "",
        "",
        "ansi-fg-2",
        "ansi-fg-3",
        "ansi-fg-1",
        "ansi-fg-1",
        "ansi-fg-4",
        "ansi-bold ansi-fg-1",
        "ansi-bold ansi-fg-3",
        "ansi-bold",
        "ansi-fg-5",
    ]


@pytest.mark.parametrize(
    ("hostile", "shown"),
    [
        # markup is text: the renderer never builds markup (the page escapes it)
        ("<script>alert(1)</script>\n", "<script>alert(1)</script>\n"),
        # an OSC 8 hyperlink keeps its text and loses its target, with either ending
        ("\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ here", "click here"),
        ("\x1b]8;;javascript:alert(1)\x07click\x1b]8;;\x07", "click"),
        # a window title, cursor movement, erasing, a device control string
        ("\x1b]0;pwned\x07a\x1b[2J\x1b[1;1Hb\x1b[?25lc", "abc"),
        ("\x1bP1$r0m\x1b\\d", "d"),
        # unterminated sequences end at their line's end; the next line is untouched
        ("before\x1b]8;;https://x\nafter\n", "before\nafter\n"),
        ("x\x1b[31", "x"),
        ("x\x1b", "x"),
        ("x\x1b[", "x"),
        # control characters (not newline or tab), C1 controls, text reordering
        ("a\rb\x08c\x00d\x7fe\x9bf\tg\n", "abcdef\tg\n"),
        ("file\u202etxt.exe", "filetxt.exe"),
    ],
)
def test_terminal_controls_are_dropped(hostile: str, shown: str) -> None:
    segments = render(hostile)

    assert "".join(text for _, text in segments) == shown
    assert all(classes in {"", "ansi-fg-1"} for classes, _ in segments)


def test_a_huge_hostile_log_renders_in_one_pass() -> None:
    # Given a megabyte of unterminated escapes, open OSC strings and path-like slashes
    # (patterns a backtracking parser would take quadratic time over)
    hostile = (
        "\x1b["
        + "1;" * 200_000
        + "\n"
        + "\x1b]"
        + "8;;" * 100_000
        + "\n"
        + "/a" * 100_000
        + " /" * 100_000
        + "\n"
        + ("line\x1b[1m\n" * 20_000)
    )

    # When it is rendered
    shown = plain(hostile)

    # Then it is read to the end (a linear parse finishes; pytest's timeout would not)
    assert shown.count("\n") == 20_003
    assert shown.endswith("line\n")


@pytest.mark.parametrize(
    ("data", "more", "end"),
    [
        (b"one\ntwo\nthr", True, 8),  # stops after the last whole line
        (b"one\ntwo\nthr", False, 11),  # the log's end: all of it
        (b"one\ntwo\n", True, 8),
        (b"abc\x1b[3", True, 3),  # a line longer than the read: before its escape
        (b"\x1b[31mabc", True, 8),  # an escape at the start cannot be held back
        (b"abcdef", True, 6),
        (b"", True, 0),
        ("caf\u00e9\nna\u00efve".encode(), True, 6),
    ],
)
def test_a_read_stops_where_the_next_can_start(data: bytes, more: bool, end: int) -> None:
    assert readable_end(data, more=more) == end


def test_a_log_read_in_pieces_renders_as_the_whole() -> None:
    # Given a coloured log with multi-byte characters, read in pieces shorter than the
    # log but longer than its lines
    log = (COLOURED_OUTPUTS + COLOURED_ERROR + "naïve ✓ \x1b[1mbold\x1b[0m\n" * 3).encode()
    pieces: list[str] = []
    offset = 0
    while offset < len(log):
        # (each read cut where the service cuts: not inside a UTF-8 character)
        read = log[offset : offset + 100]
        while read and not _decodes(read) and offset + len(read) < len(log):
            read = read[:-1]
        end = readable_end(read, more=offset + len(read) < len(log))
        pieces.append(read[:end].decode())
        offset += end

    # When each piece is rendered as the page does
    rendered = [segment for piece in pieces for segment in render(piece)]

    # Then the pieces show what the whole log shows
    assert "".join(text for _, text in rendered) == plain(log.decode())
    assert [s for s in rendered if s[0]] == [s for s in render(log.decode()) if s[0]]


def _decodes(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True
