"""A small HTTP client for the run API, used by the ``runplane`` CLI and the demo.

Standard library only, so the CLI needs nothing beyond the package itself.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a configuration upload leaves out: local engine state and caches.
EXCLUDED = {".terraform", ".git", "terraform.tfstate", "terraform.tfstate.backup"}
TERMINAL = {
    "succeeded",
    "plan_credentials_required",
    "plan_failed",
    "policy_failed",
    "rejected",
    "expired",
    "canceled",
    "apply_failed",
    "apply_start_uncertain",
    "apply_interrupted",
    "needs_recovery",
}


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        detail = body.get("message") if isinstance(body, dict) else None
        if detail is None and isinstance(body, dict) and body.get("errors"):
            detail = body["errors"][0].get("detail")
        super().__init__(f"HTTP {status}: {detail or body}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Connection:
    url: str
    token: str
    organization: str = "default"

    @classmethod
    def from_file(cls, path: Path) -> Connection:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["url"].rstrip("/"), data["token"], data.get("organization", "default"))


def pack(directory: Path) -> bytes:
    """A configuration directory as a deterministic tar.gz (sorted, no local state)."""
    buffer = io.BytesIO()
    # mtime 0 everywhere: the same directory always packs to the same bytes.
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for path in sorted(directory.rglob("*")):
            relative = path.relative_to(directory)
            if any(part in EXCLUDED for part in relative.parts) or not path.is_file():
                continue
            info = tarfile.TarInfo(relative.as_posix())
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Client:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        data = json.dumps(dict(body)).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the configured control plane
            f"{self.connection.url}{path}", data=data, method=method
        )
        request.add_header("Authorization", f"Bearer {self.connection.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode("utf-8", "replace")
            raise ApiError(error.code, parsed) from None
        return json.loads(raw) if raw else None

    def workspace_id(self, name_or_id: str) -> str:
        if name_or_id.startswith("ws-"):
            return name_or_id
        org = urllib.parse.quote(self.connection.organization)
        found = self._call("GET", f"/api/v2/organizations/{org}/workspaces/{name_or_id}")
        return str(found["data"]["id"])

    def create_workspace(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/api/v1/workspaces", {"name": name})
        return result

    def launch_controls(self, scope: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/launch-controls/{scope}")
        return result

    def set_launch_controls(self, scope: str, **controls: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call("PUT", f"/api/v1/launch-controls/{scope}", controls)
        return result

    def set_approval_window(self, workspace_id: str, seconds: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PATCH", f"/api/v1/workspaces/{workspace_id}", {"approval_window_seconds": seconds}
        )
        return result

    def upload_configuration(self, workspace_id: str, directory: Path) -> dict[str, Any]:
        created = self._call("POST", f"/api/v1/workspaces/{workspace_id}/configuration-versions")
        request = urllib.request.Request(  # noqa: S310 - the URL the control plane gave us
            created["upload_url"],
            data=pack(directory),
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
    ) -> dict[str, Any]:
        workspace_id = self.workspace_id(workspace)
        configuration = self.upload_configuration(workspace_id, directory)
        result: dict[str, Any] = self._call(
            "POST",
            f"/api/v1/workspaces/{workspace_id}/runs",
            {
                "kind": kind,
                "configuration_version_id": configuration["id"],
                "variables": dict(variables or {}),
            },
        )
        return result

    def create_token(self, name: str, role: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/api/v1/tokens", {"name": name, "role": role})
        return result

    def revoke_token(self, token_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/api/v1/tokens/{token_id}")
        return result

    def publish_policy_set(self, document: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/api/v1/policy-sets", dict(document))
        return result

    def attach_policy_set(
        self, name: str, workspaces: list[str], all_workspaces: bool = False
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "PUT",
            f"/api/v1/policy-sets/{name}/attachments",
            {"workspaces": workspaces, "all_workspaces": all_workspaces},
        )
        return result

    def list_policy_sets(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/api/v1/policy-sets")["policy_sets"]
        return result

    def override_policy(self, run_id: str, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/runs/{run_id}/actions/override-policy", {"reason": reason}
        )
        return result

    def review(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/runs/{run_id}")
        return result

    def cancel(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/api/v1/runs/{run_id}/actions/cancel", {})
        return result

    def decide(
        self, run_id: str, decision: str, comment: str | None = None, **binding: str
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/api/v1/runs/{run_id}/actions/{decision}", {"comment": comment, **binding}
        )
        return result

    def watch(
        self,
        run_id: str,
        *,
        until: Iterable[str] = (),
        timeout: float = 600,
        on_change: Callable[[dict[str, Any]], None] | None = None,
        interval: float = 0.5,
    ) -> dict[str, Any]:
        """Poll the review until the run ends (or reaches one of ``until``)."""
        stop = TERMINAL | set(until)
        deadline = time.monotonic() + timeout
        seen: tuple[Any, ...] | None = None
        while True:
            review = self.review(run_id)
            state = (review["status"], tuple(s["status"] for s in review["stages"]))
            if state != seen and on_change is not None:
                on_change(review)
            seen = state
            if review["status"] in stop:
                return review
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is still {review['status']} after {timeout} s")
            time.sleep(interval)


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


def render_review(review: Mapping[str, Any]) -> str:
    """The run review as a person reads it in a terminal."""
    lines = [
        f"{review['id']}  {review['kind']}  {review['label']} ({review['status']})",
        f"  workflow   {review['workflow']['definition_version']}  "
        f"build {str(review['workflow']['build_sha'])[:12]}",
    ]
    if review.get("status_reason"):
        lines.append(f"  reason     {review['status_reason']}")
    stages = "  ".join(f"{s['stage']}:{s['status']}" for s in review["stages"])
    lines.append(f"  stages     {stages}")
    inputs = review["input"]
    lines.append(
        f"  input      configuration {str(inputs.get('configuration_sha256'))[:12]}  "
        f"variables {', '.join(inputs.get('variable_names') or []) or '-'}  "
        f"predecessor {inputs.get('predecessor_state_version_id') or '-'}"
    )
    lines.append("  source     none (created without source ingestion)")
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
    apply = review.get("apply")
    if apply:
        state = apply["resulting_state_version"]
        detail = (
            f"state {state['id']} serial {state['serial']} sha256 {str(state['sha256'])[:12]}"
            if state["status"] == "recorded"
            else f"resulting state {state['status']}"
        )
        lines.append(f"  apply      {apply['status']}  {detail}")
    return "\n".join(lines)
