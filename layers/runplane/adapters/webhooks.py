"""POSTing a notification: one request, no redirects followed, a bounded wait.

The URL may itself be a credential (Slack's are): it never appears in a result,
an exception or a log line; failures are described by status or error class only.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PostResult:
    status: int | None
    error: str | None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class WebhookClient:
    def __init__(self, timeout_seconds: float = 10.0) -> None:
        self._timeout = timeout_seconds

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> PostResult:
        request = urllib.request.Request(  # noqa: S310 - scheme checked when the URL was stored
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "Runplane", **headers},
        )
        try:
            with _OPENER.open(request, timeout=self._timeout) as response:
                response.read(64 * 1024)
                return PostResult(int(response.status), None)
        except urllib.error.HTTPError as error:
            error.close()
            return PostResult(int(error.code), None)
        except (urllib.error.URLError, OSError, ValueError) as error:
            return PostResult(None, type(getattr(error, "reason", error)).__name__)
