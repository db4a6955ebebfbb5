"""`runplane local up` as a person runs it: a process that serves until Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from runplane.local.stack import free_port


def local_up_banner(process: subprocess.Popen[str], timeout: float = 120) -> str:
    """What `runplane local up` printed until it said how to use it (or exited)."""
    assert process.stdout is not None
    banner = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        banner.append(line)
        if "use it with" in line or not line:
            break
    return "".join(banner)


def test_local_up_serves_writes_client_files_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    # Given a free port and an empty data directory
    port = free_port()
    data = tmp_path / "data"

    # When `runplane local up` starts
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runplane.cli",
            "local",
            "up",
            "--port",
            str(port),
            "--data-dir",
            str(data),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        text = local_up_banner(process)
        assert f"http://127.0.0.1:{port}" in text, text

        # Then it wrote what a client needs, readable only by the user
        credentials = json.loads((data / "credentials.json").read_text())
        assert credentials["url"] == f"http://127.0.0.1:{port}"
        assert credentials["organization"] == "default"
        assert credentials["token"] in text
        rc = (data / "terraform.rc").read_text()
        assert f'host "127.0.0.1:{port}"' in rc
        assert credentials["token"] in rc
        assert (data / "credentials.json").stat().st_mode & 0o077 == 0

        # And the Cloud API answers with that token
        ping = requests.get(f"{credentials['url']}/api/v2/ping", timeout=30)
        assert ping.status_code == 204
        assert ping.headers["TFP-API-Version"] == "2.5"
        org = requests.get(
            f"{credentials['url']}/api/v2/organizations/default",
            headers={"Authorization": f"Bearer {credentials['token']}"},
            timeout=30,
        )
        assert org.status_code == 200
        assert org.json()["data"]["id"] == "default"

        # And it is an OpenID Connect issuer at its own URL, its keys public
        discovery = requests.get(
            f"{credentials['url']}/.well-known/openid-configuration", timeout=30
        ).json()
        assert discovery["issuer"] == credentials["url"]
        jwks = requests.get(discovery["jwks_uri"], timeout=30)
        assert jwks.status_code == 200
        assert [key["alg"] for key in jwks.json()["keys"]] == ["RS256"]

        # And the one-time dashboard login link it printed signs a browser in
        link = re.search(r"dashboard:\s+(\S+/ui/login\?code=\S+)", text)
        assert link is not None, text
        signed_in = requests.get(link[1], allow_redirects=False, timeout=30)
        assert signed_in.status_code == 303
        assert "runplane_session" in signed_in.cookies
    finally:
        # When it gets Ctrl-C, it stops cleanly
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    assert "stopped" in output
