"""The runner refuses hostile inputs and reports every failure, on the embedded stack.

Each run here would once have either escaped the sandbox's work dir, replaced the
Runplane backend, or killed the runner silently (leaving the run ``planning`` until the
heartbeat window ran out). Now each ends ``plan_failed`` on the runner's own report,
with a reason naming the offending file, member or setting.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from runplane.client import ApiError, pack
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.models import WorkspaceItem, workspace_key
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import new_workspace

PLAIN = 'output "ok" {\n  value = "fine"\n}\n'
MIB = 1024 * 1024


def archive(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    return info, data


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, b""


def files(contents: dict[str, str]) -> bytes:
    return archive([regular(name, text.encode()) for name, text in contents.items()])


def start_plan(
    local: Local, workspace_id: str, body: bytes, variables: dict[str, str] | None = None
) -> dict[str, Any]:
    """A plan-only run of exactly the archive ``body`` (uploaded as the CLI would)."""
    client = local.client
    created = client._call("POST", f"/api/v1/workspaces/{workspace_id}/configuration-versions")
    request = urllib.request.Request(  # noqa: S310 - the stack's own upload URL
        created["upload_url"],
        data=body,
        method="PUT",
        headers={"Content-Type": "application/octet-stream"},
    )
    urllib.request.urlopen(request, timeout=60).close()  # noqa: S310
    client._call("POST", f"/api/v1/configuration-versions/{created['id']}/actions/finalize")
    run: dict[str, Any] = client._call(
        "POST",
        f"/api/v1/workspaces/{workspace_id}/runs",
        {
            "kind": "plan_only",
            "configuration_version_id": created["id"],
            "variables": variables or {},
        },
    )
    return run


def plan_attempt(run_id: str) -> dict[str, Any]:
    return dict(run_parts.require(run_id, "attempt#plan").body)


def ended_by_the_runner(local: Local, run: dict[str, Any]) -> dict[str, Any]:
    """The run once it ended, checked to have ended on its runner's report."""
    review = local.client.watch(run["id"], timeout=120)
    attempt = plan_attempt(run["id"])
    # A report closes the attempt with the runner's log; a timeout would not.
    assert attempt.get("log_artifact_id"), attempt
    assert "Timeout" not in str(review.get("status_reason")), review["status_reason"]
    return review


def wait_removed(path: Path, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not path.exists()


# --------------------------------------------------------------------------- item: backend


@pytest.mark.parametrize(
    ("contents", "named"),
    [
        pytest.param(
            {"main.tf": 'terraform {\n  backend "s3" {\n    bucket = "mine"\n  }\n}\n' + PLAIN},
            "main.tf",
            id="s3-in-main",
        ),
        pytest.param(
            {"main.tf": PLAIN, "zz_override.tf": 'terraform {\n  backend "local" {}\n}\n'},
            "zz_override.tf",
            id="local-in-a-later-override",
        ),
        pytest.param(
            {
                "main.tf": PLAIN,
                "backend.tf.json": json.dumps(
                    {"terraform": {"backend": {"local": {"path": "x.tfstate"}}}}
                ),
            },
            "backend.tf.json",
            id="json",
        ),
    ],
)
def test_a_configuration_with_its_own_backend_fails_its_plan_naming_the_file(
    local: Local, contents: dict[str, str], named: str
) -> None:
    # Given a configuration that declares a backend of its own
    ws = new_workspace(local, "own-backend")

    # When it is planned
    run = start_plan(local, ws, files(contents))

    # Then the runner refuses it, naming the file, and no plan is recorded
    review = ended_by_the_runner(local, run)
    assert review["status"] == "plan_failed"
    assert (
        f"configuration file '{named}' declares a terraform 'backend' block"
        in (review["status_reason"])
    )
    assert run_parts.get(run["id"], "plan", reads=IdentityMap()) is None


# --------------------------------------------------------------------------- item: archive


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        pytest.param(
            [link("escape", "/etc"), regular("escape/pwned.tf", b"x")],
            "configuration archive member 'escape' is a symbolic link",
            id="symlink-out",
        ),
        pytest.param(
            [regular("main.tf", PLAIN.encode()), link("hard.tf", "/etc/passwd", tarfile.LNKTYPE)],
            "configuration archive member 'hard.tf' is a hard link",
            id="hardlink-out",
        ),
        pytest.param(
            [regular("../../pwned.tf", b"x")],
            "configuration archive member '../../pwned.tf' has a '..' component",
            id="dotdot",
        ),
        pytest.param(
            [regular("main.tf", PLAIN.encode()), regular("zeros.bin", bytes(101 * MIB))],
            "configuration archive member 'zeros.bin' is larger than the per-file cap",
            id="bomb",
        ),
    ],
)
def test_an_unsafe_archive_fails_its_plan_naming_the_member(
    local: Local, members: list[tuple[tarfile.TarInfo, bytes]], reason: str
) -> None:
    # Given an archive with a member that must not be extracted (the bomb: ~100 KB
    # of gzip expanding to 101 MiB of zeros)
    ws = new_workspace(local, "archive")
    body = archive(members)
    assert len(body) < 2 * MIB

    # When it is planned
    run = start_plan(local, ws, body)

    # Then the runner reports the refusal at once, naming the member
    review = ended_by_the_runner(local, run)
    assert review["status"] == "plan_failed"
    assert reason in review["status_reason"]
    # And the sandbox, with whatever was extracted, is removed
    assert local.stack.launcher is not None
    sandbox = local.stack.launcher.sandboxes[plan_attempt(run["id"])["sandbox_ref"]]
    assert wait_removed(sandbox)


# --------------------------------------------------------------------------- item: failures


def test_a_workspace_name_the_engine_cannot_use_is_reported_not_left_planning(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace whose stored name the engine cannot use: the API refuses such
    # a name today, but a workspace named before it did keeps its name
    name = unique("odd")
    with pytest.raises(ApiError) as refused:
        local.client._call("POST", "/api/v1/workspaces", {"name": f"{name}\n"})
    assert refused.value.status == 422
    ws = new_workspace(local, name)
    item = WorkspaceItem.get(*workspace_key(ws), consistent_read=True)
    item.update(actions=[WorkspaceItem.name.set(f"{name}\n")])

    # When a run of an ordinary configuration is planned in it
    directory = tmp_path / "cfg"
    directory.mkdir()
    (directory / "main.tf").write_text(PLAIN)
    run = start_plan(local, ws, pack(directory))

    # Then the runner reports why it cannot plan, instead of dying silently
    review = ended_by_the_runner(local, run)
    assert review["status"] == "plan_failed"
    assert "cannot be named in the engine's remote backend" in review["status_reason"]
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id is None


def test_any_runner_error_is_reported_with_a_safe_reason(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given sandboxes started with a setting the runner cannot use (a relative mirror path)
    launcher = local.stack.launcher
    assert launcher is not None
    monkeypatch.setattr(launcher, "_provider_mirror", Path("relative/mirror"))
    ws = new_workspace(local, "runner-error")

    # When a run is planned with a secret variable
    run = start_plan(local, ws, files({"main.tf": PLAIN}), {"token": "s3cr3t-value-91c2"})

    # Then the failure is reported at once, naming only the kind of error
    review = ended_by_the_runner(local, run)
    assert review["status"] == "plan_failed"
    assert review["status_reason"] == "the runner failed (ValueError); see the run's log"
    # And the sandbox directory is removed all the same
    sandbox = launcher.sandboxes[plan_attempt(run["id"])["sandbox_ref"]]
    assert wait_removed(sandbox)


# --------------------------------------------------------------------------- item: variables


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("9lives", "is not an identifier"),
        ("count", "is reserved by the engine"),
        ("depends_on", "is reserved by the engine"),
        ("naïve", "is not an identifier"),
    ],
)
def test_variable_names_the_engine_rejects_are_refused_when_the_run_is_created(
    local: Local, name: str, why: str
) -> None:
    # Given an uploaded configuration
    ws = new_workspace(local, "var-names")

    # When a run is created with a variable the engine would not accept
    with pytest.raises(ApiError) as refused:
        start_plan(local, ws, files({"main.tf": PLAIN}), {name: "value-7"})

    # Then it is a 422 pointing at the variable, and no run exists
    assert refused.value.status == 422
    body = refused.value.body
    assert body["code"] == "INVALID_INPUT"
    assert why in body["message"]
    assert body["pointer"] == f"/variables/{name}"
    assert "value-7" not in json.dumps(body)
    assert local.client._call("GET", f"/api/v1/workspaces/{ws}/runs")["runs"] == []
