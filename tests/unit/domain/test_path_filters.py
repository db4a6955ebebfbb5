"""Path filters: the glob syntax, its validation, and the decision a binding's filters
make of a change (docs/github.md, "Path filters")."""

from __future__ import annotations

import pytest

from runplane.domain.errors import InvalidInput
from runplane.domain.path_filters import (
    FALLBACK_TRUNCATED,
    MAX_PATTERNS,
    ChangedFiles,
    PathFilters,
    decide,
    matches,
    valid_patterns,
)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("envs/prod/*.tf", "envs/prod/main.tf", True),
        ("envs/prod/*.tf", "envs/prod/sub/main.tf", False),  # * stays within a segment
        ("modules/**/*.tf", "modules/main.tf", True),  # ** may match no directory
        ("modules/**/*.tf", "modules/a/b/c/main.tf", True),
        ("modules/**/*.tf", "modules/a/b/readme.md", False),
        ("**/*.md", "README.md", True),
        ("**/*.md", "docs/a/guide.md", True),
        ("docs/**", "docs/a/guide.md", True),
        ("docs/**", "docs", False),  # a trailing ** is everything below, not the directory
        ("docs/", "docs/guide.md", True),
        ("/envs/prod/main.tf", "envs/prod/main.tf", True),  # a leading / is the root
        ("envs/?rod/main.tf", "envs/prod/main.tf", True),
        ("envs/?rod/main.tf", "envs//rod/main.tf", False),
        ("Envs/**", "envs/prod/main.tf", False),  # case-sensitive, as git paths are
        ("*.tf", "main.tf", True),
        ("*.tf", "envs/main.tf", False),
    ],
)
def test_a_path_matches_a_pattern_as_documented(pattern: str, path: str, expected: bool) -> None:
    # Given a pattern and a repository path / When matched / Then as the syntax says
    assert matches(pattern, path) is expected


def test_hostile_patterns_match_in_bounded_time() -> None:
    # Given patterns built to backtrack: stars and ** repeated, a long path that almost matches
    deep = "/".join(["a"] * 2000) + "/b"
    starry = "*" * 5000 + "b"
    # When matched / Then each answers (the matcher simulates positions; no exponential search)
    assert matches("/".join(["**"] * 500) + "/c", deep) is False
    assert matches("**/**/**/b", deep) is True
    assert matches("/".join(["*a*"] * 50) + "/c", deep) is False
    assert matches(starry, "a" * 5000) is False
    assert matches("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "a" * 10000) is False


def test_valid_patterns_are_normalised() -> None:
    # Given patterns with a leading slash and a duplicate / When validated
    kept = valid_patterns(["/modules/**/*.tf", "modules/**/*.tf", "docs/"], "trigger_patterns")
    # Then the slash goes, duplicates go, the order stays
    assert kept == ("modules/**/*.tf", "docs/")


@pytest.mark.parametrize(
    "bad",
    ["", "/", "a//b", "../x", "a/./b", "a**/b", "src/[ab].tf", "{a,b}", "!docs", "a\\b", "a\nb"],
)
def test_a_bad_pattern_is_refused_with_a_pointer(bad: str) -> None:
    # Given a list whose second pattern is bad / When validated
    with pytest.raises(InvalidInput) as refused:
        valid_patterns(["ok/**", bad], "ignore_patterns")
    # Then it is refused (422) pointing at that pattern
    assert refused.value.http_status == 422
    assert refused.value.pointer == "/ignore_patterns/1"


def test_patterns_are_bounded_in_number_and_length() -> None:
    with pytest.raises(InvalidInput):
        valid_patterns([f"d{i}/**" for i in range(MAX_PATTERNS + 1)], "trigger_patterns")
    with pytest.raises(InvalidInput):
        valid_patterns(["a" * 257], "trigger_patterns")
    with pytest.raises(InvalidInput):
        valid_patterns("docs/**", "trigger_patterns")  # a list, not a string


def _files(*paths: str) -> ChangedFiles:
    return ChangedFiles(paths)


def test_no_filters_triggers_every_change() -> None:
    decision = decide("ws-1", PathFilters(), "envs/prod", None)
    assert decision.triggered
    assert decision.reason == "the binding has no path filters"


def test_a_change_matching_no_trigger_pattern_is_skipped_with_its_counts() -> None:
    # Given a binding at the root triggered by modules/** / When only docs change
    decision = decide("ws-1", PathFilters(("modules/**",)), "", _files("docs/a.md", "README.md"))
    # Then it is skipped, saying why, over two files
    assert not decision.triggered
    assert decision.reason == "none of the 2 changed files matches the trigger patterns"
    assert (decision.files_considered, decision.files_matched) == (2, 0)


def test_the_working_directory_triggers_when_trigger_patterns_are_listed() -> None:
    filters = PathFilters(("modules/**",))
    assert decide("ws-1", filters, "envs/prod", _files("envs/prod/main.tf")).triggered
    # but not a directory that merely starts with the same letters
    assert not decide("ws-1", filters, "envs/prod", _files("envs/production/main.tf")).triggered


def test_ignore_patterns_win_over_triggers() -> None:
    filters = PathFilters((), ("**/*.md",))
    skipped = decide("ws-1", filters, "envs/prod", _files("envs/prod/README.md"))
    assert not skipped.triggered
    assert "ignore pattern" in skipped.reason
    ran = decide("ws-1", filters, "envs/prod", _files("envs/prod/README.md", "envs/prod/main.tf"))
    assert ran.triggered
    assert (ran.files_considered, ran.files_matched) == (2, 1)


def test_an_incomplete_list_runs_and_says_so() -> None:
    # Given GitHub listed only part of the files, none matching / When decided
    changed = ChangedFiles(("docs/a.md",), FALLBACK_TRUNCATED)
    decision = decide("ws-1", PathFilters(("modules/**",)), "", changed)
    # Then the change runs (fail open) and the fallback is recorded
    assert decision.triggered
    assert decision.fallback == FALLBACK_TRUNCATED
    assert decision.to_dict()["decision"] == "triggered"
