"""Reading JSON request bodies the same way on both APIs, before anything else does.

A body that is not UTF-8, not JSON, or nested deeper than any document we
accept is a 400 ``INVALID_BODY``; it must never reach a parser that fails
with an untyped error (``RecursionError`` on deep nesting, ``UnicodeDecodeError``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from runplane.domain.errors import InvalidBody

# None of our documents nests deeper than this; DynamoDB stores at most 32 levels.
MAX_DEPTH = 32


def text_of(body: str | None, is_base64: bool) -> str | None:
    """The body as text: API Gateway hands bodies it cannot pass as text base64-encoded."""
    if not body or not is_base64:
        return body or None
    try:
        return base64.b64decode(body, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidBody("the request body is not UTF-8 text") from None


def parse_json(body: str | None, is_base64: bool = False) -> Any:
    """The JSON document of a body (None when empty), or ``InvalidBody``."""
    text = text_of(body, is_base64)
    if text is None:
        return None
    try:
        document = json.loads(text)
    except RecursionError:
        raise InvalidBody(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as invalid:
        raise InvalidBody(f"the request body is not valid JSON: {invalid}") from None
    if _depth(document) > MAX_DEPTH:
        raise InvalidBody(f"the request body nests deeper than {MAX_DEPTH} levels")
    return document


def _is_text(value: str) -> bool:
    """False for a string with a lone surrogate (a ``\\ud800`` escape is valid JSON but no
    Unicode text): it would fail later, untyped, wherever the string is encoded."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _depth(document: Any) -> int:
    """How deeply containers nest (a scalar is 0), without recursion; ``InvalidBody`` for
    a string that is not Unicode text."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            if not _is_text(value):
                raise InvalidBody("the request body is not UTF-8 text (a lone surrogate escape)")
            continue
        if isinstance(value, dict):
            children: Any = [*value.keys(), *value.values()]
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_DEPTH:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest
