"""A small HTTP client for the run API, used by the ``runplane`` CLI and the demo.

Standard library and the domain's run vocabulary only, so the CLI needs nothing
beyond the package itself.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from runplane.domain.run import RunStatus

# What a configuration upload leaves out: local engine state and caches.
EXCLUDED = {".terraform", ".git", "terraform.tfstate", "terraform.tfstate.backup"}
# The statuses a run never leaves, as the domain defines them (the client ships with
# the package; the run vocabulary imports nothing beyond the standard library).
TERMINAL: frozenset[str] = frozenset(str(s) for s in RunStatus if s.is_terminal)


# What a configuration directory must hold at its top level for the engine to plan it.
CONFIGURATION_SUFFIXES = (".tf", ".tf.json", ".tofu", ".tofu.json")


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        detail = body.get("message") if isinstance(body, dict) else None
        if detail is None and isinstance(body, dict) and body.get("errors"):
            detail = body["errors"][0].get("detail")
        super().__init__(f"HTTP {status}: {detail or body}")
        self.status = status
        self.body = body
        self.detail = str(detail or body)
        self.code = str(body.get("code") or "") if isinstance(body, dict) else ""


@dataclass(frozen=True)
class LogText:
    """One read of a run phase's log (see docs/runs.md, "Logs")."""

    text: str
    next_offset: int
    complete: bool
    """Nothing more will be added to the log."""
    at_end: bool
    """The read reached the end of the complete log (its body ended with ETX)."""


END_OF_TEXT = "\x03"
PHASES = ("plan", "apply")


class ConfigurationError(ValueError):
    """A directory that cannot be uploaded as a configuration; nothing was sent."""


@dataclass(frozen=True)
class Connection:
    url: str
    token: str
    organization: str = "default"
    # A signed-in person's credential (runplane login) renews its token with this
    # when the API answers 401 (runplane.cli_credentials); an API token has none.
    refresh: Callable[[], str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_file(cls, path: Path) -> Connection:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["url"].rstrip("/"), data["token"], data.get("organization", "default"))


def configuration_files(directory: Path) -> list[Path]:
    """The files an upload of ``directory`` holds, sorted; refuses what cannot be planned.

    Raises :class:`ConfigurationError` for a missing path, a file, a directory with no
    ``.tf``/``.tf.json``/``.tofu`` file at its top level, or a symbolic link anywhere
    inside it (outside the EXCLUDED entries): a link is never followed, since it could
    upload files from elsewhere on this machine. ``directory`` itself may be a link.
    """
    if not directory.exists():
        raise ConfigurationError(f"{directory}: no such directory")
    if not directory.is_dir():
        raise ConfigurationError(f"{directory}: not a directory (pass the configuration's folder)")
    files = sorted(directory / relative for relative in _regular_files(directory))
    if not any(p.parent == directory and p.name.endswith(CONFIGURATION_SUFFIXES) for p in files):
        raise ConfigurationError(
            f"{directory}: no configuration files (*.tf, *.tf.json, *.tofu) at its top level"
        )
    return files


def _regular_files(directory: Path) -> Iterator[PurePosixPath]:
    """The regular files under ``directory``, relative to it, without EXCLUDED entries."""
    root = directory.resolve()  # the one link that is followed
    pending = [PurePosixPath()]
    while pending:
        relative = pending.pop()
        with os.scandir(root / relative) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        directories: list[PurePosixPath] = []
        for entry in entries:
            if entry.name in EXCLUDED:
                continue
            path = relative / entry.name
            if entry.is_symlink():
                raise ConfigurationError(
                    f"{directory}: {path} is a symbolic link; links are not uploaded "
                    "(copy the files in instead)"
                )
            if entry.is_dir(follow_symlinks=False):
                directories.append(path)
            elif entry.is_file(follow_symlinks=False):
                yield path
        pending.extend(reversed(directories))  # taken in name order


def pack(directory: Path) -> bytes:
    """A configuration directory as a deterministic tar.gz (sorted, no local state).

    Refuses what :func:`configuration_files` refuses, symbolic links among it.
    """
    files = configuration_files(directory)
    buffer = io.BytesIO()
    # mtime 0 everywhere: the same directory always packs to the same bytes.
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for path in files:
            relative = path.relative_to(directory)
            info = tarfile.TarInfo(relative.as_posix())
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _seg(value: str) -> str:
    """One URL path segment: whatever a person typed stays inside it."""
    return urllib.parse.quote(value, safe="")


class Client:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._bearer = connection.token

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        raw = self._request(method, path, body)
        return json.loads(raw) if raw else None

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> bytes:
        return self._exchange(method, path, body)[0]

    def _exchange(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> tuple[bytes, Mapping[str, str]]:
        try:
            return self._send(method, path, body)
        except ApiError as error:
            # An expired sign-in is renewed once, then the call is made again.
            if error.status != 401 or self.connection.refresh is None:
                raise
            self._bearer = self.connection.refresh()
        return self._send(method, path, body)

    def _send(
        self, method: str, path: str, body: Mapping[str, Any] | None
    ) -> tuple[bytes, Mapping[str, str]]:
        data = json.dumps(dict(body)).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the configured control plane
            f"{self.connection.url}{path}", data=data, method=method
        )
        request.add_header("Authorization", f"Bearer {self._bearer}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                raw = response.read()
                headers = dict(response.headers.items())
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode("utf-8", "replace")
            raise ApiError(error.code, parsed) from None
        return bytes(raw), headers

    def workspace_id(self, name_or_id: str) -> str:
        if name_or_id.startswith("ws-"):
            return name_or_id
        org = urllib.parse.quote(self.connection.organization)
        found = self._call("GET", f"/api/v2/organizations/{org}/workspaces/{_seg(name_or_id)}")
        return str(found["data"]["id"])

    def list_workspaces(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/api/v1/workspaces")["workspaces"]
        return result

    def workspace(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/workspaces/{_seg(workspace_id)}")
        return result

    def delete_workspace(self, workspace_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/workspaces/{_seg(workspace_id)}", body
        )
        return result

    def list_runs(self, workspace_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call(
            "GET", f"/api/v1/workspaces/{_seg(workspace_id)}/runs"
        )["runs"]
        return result

    def log(self, run_id: str, phase: str) -> str:
        """The phase's log as it is now (all of it once the phase ended)."""
        return self.read_log(run_id, phase).text

    def read_log(
        self, run_id: str, phase: str, offset: int = 0, limit: int | None = None
    ) -> LogText:
        """The phase's log from byte ``offset`` (404 until the phase started)."""
        query = {"offset": str(offset), **({"limit": str(limit)} if limit else {})}
        raw, headers = self._exchange(
            "GET",
            f"/api/v1/runs/{_seg(run_id)}/logs/{_seg(phase)}?{urllib.parse.urlencode(query)}",
        )
        found = {name.lower(): value for name, value in headers.items()}
        text = raw.decode("utf-8", "replace")
        complete = found.get("runplane-log-complete") == "true"
        next_offset = int(found.get("runplane-log-next-offset", offset))
        at_end = complete and next_offset >= int(found.get("runplane-log-length", next_offset))
        if at_end:
            text = text.removesuffix(END_OF_TEXT)
        return LogText(text, next_offset, complete, at_end)

    def follow_log(
        self,
        run_id: str,
        phase: str,
        on_text: Callable[[str], None],
        *,
        timeout: float = 1800,
        interval: float = 0.5,
    ) -> None:
        """Pass the phase's log to ``on_text`` as it grows, until it is complete.

        Waits for the phase to start; the 404 is raised if the run ended without it.
        """
        deadline = time.monotonic() + timeout
        offset = 0
        while True:
            try:
                read = self.read_log(run_id, phase, offset)
            except ApiError as error:
                if error.status != 404 or self.review(run_id)["status"] in TERMINAL:
                    raise
            else:
                if read.text:
                    on_text(read.text)
                if read.at_end:
                    return
                if read.next_offset > offset:
                    offset = read.next_offset
                    continue  # more may be waiting: read again at once
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the {phase} log of run {run_id} is not complete after {timeout} s"
                )
            time.sleep(interval)

    def create_workspace(self, name: str, tags: Sequence[str] = ()) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if tags:
            body["tags"] = list(tags)
        result: dict[str, Any] = self._call("POST", "/api/v1/workspaces", body)
        return result

    def update_workspace(self, workspace_id: str, **fields: Any) -> dict[str, Any]:
        """Change the named settings in one write (``tags`` replaces them all)."""
        result: dict[str, Any] = self._call(
            "PATCH", f"/api/v1/workspaces/{_seg(workspace_id)}", fields
        )
        return result

    def launch_controls(self, scope: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/launch-controls/{_seg(scope)}")
        return result

    def set_launch_controls(self, scope: str, **controls: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT", f"/api/v1/launch-controls/{_seg(scope)}", controls
        )
        return result

    def set_approval_window(self, workspace_id: str, seconds: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PATCH",
            f"/api/v1/workspaces/{_seg(workspace_id)}",
            {"approval_window_seconds": seconds},
        )
        return result

    def bind_github(
        self,
        workspace_id: str,
        *,
        repository: str,
        branch: str,
        installation_id: int,
        working_directory: str = "",
        push_run_kind: str = "plan_and_apply",
        pull_request_workspaces: bool = False,
        pull_request_auto_apply_destroy: bool = False,
        trigger_patterns: list[str] | None = None,
        ignore_patterns: list[str] | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT",
            f"/api/v1/workspaces/{_seg(workspace_id)}/github",
            {
                "repository": repository,
                "branch": branch,
                "working_directory": working_directory,
                "installation_id": installation_id,
                "push_run_kind": push_run_kind,
                "pull_request_workspaces": pull_request_workspaces,
                "pull_request_auto_apply_destroy": pull_request_auto_apply_destroy,
                "trigger_patterns": trigger_patterns or [],
                "ignore_patterns": ignore_patterns or [],
            },
        )
        return result

    def github_binding(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "GET", f"/api/v1/workspaces/{_seg(workspace_id)}/github"
        )
        return result

    def unbind_github(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/workspaces/{_seg(workspace_id)}/github"
        )
        return result

    def bind_gitlab(self, workspace_id: str, binding: dict[str, Any]) -> dict[str, Any]:
        """Bind to a GitLab project; the answer carries the webhook token, once."""
        result: dict[str, Any] = self._call(
            "PUT", f"/api/v1/workspaces/{_seg(workspace_id)}/gitlab", binding
        )
        return result

    def gitlab_binding(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "GET", f"/api/v1/workspaces/{_seg(workspace_id)}/gitlab"
        )
        return result

    def unbind_gitlab(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/workspaces/{_seg(workspace_id)}/gitlab"
        )
        return result

    def github_installations(self) -> list[dict[str, Any]]:
        found = self._call("GET", "/api/v1/github/installations")
        result: list[dict[str, Any]] = found["installations"]
        return result

    def github_ingestion(self, source_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/github/ingestions/{_seg(source_id)}")
        return result

    def release_github_installation(self, installation_id: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/github/installations/{int(installation_id)}"
        )
        return result

    def list_variables(self, workspace_id: str) -> list[dict[str, Any]]:
        found = self._call("GET", f"/api/v1/workspaces/{_seg(workspace_id)}/variables")
        result: list[dict[str, Any]] = found["variables"]
        return result

    def set_variable(
        self,
        workspace_id: str,
        name: str,
        value: str,
        *,
        sensitive: bool = False,
        description: str | None = None,
        category: str = "terraform",
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT",
            f"/api/v1/workspaces/{_seg(workspace_id)}/variables/{_seg(category)}/{_seg(name)}",
            {"value": value, "sensitive": sensitive, "description": description},
        )
        return result

    def delete_variable(
        self, workspace_id: str, name: str, category: str = "terraform"
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE",
            f"/api/v1/workspaces/{_seg(workspace_id)}/variables/{_seg(category)}/{_seg(name)}",
        )
        return result

    # -- teams (docs/teams.md) -----------------------------------------------------------------

    def team_id(self, name_or_id: str) -> str:
        """A team's ID from its name (or the ID as given); an unknown name is a 404."""
        if name_or_id.startswith("team-"):
            return name_or_id
        for found in self.list_teams():
            if found["name"] == name_or_id:
                return str(found["id"])
        raise ApiError(404, {"code": "NOT_FOUND", "message": f"team {name_or_id} was not found"})

    def list_teams(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/api/v1/teams")["teams"]
        return result

    def team(self, team_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/teams/{_seg(team_id)}")
        return result

    def create_team(self, name: str, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/api/v1/teams", {"name": name, **fields})
        return result

    def update_team(self, team_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PATCH", f"/api/v1/teams/{_seg(team_id)}", dict(changes)
        )
        return result

    def delete_team(self, team_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/api/v1/teams/{_seg(team_id)}")
        return result

    def team_member(self, team_id: str, user: str, *, add: bool) -> dict[str, Any]:
        path = f"/api/v1/teams/{_seg(team_id)}/members/{_seg(user)}"
        result: dict[str, Any] = self._call("PUT" if add else "DELETE", path)
        return result

    def create_team_token(self, team_id: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/teams/{_seg(team_id)}/tokens", {"name": name}
        )
        return result

    def team_access(self, team_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", f"/api/v1/teams/{_seg(team_id)}/access")[
            "access"
        ]
        return result

    def workspace_team_access(self, workspace_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call(
            "GET", f"/api/v1/workspaces/{_seg(workspace_id)}/team-access"
        )["access"]
        return result

    def set_team_access(
        self, workspace_id: str, team_id: str, level: str | None, capabilities: list[str]
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT",
            f"/api/v1/workspaces/{_seg(workspace_id)}/team-access/{_seg(team_id)}",
            {"level": level, "capabilities": capabilities},
        )
        return result

    def remove_team_access(self, workspace_id: str, team_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/workspaces/{_seg(workspace_id)}/team-access/{_seg(team_id)}"
        )
        return result

    # -- variable sets (docs/runs.md, "Variable sets") -----------------------------------------

    def variable_set_id(self, name_or_id: str) -> str:
        """A set's ID from its name (or the ID as given); an unknown name is a 404, as
        the API answers for an unknown ID."""
        if name_or_id.startswith("varset-"):
            return name_or_id
        for found in self.list_variable_sets():
            if found["name"] == name_or_id:
                return str(found["id"])
        raise ApiError(
            404, {"code": "NOT_FOUND", "message": f"variable set {name_or_id} was not found"}
        )

    def create_variable_set(
        self, name: str, *, description: str | None = None, global_: bool = False
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST",
            "/api/v1/variable-sets",
            {"name": name, "description": description, "global": global_},
        )
        return result

    def list_variable_sets(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/api/v1/variable-sets")["variable_sets"]
        return result

    def variable_set(self, set_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/variable-sets/{_seg(set_id)}")
        return result

    def update_variable_set(self, set_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PATCH", f"/api/v1/variable-sets/{_seg(set_id)}", dict(changes)
        )
        return result

    def delete_variable_set(self, set_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/api/v1/variable-sets/{_seg(set_id)}")
        return result

    def set_set_variable(
        self,
        set_id: str,
        category: str,
        name: str,
        value: str,
        *,
        sensitive: bool = False,
        description: str | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT",
            f"/api/v1/variable-sets/{_seg(set_id)}/variables/{_seg(category)}/{_seg(name)}",
            {"value": value, "sensitive": sensitive, "description": description},
        )
        return result

    def delete_set_variable(self, set_id: str, category: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE",
            f"/api/v1/variable-sets/{_seg(set_id)}/variables/{_seg(category)}/{_seg(name)}",
        )
        return result

    def apply_variable_set(self, set_id: str, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT", f"/api/v1/variable-sets/{_seg(set_id)}/workspaces/{_seg(workspace_id)}"
        )
        return result

    def unapply_variable_set(self, set_id: str, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/variable-sets/{_seg(set_id)}/workspaces/{_seg(workspace_id)}"
        )
        return result

    def cloud_settings(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "GET", f"/api/v1/workspaces/{_seg(workspace_id)}/cloud-settings"
        )
        return result

    def put_cloud_settings(self, workspace_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the workspace's cloud settings whole with ``body``."""
        result: dict[str, Any] = self._call(
            "PUT", f"/api/v1/workspaces/{_seg(workspace_id)}/cloud-settings", body
        )
        return result

    def clear_cloud_settings(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/workspaces/{_seg(workspace_id)}/cloud-settings"
        )
        return result

    def audit(
        self,
        *,
        since: str | None = None,
        until: str | None = None,
        action: str | None = None,
        cursor: str | None = None,
        size: int = 100,
    ) -> dict[str, Any]:
        """One page of the organization's security audit trail, oldest first."""
        query = {"since": since, "until": until, "action": action, "page[cursor]": cursor}
        query_string = urllib.parse.urlencode(
            {"page[size]": size, **{k: v for k, v in query.items() if v is not None}}
        )
        result: dict[str, Any] = self._call("GET", f"/api/v1/audit?{query_string}")
        return result

    def attention(self) -> dict[str, Any]:
        """What waits for a person across the organization's workspaces."""
        result: dict[str, Any] = self._call("GET", "/api/v1/attention")
        return result

    def auto_destroy(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "GET", f"/api/v1/workspaces/{_seg(workspace_id)}/auto-destroy"
        )
        return result

    def set_auto_destroy(self, workspace_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Arm the workspace's auto-destroy with ``body`` (the whole setting)."""
        result: dict[str, Any] = self._call(
            "PUT", f"/api/v1/workspaces/{_seg(workspace_id)}/auto-destroy", body
        )
        return result

    def postpone_auto_destroy(self, workspace_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``{"until": ISO}`` or ``{"by": "24h"}``."""
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/workspaces/{_seg(workspace_id)}/auto-destroy/actions/postpone", body
        )
        return result

    def clear_auto_destroy(self, workspace_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "DELETE", f"/api/v1/workspaces/{_seg(workspace_id)}/auto-destroy"
        )
        return result

    def upload_configuration(self, workspace_id: str, directory: Path) -> dict[str, Any]:
        archive = pack(directory)
        created = self._call(
            "POST", f"/api/v1/workspaces/{_seg(workspace_id)}/configuration-versions"
        )
        request = urllib.request.Request(  # noqa: S310 - the URL the control plane gave us
            created["upload_url"],
            data=archive,
            method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )
        urllib.request.urlopen(request, timeout=600).close()  # noqa: S310
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/configuration-versions/{created['id']}/actions/finalize"
        )
        return result

    def create_run(
        self,
        workspace: str,
        directory: Path,
        *,
        kind: str = "plan_and_apply",
        variables: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Upload ``directory`` and create a run of it; ``options`` are the run API's
        ``destroy``, ``refresh_only``, ``targets`` and ``replacements``."""
        configuration_files(directory)  # refused before anything is created
        workspace_id = self.workspace_id(workspace)
        configuration = self.upload_configuration(workspace_id, directory)
        result: dict[str, Any] = self._call(
            "POST",
            f"/api/v1/workspaces/{_seg(workspace_id)}/runs",
            {
                "kind": kind,
                "configuration_version_id": configuration["id"],
                "variables": dict(variables or {}),
                **(options or {}),
            },
        )
        return result

    # -- schedules (docs/schedules.md) ------------------------------------------------------

    def create_schedule(
        self, workspace: str, expression: str, kind: str = "plan_only"
    ) -> dict[str, Any]:
        workspace_id = self.workspace_id(workspace)
        result: dict[str, Any] = self._call(
            "POST",
            f"/api/v1/workspaces/{_seg(workspace_id)}/schedules",
            {"expression": expression, "kind": kind},
        )
        return result

    def list_schedules(self, workspace: str) -> list[dict[str, Any]]:
        workspace_id = self.workspace_id(workspace)
        path = f"/api/v1/workspaces/{_seg(workspace_id)}/schedules"
        result: list[dict[str, Any]] = self._call("GET", path)["schedules"]
        return result

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/schedules/{_seg(schedule_id)}")
        return result

    def pause_schedule(self, schedule_id: str, paused: bool = True) -> dict[str, Any]:
        path = f"/api/v1/schedules/{_seg(schedule_id)}/actions/pause"
        result: dict[str, Any] = self._call("POST", path, {"paused": paused})
        return result

    def delete_schedule(self, schedule_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/api/v1/schedules/{_seg(schedule_id)}")
        return result

    def remediate_drift(self, workspace: str, remedy: str) -> dict[str, Any]:
        """A run resolving the workspace's drift: the new run's review."""
        workspace_id = self.workspace_id(workspace)
        result: dict[str, Any] = self._call(
            "POST",
            f"/api/v1/workspaces/{_seg(workspace_id)}/drift/actions/remediate",
            {"remedy": remedy},
        )
        return result

    def create_token(self, name: str, role: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/api/v1/tokens", {"name": name, "role": role})
        return result

    def revoke_token(self, token_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/api/v1/tokens/{_seg(token_id)}")
        return result

    def publish_policy_set(self, document: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/api/v1/policy-sets", dict(document))
        return result

    def attach_policy_set(
        self, name: str, workspaces: list[str], all_workspaces: bool = False
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT",
            f"/api/v1/policy-sets/{_seg(name)}/attachments",
            {"workspaces": workspaces, "all_workspaces": all_workspaces},
        )
        return result

    def list_policy_sets(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/api/v1/policy-sets")["policy_sets"]
        return result

    def override_policy(self, run_id: str, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/runs/{_seg(run_id)}/actions/override-policy", {"reason": reason}
        )
        return result

    def run_plan(self, run_id: str, page: int = 1) -> dict[str, Any]:
        """One page of the run's plan view (``GET /api/v1/runs/{id}/plan``)."""
        result: dict[str, Any] = self._call(
            "GET", f"/api/v1/runs/{_seg(run_id)}/plan?page={int(page)}"
        )
        return result

    def review(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/runs/{_seg(run_id)}")
        return result

    def cancel(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/runs/{_seg(run_id)}/actions/cancel", {}
        )
        return result

    def recover(self, run_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/runs/{_seg(run_id)}/actions/recover", body
        )
        return result

    def decide(
        self, run_id: str, decision: str, comment: str | None = None, **binding: str
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST",
            f"/api/v1/runs/{_seg(run_id)}/actions/{decision}",
            {"comment": comment, **binding},
        )
        return result

    def watch(
        self,
        run_id: str,
        *,
        until: Iterable[str] = (),
        timeout: float = 600,
        on_change: Callable[[dict[str, Any]], None] | None = None,
        on_log: Callable[[str, str], None] | None = None,
        interval: float = 0.5,
    ) -> dict[str, Any]:
        """Poll the review until the run ends (or reaches one of ``until``).

        With ``on_log``, the plan's and then the apply's log are passed to it as
        (phase, text) while they grow; the watch ends with them complete.
        """
        stop = TERMINAL | set(until)
        deadline = time.monotonic() + timeout
        seen: tuple[Any, ...] | None = None
        logs = _LogCursor(self, run_id, on_log) if on_log is not None else None
        while True:
            review = self.review(run_id)
            state = (review["status"], tuple(s["status"] for s in review["stages"]))
            if state != seen and on_change is not None:
                on_change(review)
            seen = state
            ended = review["status"] in stop
            if logs is not None:
                logs.advance(ended=ended)
            if ended:
                return review
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is still {review['status']} after {timeout} s")
            time.sleep(interval)


class _LogCursor:
    """Where a watch is in the run's logs: the phase it reads and the offset in it."""

    def __init__(self, client: Client, run_id: str, on_log: Callable[[str, str], None]) -> None:
        self._client = client
        self._run_id = run_id
        self._on_log = on_log
        self._phase = 0
        self._offset = 0

    def advance(self, *, ended: bool) -> None:
        """Pass on what is new; once the run ``ended``, drain every started log."""
        while self._phase < len(PHASES):
            phase = PHASES[self._phase]
            try:
                read = self._client.read_log(self._run_id, phase, self._offset)
            except ApiError as error:
                if error.status != 404:
                    raise
                if not ended:
                    return
                self._phase += 1  # this phase never ran: nor will the next
                continue
            if read.text:
                self._on_log(phase, read.text)
            progressed = read.next_offset > self._offset
            self._offset = read.next_offset
            if read.at_end:
                self._phase, self._offset = self._phase + 1, 0
            elif not progressed:
                return


def _render_policy(policy: Mapping[str, Any]) -> list[str]:
    sets = ", ".join(
        f"{s['name']}@{str(s['digest']).removeprefix('sha256:')[:12]}"
        for s in policy.get("policy_sets") or []
    )
    lines = [
        f"  policy     {policy['status']}  "
        + (f"sets {sets}  runtime {policy.get('runtime')}" if sets else "no policy sets attached")
    ]
    for result in policy.get("results") or []:
        lines.append(
            f"    {result['outcome']:<8} {result['policy_set']}/{result['policy']}"
            f" ({result['enforcement']})"
        )
        lines.extend(f"             - {message}" for message in result.get("messages") or [])
    override = policy.get("override")
    if override:
        lines.append(f"    overridden by {override['display']}: {override['reason']}")
    return lines


def _variable_line(variable: Mapping[str, Any]) -> str:
    """One of a run's variables as the review lists it: its name, category, where it
    came from, and ``(sensitive)`` for a sensitive one (values never appear)."""
    source = str(variable.get("source") or "run")
    if source == "variable_set":
        held = variable.get("variable_set") or {}
        source = f"variable set {held.get('name') or held.get('id')}"
    category = "env" if variable.get("category") == "env" else "terraform"
    marked = "  (sensitive)" if variable.get("sensitive") else ""
    return f"{variable['name']}  {category}  from {source}{marked}"


def render_review(review: Mapping[str, Any]) -> str:
    """The run review as a person reads it in a terminal."""
    lines = [
        f"{review['id']}  {review['kind']}  {review['label']} ({review['status']})",
        *render_options(review["input"].get("options")),
        f"  workflow   {review['workflow']['definition_version']}  "
        f"build {str(review['workflow']['build_sha'])[:12]}",
    ]
    if review.get("status_reason"):
        lines.append(f"  reason     {review['status_reason']}")
    auto = review.get("auto_destroy")
    if auto:
        how = "applies by itself" if auto.get("auto_apply") else "a person approves"
        lines.append(
            f"  auto-destroy  due {auto.get('due_at')}, attempt {auto.get('attempt')}, "
            f"{how} (set by {auto.get('set_by')})"
        )
    failure = review.get("failure")
    if failure:
        said = str(failure["reason"]).splitlines()
        lines.append(f"  failure    {failure['phase']}: {said[0] if said else ''}")
        lines.extend(f"             {line}".rstrip() for line in said[1:])
    stages = "  ".join(f"{s['stage']}:{s['status']}" for s in review["stages"])
    lines.append(f"  stages     {stages}")
    inputs = review["input"]
    listed = inputs.get("variables") or [
        {"name": n, "source": "run"} for n in inputs.get("variable_names", [])
    ]
    lines.append(
        f"  input      configuration {str(inputs.get('configuration_sha256'))[:12]}  "
        f"variables {len(listed) or '-'}  "
        f"predecessor {inputs.get('predecessor_state_version_id') or '-'}"
    )
    lines.extend(f"    {_variable_line(v)}" for v in listed)
    lines.extend(render_credentials(inputs.get("credentials")))
    lines.extend(_render_source(review.get("source")))
    plan = review.get("plan")
    if plan:
        summary = plan["summary"]
        outputs = ", ".join(f"{k}={v}" for k, v in summary["output_changes"].items()) or "-"
        lines.append(
            f"  plan       +{summary['adds']} ~{summary['changes']} -{summary['destroys']}"
            f"  outputs {outputs}  {'changes' if plan['has_changes'] else 'no changes'}"
        )
    policy = review.get("policy")
    if policy:
        lines.extend(_render_policy(policy))
    approval = review.get("approval")
    if approval:
        who = approval.get("decided_by")
        lines.append(
            f"  approval   {approval['status']}"
            + (f" by {who}" if who else f" until {approval.get('expires_at')}")
        )
        if int(approval.get("approvals_required") or 1) > 1:
            first = approval.get("first_approval") or {}
            given = f"first by {first['by']}" if first else "none yet"
            lines.append(
                f"             two approvers needed ({given}): "
                f"{approval.get('second_approval_reason') or ''}"
            )
    apply = review.get("apply")
    if apply:
        state = apply["resulting_state_version"]
        detail = (
            f"state {state['id']} serial {state['serial']} sha256 {str(state['sha256'])[:12]}"
            if state["status"] == "recorded"
            else f"resulting state {state['status']}"
        )
        lines.append(f"  apply      {apply['status']}  {detail}")
    recovery = review.get("recovery")
    if recovery:
        lines.extend(_render_recovery(recovery))
    return "\n".join(lines)


def render_options(options: Mapping[str, Any] | None) -> list[str]:
    """A run's plan options (docs/runs.md, "Run options"): a destroy first and loud, so
    nobody approves one without seeing it; nothing for a plain run."""
    options = options or {}
    lines = []
    if options.get("destroy"):
        lines.append("  DESTROY    this run destroys every resource it plans for")
    if options.get("refresh_only"):
        lines.append("  options    refresh-only: accepts the real world into state")
    for label, key in (("target", "targets"), ("replace", "replacements")):
        lines.extend(f"  {label:<9}  {address}" for address in options.get(key) or ())
    return lines


def render_credentials(decisions: Mapping[str, Any] | None) -> list[str]:
    """A run's credential decisions (docs/credentials.md): which identities each phase
    may get; none for a run created without cloud settings (or before runs pinned them)."""
    aws = (decisions or {}).get("aws")
    gcp = (decisions or {}).get("gcp")
    azure = (decisions or {}).get("azure")
    if not (aws or gcp or azure):
        return ["  cloud      no cloud credentials"]
    lines = []
    if aws:
        external = "external ID set" if aws.get("external_id_set") else "no external ID"
        lines.append(
            f"  cloud      aws plan {aws['plan_role_arn']}  "
            f"apply {aws.get('apply_role_arn') or 'none'}"
        )
        lines.append(
            f"             aws region {aws['region']}  session {aws['session_duration']} s  "
            f"{external}"
        )
    if gcp:
        lines.append(f"  {'cloud' if not lines else '':<9}  gcp audience {gcp['audience']}")
    if azure:
        lines.append(
            f"  {'cloud' if not lines else '':<9}  azure audience {azure['audience']}  "
            f"client {azure['client_id']}  tenant {azure['tenant_id']}"
        )
    digest = str((decisions or {}).get("digest") or "")
    lines.append(
        f"             settings version {(decisions or {}).get('settings_version', 0)}  "
        f"decisions {digest.removeprefix('sha256:')[:12]}"
    )
    return lines


def _render_source(source: Mapping[str, Any] | None) -> list[str]:
    if not source:
        return ["  source     none (created without source ingestion)"]
    ingestion = source["source_ingestion"]
    return [
        f"  source     {source['provider']} {source['repository']} {source['ref']} "
        f"{source['commit_sha']}  dir {source['working_directory'] or '.'}",
        f"             ingestion {ingestion['id']} ({ingestion['status']})  "
        f"workflow {source['workflow_id']}  delivery {source['delivery_id']}",
        f"             configuration {source['configuration_version_id']}  "
        f"artifact {source['configuration_artifact_id']}  "
        f"archive sha256 {source['archive_sha256']}",
    ]


def _render_recovery(panel: Mapping[str, Any]) -> list[str]:
    """The recovery panel: what an operator compares before releasing the workspace."""
    lines = [
        f"  recovery   {panel['status']}  pre-apply state "
        f"{panel.get('pre_apply_state_version_id') or 'none'}  current "
        f"{panel.get('current_state_version_id') or 'none'}  "
        + ("moved" if panel.get("state_moved") else "unmoved")
    ]
    if panel.get("unverifiable"):
        lines.append(f"             unverifiable: {panel['unverifiable']}")
    elif panel.get("publications_since_apply"):
        lines.append(
            f"             {panel['publications_since_apply']} version(s) published by this apply"
        )
    for upload in panel.get("pending_uploads") or []:
        claim = (
            f"claimed: {upload['id']}@{upload['claimed_at']}"
            if upload.get("claimed_at")
            else "unclaimed"
        )
        lines.append(
            f"             pending upload {upload['id']} serial {upload['serial']} {claim}"
        )
    emergency = panel.get("emergency_state")
    if emergency:
        lines.append(
            f"             emergency state sha256 {emergency['sha256']} {emergency['size']} bytes"
        )
    if panel["status"] == "prepared":
        lines.append(
            f"             prepared by {panel.get('holder')}; lease until "
            f"{panel.get('lease_expires_at')} ({panel.get('lease_remaining_seconds')} s left)"
        )
    result = panel.get("result")
    if result:
        lines.append(
            f"             {result['resolution']} by {result['recovered_by']} at "
            f"{result['completed_at']}; fence {result['fence']}"
        )
    return lines
