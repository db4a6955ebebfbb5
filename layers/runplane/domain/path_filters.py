"""Path filters: which changed files of a push or pull request start a bound workspace's run.

A binding may list trigger patterns and ignore patterns, globs over repository paths
(relative to the repository's root, ``/``-separated, case-sensitive):

- ``*`` matches any characters but ``/`` (so, within one path segment), ``?`` one
  character but ``/``;
- ``**``, as a whole segment, matches any number of directories (none included); a
  trailing ``**`` (or a trailing ``/``) matches everything below the directory;
- a leading ``/`` is allowed and means the repository root, as it does anyway;
- nothing else is special: no character classes, braces or negation (refused, so a
  pattern never means something other than it reads).

A changed file counts when it matches a trigger pattern (or lies in the binding's
working directory, or the binding lists no trigger pattern) and matches no ignore
pattern. A change with no file that counts starts no run. When the changed files could
not all be listed, the change runs (fails open): a change is never skipped unseen.

Matching simulates the pattern as a set of positions, one path segment at a time, so
its cost is bounded by (pattern segments x path segments x segment lengths): no
pattern, however hostile, backtracks exponentially.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from runplane.domain.errors import InvalidInput

MAX_PATTERNS = 25
MAX_PATTERN_LENGTH = 256
# GitHub's own caps: a pull request lists at most 3,000 files, a comparison 300.
MAX_PULL_REQUEST_FILES = 3000
MAX_COMPARE_FILES = 300
_REFUSED_CHARACTERS = frozenset("[]{}!\\")
_ANY_DIRECTORIES = "**"

# Why the changed files are incomplete (the change then runs).
FALLBACK_TRUNCATED = "truncated"
FALLBACK_NEW_BRANCH = "new_branch"
FALLBACK_FORCE_PUSH = "force_push"
FALLBACK_UNAVAILABLE = "unavailable"
# ``{provider}``: the source that lists the changed files (GitHub, GitLab).
_FALLBACK_WORDS = {
    FALLBACK_TRUNCATED: "{provider} listed only part of the changed files",
    FALLBACK_NEW_BRANCH: "a new branch's first push has no previous commit to compare with",
    FALLBACK_FORCE_PUSH: "a force push rewrote the branch's history",
    FALLBACK_UNAVAILABLE: "{provider} did not list the changed files",
}


@dataclass(frozen=True)
class PathFilters:
    trigger_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.trigger_patterns or self.ignore_patterns)


def valid_patterns(values: object, field: str) -> tuple[str, ...]:
    """The patterns of one list, normalised (leading ``/`` removed, duplicates dropped),
    or ``InvalidInput`` pointing at the first bad one."""
    if not isinstance(values, list | tuple):
        raise InvalidInput(f"{field} must be a list of patterns", f"/{field}")
    if len(values) > MAX_PATTERNS:
        raise InvalidInput(f"{field} lists at most {MAX_PATTERNS} patterns", f"/{field}")
    kept: list[str] = []
    for index, value in enumerate(values):
        pattern = _valid_pattern(value, f"/{field}/{index}")
        if pattern not in kept:
            kept.append(pattern)
    return tuple(kept)


def _valid_pattern(value: object, pointer: str) -> str:
    if not isinstance(value, str) or not value.strip("/"):
        raise InvalidInput("a pattern must be a non-empty path", pointer)
    if len(value) > MAX_PATTERN_LENGTH:
        raise InvalidInput(f"a pattern is at most {MAX_PATTERN_LENGTH} characters", pointer)
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c in _REFUSED_CHARACTERS for c in value):
        raise InvalidInput(
            "a pattern may use only '*', '?' and '**' as wildcards (no control characters, "
            "backslashes, '[', ']', '{', '}' or '!')",
            pointer,
        )
    pattern = value.removeprefix("/")
    segments = pattern.removesuffix("/").split("/")
    if any(s in ("", ".", "..") for s in segments):
        raise InvalidInput("a pattern's segments may not be empty, '.' or '..'", pointer)
    if any(_ANY_DIRECTORIES in s and s != _ANY_DIRECTORIES for s in segments):
        raise InvalidInput("'**' must be a whole path segment (as in 'modules/**/*.tf')", pointer)
    return pattern


def _tokens(pattern: str) -> list[str]:
    """The pattern's segments, runs of ``**`` collapsed; a trailing ``**`` (or ``/``)
    needs at least one more segment: everything below the directory."""
    raw = pattern.removeprefix("/")
    if raw.endswith("/"):
        raw += _ANY_DIRECTORIES
    tokens: list[str] = []
    for segment in raw.split("/"):
        if segment == _ANY_DIRECTORIES and tokens and tokens[-1] == _ANY_DIRECTORIES:
            continue
        tokens.append(segment)
    if tokens and tokens[-1] == _ANY_DIRECTORIES:
        tokens.append("*")
    return tokens


def _segment_matches(pattern: str, text: str) -> bool:
    """``*`` and ``?`` within one segment: the greedy match with one resume point
    (linear-times-linear at worst, never exponential)."""
    p = t = 0
    star = resume = -1
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]):
            p += 1
            t += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, resume = p, t
            p += 1
        elif star >= 0:
            resume += 1
            p, t = star + 1, resume
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def _closure(states: set[int], tokens: Sequence[str]) -> set[int]:
    """A ``**`` may match no directory: its position also stands for the next one."""
    closed = set(states)
    for index in sorted(states):
        while index < len(tokens) and tokens[index] == _ANY_DIRECTORIES:
            index += 1
            closed.add(index)
    return closed


def matches(pattern: str, path: str) -> bool:
    """Whether a repository path matches a pattern (syntax in the module's docstring)."""
    tokens = _tokens(pattern)
    states = _closure({0}, tokens)
    for segment in path.strip("/").split("/"):
        advanced: set[int] = set()
        for index in states:
            if index >= len(tokens):
                continue
            token = tokens[index]
            if token == _ANY_DIRECTORIES:
                advanced.add(index)
            elif _segment_matches(token, segment):
                advanced.add(index + 1)
        if not advanced:
            return False
        states = _closure(advanced, tokens)
    return len(tokens) in states


@dataclass(frozen=True)
class ChangedFiles:
    """The files a push or pull request changed (a rename counts both names), and, when
    they could not all be listed, why (``fallback``: the change then runs)."""

    paths: tuple[str, ...]
    fallback: str | None = None

    @classmethod
    def unknown(cls, fallback: str) -> ChangedFiles:
        return cls((), fallback)


@dataclass(frozen=True)
class PathDecision:
    """What a binding's path filters made of a change: run it or not, why, and over
    how many files (``fallback`` when the list was incomplete and the change ran)."""

    workspace_id: str
    triggered: bool
    reason: str
    files_considered: int
    files_matched: int
    fallback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "decision": "triggered" if self.triggered else "skipped",
            "reason": self.reason,
            "files_considered": self.files_considered,
            "files_matched": self.files_matched,
            "fallback": self.fallback,
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> PathDecision:
        return cls(
            workspace_id=str(record["workspace_id"]),
            triggered=record.get("decision") == "triggered",
            reason=str(record.get("reason", "")),
            files_considered=int(record.get("files_considered", 0)),
            files_matched=int(record.get("files_matched", 0)),
            fallback=record.get("fallback") or None,
        )


def _any(patterns: Iterable[str], path: str) -> bool:
    return any(matches(pattern, path) for pattern in patterns)


def decide(
    workspace_id: str,
    filters: PathFilters,
    working_directory: str,
    changed: ChangedFiles | None,
    provider: str = "GitHub",
) -> PathDecision:
    """Whether a change runs a binding's workspace. ``changed`` is None when the binding
    has no filters (the files were not needed). With trigger patterns, a non-root
    working directory triggers too: a binding's own configuration always counts."""
    if not filters.active or changed is None:
        return PathDecision(workspace_id, True, "the binding has no path filters", 0, 0)
    considered = len(changed.paths)
    if changed.fallback is not None:
        template = _FALLBACK_WORDS.get(changed.fallback, changed.fallback)
        words = template.replace("{provider}", provider)
        return PathDecision(
            workspace_id,
            True,
            f"{words}: the change runs, so none is skipped unseen",
            considered,
            considered,
            changed.fallback,
        )
    prefix = f"{working_directory}/" if working_directory else None

    def triggers(path: str) -> bool:
        if not filters.trigger_patterns:
            return True
        return (prefix is not None and path.startswith(prefix)) or _any(
            filters.trigger_patterns, path
        )

    triggering = [p for p in changed.paths if triggers(p)]
    counted = [p for p in triggering if not _any(filters.ignore_patterns, p)]
    if counted:
        reason = f"{len(counted)} of {considered} changed files match the path filters"
        return PathDecision(workspace_id, True, reason, considered, len(counted))
    if not considered:
        reason = "the change lists no changed file"
    elif not triggering:
        reason = f"none of the {considered} changed files matches the trigger patterns"
    else:
        reason = (
            f"every changed file the trigger patterns match ({len(triggering)} of "
            f"{considered}) matches an ignore pattern"
        )
    return PathDecision(workspace_id, False, reason, considered, 0)
