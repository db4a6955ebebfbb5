"""A standby runner of the pool (docs/standby.md): started before any run with only a
single-use ticket, it polls the control plane's claim endpoint over HTTPS until a
launch assigns it a phase, then runs that phase exactly as a task launched for it
would (``main_handing_over``), with the claimed environment. It gives up, exiting 0,
when its wait ends or its ticket is refused.

The ticket is the only thing it holds: it goes in a request body, never in a log, and
leaves the process environment before the phase runs.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping

CLAIM_PATH = "/api/v1/runner/standby/claim"
TICKET = "RUNPLANE_STANDBY_TICKET"
_STANDBY_SETTINGS = (TICKET, "RUNPLANE_STANDBY_SECONDS", "RUNPLANE_STANDBY_POLL_SECONDS")
_REQUEST_TIMEOUT = 20


class Refused(Exception):
    """The control plane refused the ticket: nothing will ever be assigned."""


def claim_once(control_plane_url: str, ticket: str) -> dict[str, str] | None:
    """One poll: the assigned environment, None for "nothing yet"; raises ``Refused``."""
    request = urllib.request.Request(  # noqa: S310 - the control plane's own URL
        control_plane_url.rstrip("/") + CLAIM_PATH,
        data=json.dumps({"ticket": ticket}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=_REQUEST_TIMEOUT) as reply:  # noqa: S310
            if reply.status == 204:
                return None
            body = json.loads(reply.read())
    except urllib.error.HTTPError as error:
        if error.code in (401, 403, 404, 409):
            raise Refused(str(error.code)) from None
        return None  # a throttle or a server error: poll again
    environment = body.get("environment") if isinstance(body, dict) else None
    if not isinstance(environment, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        raise Refused("the claim returned no environment")
    return environment


def wait_for_run(
    environ: Mapping[str, str],
    *,
    claim: Callable[[str, str], dict[str, str] | None] = claim_once,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> dict[str, str] | None:
    """Poll until a phase is assigned (its environment) or the wait ends (None)."""
    ticket = environ[TICKET]
    url = environ["RUNPLANE_CONTROL_PLANE_URL"]
    deadline = monotonic() + float(environ.get("RUNPLANE_STANDBY_SECONDS") or 3600)
    interval = max(0.2, float(environ.get("RUNPLANE_STANDBY_POLL_SECONDS") or 2))
    while monotonic() < deadline:
        try:
            assigned = claim(url, ticket)
        except Refused:
            return None
        except (OSError, ValueError):  # unreachable for a moment: poll again
            assigned = None
        if assigned is not None:
            return assigned
        sleep(interval)
    return None


def phase_environment(environ: Mapping[str, str], assigned: Mapping[str, str]) -> dict[str, str]:
    """The task's own environment without the standby's settings, and the claimed
    launch environment over it: what a task launched for the phase would hold."""
    kept = {k: v for k, v in environ.items() if k not in _STANDBY_SETTINGS}
    return {**kept, **assigned}


def main_in_pool(run_phase: Callable[[], int]) -> int:
    """Wait for a run; run its phase with ``run_phase`` (``main_handing_over``) in the
    claimed environment; exit 0 with nothing assigned."""
    assigned = wait_for_run(os.environ)
    if assigned is None:
        print("runner: standby ended with no run assigned")
        return 0
    environment = phase_environment(os.environ, assigned)
    os.environ.clear()
    os.environ.update(environment)
    return run_phase()
