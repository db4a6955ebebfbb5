"""The one walk over a planned value and its engine structures (``*_sensitive``,
``after_unknown``), shared by both sanitized plan documents (``policy_sanitize.sanitize_plan`` and
``policy_plan.sanitized_plan_document``), which differ only in how they write the marks.

Pure: standard library only. The walk fails closed: a sensitivity structure that is
malformed, or shaped differently from the value, raises :class:`Mismatch` and the caller
hides the value whole.
"""

from __future__ import annotations

import math
from typing import Any, Final

MAX_DEPTH: Final = 100


class Mismatch(Exception):
    """A sensitivity structure that is malformed or does not mirror its value."""


class Mark:
    """What stands in a marked value where the engine's structures say so."""

    def __init__(self, name: str, *, unknown: bool, sensitive: bool) -> None:
        self.name = name
        self.unknown = unknown
        self.sensitive = sensitive

    def __repr__(self) -> str:
        return self.name


SENSITIVE: Final = Mark("SENSITIVE", unknown=False, sensitive=True)
UNKNOWN: Final = Mark("UNKNOWN", unknown=True, sensitive=False)
UNKNOWN_SENSITIVE: Final = Mark("UNKNOWN_SENSITIVE", unknown=True, sensitive=True)


def marked(value: Any, sensitive: Any, unknown: Any, *, unknown_first: bool, depth: int = 0) -> Any:
    """``value`` with a :class:`Mark` wherever it is sensitive or unknown until apply,
    including unknown attributes the engine leaves out of the value.

    ``unknown_first``: whether an unknown value's sensitivity structure goes unchecked
    (the Terraform-shaped document keeps the engine's order); otherwise a sensitive value
    is marked first and a malformed structure is refused even over an unknown value.
    """
    if unknown is True and unknown_first:
        return UNKNOWN_SENSITIVE if sensitive is True else UNKNOWN
    if sensitive is True:
        return SENSITIVE
    if sensitive is not False and not isinstance(sensitive, dict | list):
        raise Mismatch
    if unknown is True:
        return UNKNOWN
    if depth > MAX_DEPTH:
        raise Mismatch
    if isinstance(value, dict):
        return _marked_object(value, sensitive, unknown, unknown_first, depth)
    if isinstance(value, list):
        return _marked_list(value, sensitive, unknown, unknown_first, depth)
    if isinstance(sensitive, dict | list):
        raise Mismatch  # a structure describing a scalar
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise Mismatch


def _marked_object(
    value: dict[Any, Any], sensitive: Any, unknown: Any, unknown_first: bool, depth: int
) -> dict[str, Any]:
    if isinstance(sensitive, list):
        raise Mismatch
    s_mask: dict[str, Any] = sensitive or {}
    u_mask: dict[str, Any] = unknown if isinstance(unknown, dict) else {}
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise Mismatch
        out[key] = marked(
            item,
            s_mask.get(key, False),
            u_mask.get(key, False),
            unknown_first=unknown_first,
            depth=depth + 1,
        )
    for key, flag in u_mask.items():
        # The engine leaves unknown attributes out of its values.
        if flag is True and isinstance(key, str) and key not in value:
            out[key] = UNKNOWN_SENSITIVE if s_mask.get(key) is True else UNKNOWN
    return out


def _marked_list(
    value: list[Any], sensitive: Any, unknown: Any, unknown_first: bool, depth: int
) -> list[Any]:
    if isinstance(sensitive, dict):
        raise Mismatch
    if isinstance(sensitive, list) and len(sensitive) != len(value):
        raise Mismatch
    s_items = sensitive if isinstance(sensitive, list) else [False] * len(value)
    u_items = (
        unknown
        if isinstance(unknown, list) and len(unknown) == len(value)
        else [False] * len(value)
    )
    return [
        marked(item, s, u, unknown_first=unknown_first, depth=depth + 1)
        for item, s, u in zip(value, s_items, u_items, strict=True)
    ]
