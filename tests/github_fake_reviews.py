"""The fake GitHub's pull request comments and check runs (create, edit, list), recording
every body sent, with failures to order (``fail_next``: answered 502)."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

_REPO = r"/repos/([^/]+)/([^/]+)"
COMMENTS_PATH = re.compile(_REPO + r"/issues/(\d+)/comments(?:\?.*)?")
COMMENT_PATH = re.compile(_REPO + r"/issues/comments/(\d+)")
CHECKS_PATH = re.compile(_REPO + r"/check-runs")
CHECK_PATH = re.compile(_REPO + r"/check-runs/(\d+)")
GITHUB_COMMENT_LIMIT = 65_536


@dataclass
class ReviewApi:
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    sent: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """Every comment and check-run request: method, path and body."""
    fail_next: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1000

    def comments_on(self, repository: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [
                c
                for c in self.comments.values()
                if c["repository"] == repository.lower() and c["number"] == number
            ]

    def checks_for(self, sha: str) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.check_runs.values() if c["head_sha"] == sha]

    def handle(self, method: str, path: str, raw: bytes) -> tuple[int, Any] | None:
        """GitHub's answer to a comment or check-run request, or None for other paths."""
        routes = (
            (COMMENTS_PATH, {"GET", "POST"}),
            (COMMENT_PATH, {"PATCH"}),
            (CHECKS_PATH, {"POST"}),
            (CHECK_PATH, {"PATCH"}),
        )
        match = next(
            (
                m
                for pattern, methods in routes
                if method in methods and (m := pattern.fullmatch(path))
            ),
            None,
        )
        if match is None:
            return None
        body = json.loads(raw or b"{}") if method != "GET" else {}
        with self.lock:
            self.sent.append((method, path, body))
            if self.fail_next:
                self.fail_next -= 1
                return 502, {"message": "Bad Gateway"}
            repository = f"{match.group(1)}/{match.group(2)}".lower()
            pattern = match.re
            if pattern is COMMENTS_PATH and method == "GET":
                number = int(match.group(3))
                return 200, [
                    {"id": i, "body": c["body"]}
                    for i, c in sorted(self.comments.items())
                    if c["repository"] == repository and c["number"] == number
                ][:100]
            if pattern in (COMMENTS_PATH, COMMENT_PATH) and len(body.get("body", "")) > (
                GITHUB_COMMENT_LIMIT
            ):
                return 422, {"message": "Body is too long (maximum is 65536 characters)"}
            if pattern is COMMENTS_PATH:
                self._next_id += 1
                self.comments[self._next_id] = {
                    "repository": repository,
                    "number": int(match.group(3)),
                    "body": body["body"],
                    "edits": 0,
                }
                return 201, {"id": self._next_id}
            if pattern is COMMENT_PATH:
                found = self.comments.get(int(match.group(3)))
                if found is None or found["repository"] != repository:
                    return 404, {"message": "Not Found"}
                found.update(body=body["body"], edits=found["edits"] + 1)
                return 200, {"id": int(match.group(3))}
            if pattern is CHECKS_PATH:
                self._next_id += 1
                self.check_runs[self._next_id] = {"repository": repository, "updates": 0} | body
                return 201, {"id": self._next_id}
            found = self.check_runs.get(int(match.group(3)))
            if found is None or found["repository"] != repository:
                return 404, {"message": "Not Found"}
            found.update(body)
            found["updates"] += 1
            return 200, {"id": int(match.group(3))}
