"""A fake GitLab (REST API v4) served over real HTTP on 127.0.0.1: commit archives,
commit statuses, merge request notes, a merge request's diffs (paged, with
``X-Next-Page``) and a comparison of two commits, each answered only with the project's access
token in ``PRIVATE-TOKEN`` (a wrong or missing token is 401, as on GitLab). Projects are
addressed by numeric ID or by URL-encoded path, like GitLab's own."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.github_fake import tarball

PROJECT = r"^/api/v4/projects/([^/]+)"
ARCHIVE_PATH = re.compile(PROJECT + r"/repository/archive\.tar\.gz$")
STATUS_PATH = re.compile(PROJECT + r"/statuses/([0-9a-f]{40})$")
NOTES_PATH = re.compile(PROJECT + r"/merge_requests/(\d+)/notes$")
NOTE_PATH = re.compile(PROJECT + r"/merge_requests/(\d+)/notes/(\d+)$")
DIFFS_PATH = re.compile(PROJECT + r"/merge_requests/(\d+)/diffs$")
COMPARE_PATH = re.compile(PROJECT + r"/repository/compare$")


@dataclass
class Project:
    id: int
    path: str
    token: str
    archives: dict[str, bytes] = field(default_factory=dict)
    # The files a merge request changed (by iid), and what differs between two commits.
    merge_request_files: dict[int, list[str]] = field(default_factory=dict)
    compared_files: dict[tuple[str, str], list[str]] = field(default_factory=dict)


@dataclass
class FakeGitLab:
    projects: list[Project] = field(default_factory=list)
    # What was asked: (project path, sha) downloads, statuses, notes and refusals.
    downloads: list[tuple[str, str]] = field(default_factory=list)
    statuses: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    notes: dict[tuple[str, int], dict[int, str]] = field(default_factory=dict)
    note_writes: list[tuple[str, str, int, int]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    # Which changed-file listings were asked for: (kind, project path, iid or from..to).
    files_asked: list[tuple[str, str, str]] = field(default_factory=list)
    # Every PRIVATE-TOKEN header received (a test checks none leaks elsewhere).
    tokens_seen: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    _note_ids: int = 0

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeGitLab:
        fake = self

        class Handler(_Handler):
            gitlab = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    # -- set up by tests -----------------------------------------------------------------

    def add_project(self, project_id: int, path: str, token: str) -> Project:
        project = Project(project_id, path, token)
        with self.lock:
            self.projects.append(project)
        return project

    def add_commit(self, project: Project, sha: str, files: dict[str, str]) -> bytes:
        """GitLab's archive layout: one ``<name>-<sha>-<sha>/`` directory."""
        name = project.path.rsplit("/", 1)[-1]
        archive = tarball(f"{name}-{sha}-{sha}", files)
        with self.lock:
            project.archives[sha] = archive
        return archive

    # -- read by tests -------------------------------------------------------------------

    def statuses_for(self, sha: str) -> list[dict[str, Any]]:
        with self.lock:
            return [status for _, at, status in self.statuses if at == sha]

    def notes_of(self, project: Project, iid: int) -> dict[int, str]:
        with self.lock:
            return dict(self.notes.get((project.path, iid), {}))

    # -- served --------------------------------------------------------------------------

    def project(self, segment: str, token: str | None) -> Project | None:
        """The project a path segment names, if ``token`` is its access token."""
        named = unquote(segment)
        with self.lock:
            if token:
                self.tokens_seen.add(token)
            for project in self.projects:
                if named in (str(project.id), project.path) and token == project.token:
                    return project
            self.refused.append(named)
        return None

    def new_note(self, project: Project, iid: int, body: str) -> int:
        with self.lock:
            self._note_ids += 1
            self.notes.setdefault((project.path, iid), {})[self._note_ids] = body
            self.note_writes.append(("create", project.path, iid, self._note_ids))
            return self._note_ids


class _Handler(BaseHTTPRequestHandler):
    gitlab: FakeGitLab

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        return json.loads(raw or b"{}")

    def _project(self, match: re.Match[str]) -> Project | None:
        project = self.gitlab.project(match.group(1), self.headers.get("PRIVATE-TOKEN"))
        if project is None:
            self._reply(401, {"message": "401 Unauthorized"})
        return project

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        gitlab = self.gitlab
        if match := ARCHIVE_PATH.match(parts.path):
            if (project := self._project(match)) is None:
                return
            sha = parse_qs(parts.query).get("sha", [""])[0]
            archive = project.archives.get(sha)
            if archive is None:
                self._reply(404, {"message": "404 File Not Found"})
                return
            with gitlab.lock:
                gitlab.downloads.append((project.path, sha))
            self._reply(200, archive, "application/gzip")
            return
        if match := DIFFS_PATH.match(parts.path):
            if (project := self._project(match)) is None:
                return
            self._diffs(project, int(match.group(2)), parse_qs(parts.query))
            return
        if match := COMPARE_PATH.match(parts.path):
            if (project := self._project(match)) is None:
                return
            query = parse_qs(parts.query)
            key = (query.get("from", [""])[0], query.get("to", [""])[0])
            with gitlab.lock:
                gitlab.files_asked.append(("compare", project.path, f"{key[0]}..{key[1]}"))
                files = project.compared_files.get(key)
            if files is None:
                self._reply(404, {"message": "404 Not Found"})
                return
            self._reply(200, {"diffs": [_diff(f) for f in files], "compare_timeout": False})
            return
        if match := NOTES_PATH.match(parts.path):
            if (project := self._project(match)) is None:
                return
            held = gitlab.notes_of(project, int(match.group(2)))
            self._reply(200, [{"id": i, "body": b} for i, b in sorted(held.items())])
            return
        self._reply(404, {"message": "404 Not Found"})

    def _diffs(self, project: Project, iid: int, query: dict[str, list[str]]) -> None:
        """One page of the merge request's diffs; ``X-Next-Page`` is empty on the last."""
        gitlab = self.gitlab
        with gitlab.lock:
            gitlab.files_asked.append(("diffs", project.path, str(iid)))
            files = project.merge_request_files.get(iid)
        if files is None:
            self._reply(404, {"message": "404 Not found"})
            return
        page = int(query.get("page", ["1"])[0])
        per_page = int(query.get("per_page", ["20"])[0])
        shown = files[(page - 1) * per_page : page * per_page]
        more = page * per_page < len(files)
        data = json.dumps([_diff(f) for f in shown]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Next-Page", str(page + 1) if more else "")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        gitlab = self.gitlab
        if match := STATUS_PATH.match(parts.path):
            if (project := self._project(match)) is None:
                return
            status = self._body()
            with gitlab.lock:
                gitlab.statuses.append((project.path, match.group(2), status))
            self._reply(201, {"id": len(gitlab.statuses), **status})
            return
        if match := NOTES_PATH.match(parts.path):
            if (project := self._project(match)) is None:
                return
            note_id = gitlab.new_note(project, int(match.group(2)), str(self._body()["body"]))
            self._reply(201, {"id": note_id})
            return
        self._reply(404, {"message": "404 Not Found"})

    def do_PUT(self) -> None:
        parts = urlsplit(self.path)
        gitlab = self.gitlab
        if match := NOTE_PATH.match(parts.path):
            if (project := self._project(match)) is None:
                return
            iid, note_id = int(match.group(2)), int(match.group(3))
            body = str(self._body()["body"])
            with gitlab.lock:
                held = gitlab.notes.get((project.path, iid), {})
                if note_id not in held:
                    self._reply(404, {"message": "404 Not found"})
                    return
                held[note_id] = body
                gitlab.note_writes.append(("edit", project.path, iid, note_id))
            self._reply(200, {"id": note_id})
            return
        self._reply(404, {"message": "404 Not Found"})


def _diff(path: str) -> dict[str, Any]:
    return {"old_path": path, "new_path": path, "new_file": False, "diff": "@@ -1 +1 @@\n"}
