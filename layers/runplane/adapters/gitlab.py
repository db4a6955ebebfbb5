"""GitLab's REST API (v4) with a project access token: commit archives, commit statuses,
merge request notes and the files a push or merge request changed.

The token travels only in the ``PRIVATE-TOKEN`` header to the bound instance's own API;
redirects are not followed (they could carry it elsewhere). It never reaches a log line,
an error message or storage: errors name the request and GitLab's status code only.
Failures worth retrying raise ``GitHubUnavailable``, the error the source workflow
retries for every source provider.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import IO, Any

from runplane.adapters.github import Archive, NoRedirect, _stream
from runplane.domain.errors import GitHubUnavailable, SourceRefused
from runplane.domain.path_filters import FALLBACK_TRUNCATED, ChangedFiles

# A merge request's diffs are paged: at most this many files are read (as many as GitHub
# lists), then the list counts as truncated. A comparison lists at most the instance's
# ``diff_max_files`` (1,000 by default): a list that long may have been cut.
MAX_MERGE_REQUEST_FILES = 3000
MAX_COMPARE_FILES = 1000
_PER_PAGE = 100


class GitLabProject:
    """One project of one GitLab instance, read and annotated with one access token."""

    def __init__(self, base_url: str, project: str, token: str, *, timeout: float = 20.0) -> None:
        self._api = f"{base_url.rstrip('/')}/api/v4/projects/{urllib.parse.quote(project, safe='')}"
        self._token = token
        self._timeout = timeout
        self._opener = urllib.request.build_opener(NoRedirect)

    def __repr__(self) -> str:
        return "GitLabProject(<token hidden>)"

    def download_archive(self, sha: str, sink: IO[bytes], max_bytes: int) -> Archive:
        """Stream the commit's ``tar.gz`` into ``sink``, hashing it; refused past ``max_bytes``."""
        query = urllib.parse.urlencode({"sha": sha})
        request = self._request("GET", f"{self._api}/repository/archive.tar.gz?{query}")
        try:
            response = self._opener.open(request, timeout=self._timeout)
        except urllib.error.HTTPError as error:
            raise _failure(error.code, f"the archive of commit {sha[:12]}") from None
        except OSError as error:
            raise GitHubUnavailable(f"GitLab is unreachable ({type(error).__name__})") from None
        return _stream(response, sink, max_bytes)

    def post_status(self, sha: str, status: Mapping[str, str]) -> None:
        """``POST /projects/:id/statuses/:sha`` (state, name, description, target_url)."""
        url = f"{self._api}/statuses/{urllib.parse.quote(sha, safe='')}"
        request = self._request("POST", url, json.dumps(dict(status)).encode())
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                response.read(64 * 1024)
        except urllib.error.HTTPError as error:
            raise _failure(error.code, "the commit status") from None
        except OSError as error:
            raise GitHubUnavailable(f"GitLab is unreachable ({type(error).__name__})") from None

    def create_note(self, merge_request: int, body: str) -> int:
        """``POST /projects/:id/merge_requests/:iid/notes``: the new note's ID."""
        created = self._json("POST", f"{self._notes(merge_request)}", {"body": body})
        return _note_id(created)

    def edit_note(self, merge_request: int, note_id: int, body: str) -> None:
        self._json("PUT", f"{self._notes(merge_request)}/{int(note_id)}", {"body": body})

    def find_note(self, merge_request: int, marker: str) -> int | None:
        """The first note (of the first 100) whose body starts with ``marker``."""
        listed = self._json("GET", f"{self._notes(merge_request)}?per_page=100&sort=asc", None)
        for note in listed if isinstance(listed, list) else []:
            if isinstance(note, dict) and str(note.get("body", "")).startswith(marker):
                return _note_id(note)
        return None

    def merge_request_files(self, merge_request: int) -> ChangedFiles:
        """``GET /projects/:id/merge_requests/:iid/diffs``, page by page; an instance
        without that endpoint (before GitLab 15.7) answers 404, and ``/changes`` is read
        instead (its ``overflow`` says when GitLab cut the list)."""
        base = f"{self._api}/merge_requests/{int(merge_request)}"
        paths: list[str] = []
        page: str | None = "1"
        while page and len(paths) < MAX_MERGE_REQUEST_FILES:
            url = f"{base}/diffs?{urllib.parse.urlencode({'page': page, 'per_page': _PER_PAGE})}"
            listed, next_page = self._listing(url, "the merge request's changed files")
            if listed is None:
                return self._merge_request_changes(base)
            if not isinstance(listed, list):
                raise GitHubUnavailable("GitLab answered a merge request's diffs with no list")
            paths.extend(_diff_paths(listed))
            page = next_page
        return _changed(paths, FALLBACK_TRUNCATED if page else None)

    def _merge_request_changes(self, base: str) -> ChangedFiles:
        changes, _ = self._listing(f"{base}/changes", "the merge request's changes")
        if not isinstance(changes, dict) or not isinstance(changes.get("changes"), list):
            raise SourceRefused("GitLab did not list the merge request's changes")
        overflow = changes.get("overflow") is True
        return _changed(_diff_paths(changes["changes"]), FALLBACK_TRUNCATED if overflow else None)

    def compare_files(self, before: str, after: str) -> ChangedFiles:
        """``GET /projects/:id/repository/compare?from=&to=&straight=true``: the files
        that differ between the branch's previous head and its new one, compared
        directly (not from their merge base), so a force push is compared right too."""
        query = urllib.parse.urlencode({"from": before, "to": after, "straight": "true"})
        compared, _ = self._listing(f"{self._api}/repository/compare?{query}", "the comparison")
        diffs = compared.get("diffs") if isinstance(compared, dict) else None
        if not isinstance(compared, dict) or not isinstance(diffs, list):
            raise SourceRefused("GitLab did not compare the push's commits")
        cut = (
            compared.get("compare_timeout") is True
            or compared.get("overflow") is True
            or len(diffs) >= MAX_COMPARE_FILES
        )
        return _changed(_diff_paths(diffs), FALLBACK_TRUNCATED if cut else None)

    def _listing(self, url: str, what: str) -> tuple[Any, str | None]:
        """A JSON answer and its ``X-Next-Page``; None for a 404 (no such endpoint)."""
        request = self._request("GET", url)
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read(16 * 1024 * 1024)
                next_page = (response.headers.get("X-Next-Page") or "").strip()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None, None
            raise _failure(error.code, what) from None
        except OSError as error:
            raise GitHubUnavailable(f"GitLab is unreachable ({type(error).__name__})") from None
        try:
            listed = json.loads(raw or b"null")
        except ValueError:
            raise GitHubUnavailable(f"GitLab answered {what} with no JSON") from None
        return listed, next_page if next_page.isdigit() else None

    def _notes(self, merge_request: int) -> str:
        return f"{self._api}/merge_requests/{int(merge_request)}/notes"

    def _json(self, method: str, url: str, body: Mapping[str, str] | None) -> Any:
        data = None if body is None else json.dumps(dict(body)).encode()
        request = self._request(method, url, data)
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read(4 * 1024 * 1024)
        except urllib.error.HTTPError as error:
            raise _failure(error.code, "the merge request note") from None
        except OSError as error:
            raise GitHubUnavailable(f"GitLab is unreachable ({type(error).__name__})") from None
        try:
            return json.loads(raw or b"null")
        except ValueError:
            raise GitHubUnavailable("GitLab answered a note request with no JSON") from None

    def _request(self, method: str, url: str, body: bytes | None = None) -> urllib.request.Request:
        headers = {"PRIVATE-TOKEN": self._token, "User-Agent": "runplane"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        return urllib.request.Request(url, data=body, method=method, headers=headers)  # noqa: S310


def _diff_paths(diffs: Any) -> list[str]:
    """Both names of each diff (a rename changes two paths)."""
    paths: list[str] = []
    for diff in diffs if isinstance(diffs, list) else []:
        if isinstance(diff, dict):
            paths.extend(
                p for p in (diff.get("old_path"), diff.get("new_path")) if isinstance(p, str) and p
            )
    return paths


def _changed(paths: list[str], fallback: str | None) -> ChangedFiles:
    return ChangedFiles(tuple(dict.fromkeys(paths)), fallback)


def _note_id(note: Any) -> int:
    found = note.get("id") if isinstance(note, dict) else None
    if not isinstance(found, int) or isinstance(found, bool):
        raise GitHubUnavailable("GitLab answered a note request without a note ID")
    return found


def _failure(code: int, what: str) -> Exception:
    # The body may echo the request; only the status is reported.
    if code in {429, 500, 502, 503, 504}:
        return GitHubUnavailable(f"GitLab answered {code} for {what}; retrying later")
    return SourceRefused(f"GitLab refused {what} ({code})")
