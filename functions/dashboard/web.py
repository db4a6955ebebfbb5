"""HTTP plumbing of the dashboard: the request as a browser sent it, HTML replies."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs

# Pages load nothing from elsewhere and run only the dashboard's own script.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# A form carries a few digests and a comment; anything much larger is not ours.
MAX_FORM_BYTES = 16 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = field(repr=False)

    @classmethod
    def of(cls, event: dict[str, Any]) -> Request:
        raw = event.get("body") or ""
        body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode("utf-8")
        return cls(
            method=str(event.get("httpMethod", "GET")).upper(),
            path=str(event.get("path") or "/"),
            query=dict(event.get("queryStringParameters") or {}),
            headers={k.lower(): str(v) for k, v in (event.get("headers") or {}).items()},
            body=body,
        )

    @property
    def scheme(self) -> str:
        return "http" if self.headers.get("x-forwarded-proto") == "http" else "https"

    def cookie(self, name: str) -> str | None:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(self.headers.get("cookie", ""))
        except CookieError:
            return None
        morsel = jar.get(name)
        return morsel.value if morsel is not None and morsel.value else None

    def form(self) -> dict[str, str]:
        if len(self.body) > MAX_FORM_BYTES:
            return {}
        text = self.body.decode("utf-8", "replace")
        return {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}


def reply(
    status: int,
    body: str = "",
    *,
    content_type: str = "text/html; charset=utf-8",
    headers: dict[str, str] | None = None,
    cookies: list[str] | None = None,
) -> dict[str, Any]:
    response: dict[str, Any] = {
        "statusCode": status,
        "headers": {"Content-Type": content_type, **SECURITY_HEADERS, **(headers or {})},
        "body": body,
        "isBase64Encoded": False,
    }
    if cookies:
        response["multiValueHeaders"] = {"Set-Cookie": cookies}
    return response


def redirect(location: str, cookies: list[str] | None = None) -> dict[str, Any]:
    return reply(303, headers={"Location": location}, cookies=cookies)
