"""HTTP plumbing of the dashboard: the resolver that routes a request, the request as
a browser sent it, HTML replies."""

from __future__ import annotations

import base64
import email
import email.policy
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from aws_lambda_powertools.event_handler import Response

from functions.isolation import IsolatedRestResolver, current_event
from runplane.domain.errors import InvalidBody, NotFound, TooLarge
from runplane.services.principals import source_address

Page = Response[str]
ID = "[A-Za-z0-9-]{1,64}"
# An organization's or a workspace's name, as TFE spells it (runplane.domain.entities).
NAME = "[A-Za-z0-9_-]{1,90}"
# What each path parameter of a route may be: a path with any other value is no page's.
PATH_PARAMETERS = {
    "workspace_id": ID,
    "run_id": ID,
    "team_id": ID,
    "state_version_id": ID,
    "decision": "approve|reject",
    "phase": "plan|apply",
    "installation_id": "[0-9]{1,16}",
    # The names in Terraform's run links (/app/ORGANIZATION/WORKSPACE/runs/RUN).
    "organization": NAME,
    "workspace": NAME,
    # Whatever follows /ui/static/ (slashes too): static() serves its own files only.
    "file_name": "(?s:.*)[^/]",
}
_PARAMETER = re.compile(r"<(\w+)>")

# Pages load nothing from elsewhere and run only the dashboard's own script.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: under it a browser sends `Origin: null` with every POST, even
    # from our own pages, and the origin check would refuse them all.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# A form carries a few digests and a comment; anything much larger is not ours.
MAX_FORM_BYTES = 16 * 1024
# The recovery form may carry an emergency state file (the recovery service takes up
# to 10 MB of it), plus its fields and multipart framing.
MAX_UPLOAD_BYTES = 10_000_000 + 64 * 1024


class PageResolver(IsolatedRestResolver):
    """A REST resolver whose routes match the dashboard's own paths only.

    Powertools' parameters take almost any segment; here each takes its shape from
    ``PATH_PARAMETERS``, so a malformed ID is no page's (404) before any session is
    read. As in Powertools, trailing slashes are ignored; unlike its ``$``, a path
    that ends in a newline is no page's. (Powertools compiles every route's rule, and
    its not-found placeholder, with ``_compile_regex``.)
    """

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}/*\\Z") -> re.Pattern[str]:
        # split() alternates literal text and parameter names.
        pattern = "".join(
            re.escape(part) if i % 2 == 0 else f"(?P<{part}>{PATH_PARAMETERS[part]})"
            for i, part in enumerate(_PARAMETER.split(rule))
        )
        return re.compile(base_regex.format(pattern))


def current_request() -> Request:
    """The request being resolved on this thread."""
    return Request.of(current_event().raw_event)


def page_not_found(request: Request) -> NotFound:
    """The refusal of a path no page has, named without its trailing slashes."""
    return NotFound("page", request.path.rstrip("/") or "/")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = field(repr=False)
    # Where the request came from, as API Gateway saw it (for the audit trail).
    source_address: str | None = None

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
            source_address=source_address(event),
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
        """The text fields of a urlencoded or multipart form (a urlencoded one larger
        than any of ours reads as empty, so its CSRF check refuses it)."""
        return self._parts[0]

    def files(self) -> dict[str, bytes]:
        """The non-empty files of a multipart form."""
        return self._parts[1]

    @cached_property
    def _parts(self) -> tuple[dict[str, str], dict[str, bytes]]:
        kind = self.headers.get("content-type", "")
        if kind.lower().startswith("multipart/form-data"):
            if len(self.body) > MAX_UPLOAD_BYTES:
                raise TooLarge("the form is larger than 10 MB", "/emergency_state")
            return _multipart(kind, self.body)
        if len(self.body) > MAX_FORM_BYTES:
            return {}, {}
        text = self.body.decode("utf-8", "replace")
        return {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}, {}


def _multipart(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, bytes]]:
    header = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    message = email.message_from_bytes(header + body, policy=email.policy.HTTP)
    if not message.is_multipart():
        raise InvalidBody("the form could not be read: send it again from the page")
    fields: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(payload, bytes):
            continue
        if part.get_filename() is None:
            fields[name] = payload.decode("utf-8", "replace")
        elif payload:
            files[name] = payload
    return fields, files


def reply(
    status: int,
    body: str = "",
    *,
    content_type: str = "text/html; charset=utf-8",
    headers: dict[str, str] | None = None,
    cookies: list[str] | None = None,
) -> Page:
    sent: dict[str, str | list[str]] = {
        "Content-Type": content_type,
        **SECURITY_HEADERS,
        **(headers or {}),
    }
    if cookies:
        # Each cookie is its own Set-Cookie header (the attributes are already written).
        sent["Set-Cookie"] = cookies
    return Response(status_code=status, content_type=content_type, body=body, headers=sent)


def json_reply(status: int, body: Any) -> Page:
    return reply(status, json.dumps(body), content_type="application/json")


def redirect(location: str, cookies: list[str] | None = None, status: int = 303) -> Page:
    return reply(status, headers={"Location": location}, cookies=cookies)
