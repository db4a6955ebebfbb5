"""What a plan will do, for a person: the plan view the dashboard and the run API show.

Built from the engine's ``show -json`` document the control plane holds. That document
came out of a sandbox that ran the configuration's code, so it is hostile input: any
shape, any size, any nesting. Everything here fails closed:

- a value is shown only through ``plan_values.marked`` with the engine's ``*_sensitive``
  structure; a non-null value without that structure, or with a malformed one, is hidden
  whole (as ``policy_sanitize._redacted`` does), and a sensitive output hides both sides;
- a document that does not parse (too deep, a number too long, ``NaN``) is not shown;
- the work is bounded: only the requested page's resources are diffed, each diff keeps
  ``MAX_ROWS`` rows and walks at most ``MAX_NODES`` values, and each value's text, path
  and name is cut to a bounded length.

Pure: standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from runplane.domain.plan_secrets import Hidden
from runplane.domain.plan_values import SENSITIVE, Mark, Mismatch, marked

PAGE_SIZE: Final = 100
"""Resource changes on one page of the plan."""
MAX_ROWS: Final = 40
"""Attribute rows shown for one resource or output; the rest are counted."""
MAX_NODES: Final = 20_000
"""Values one diff walks at most; beyond, its remaining rows are counted as "more"."""
MAX_OUTPUTS: Final = 100
MAX_DRIFT: Final = 100
MAX_TEXT: Final = 400
"""Characters of one value's text; a longer value is cut, saying how much more it has."""
MAX_NAME: Final = 300
"""Characters of an address, type, provider, path or output name."""
MAX_PLAN_JSON_BYTES: Final = 64 * 1024 * 1024
"""A larger plan document is not shown (its counts are still on the run page)."""

SENSITIVE_TEXT: Final = "(sensitive)"
UNKNOWN_TEXT: Final = "known after apply"


class Action(StrEnum):
    """A resource change's action, in the order the view lists them."""

    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DESTROY = "destroy"
    READ = "read"
    # Actions the view does not know (a newer engine's, or a forged one): listed, never
    # hidden, so a review shows everything that is not a no-op.
    OTHER = "other"
    NO_OP = "no-op"

    @property
    def symbol(self) -> str:
        return _SYMBOLS[self]

    @property
    def verb(self) -> str:
        """How a count of it reads: "3 to create"."""
        return _VERBS[self]


_SYMBOLS: Final = {
    Action.CREATE: "+",
    Action.UPDATE: "~",
    Action.REPLACE: "-/+",
    Action.DESTROY: "-",
    Action.READ: "<=",
    Action.OTHER: "?",
    Action.NO_OP: " ",
}
_VERBS: Final = {
    Action.CREATE: "to create",
    Action.UPDATE: "to update in place",
    Action.REPLACE: "to replace",
    Action.DESTROY: "to destroy",
    Action.READ: "to read",
    Action.OTHER: "with other actions",
    Action.NO_OP: "unchanged",
}
LISTED: Final = tuple(action for action in Action if action is not Action.NO_OP)
"""The actions whose changes are listed; no-ops are only counted."""

# Why the engine chose an action, in words (``action_reason``).
_REASONS: Final = {
    "replace_because_tainted": "tainted: it must be replaced",
    "replace_because_cannot_update": "cannot be updated in place",
    "replace_by_request": "replacement was requested",
    "replace_by_triggers": "replace_triggered_by changed",
    "delete_because_no_resource_config": "no longer in the configuration",
    "delete_because_no_module": "its module is no longer in the configuration",
    "delete_because_wrong_repetition": "its count or for_each changed shape",
    "delete_because_count_index": "its count index is out of range",
    "delete_because_each_key": "its for_each key is gone",
    "read_because_config_unknown": "its configuration is known only after apply",
    "read_because_dependency_pending": "it depends on changes not yet applied",
}


class ValueKind(StrEnum):
    VALUE = "value"
    NULL = "null"
    UNKNOWN = "unknown"
    SENSITIVE = "sensitive"


@dataclass(frozen=True)
class Shown:
    """One side of an attribute row, as text."""

    text: str
    kind: ValueKind


@dataclass(frozen=True)
class AttributeRow:
    path: str
    """Flattened: ``tags.Name``, ``ingress[0].from_port``; empty for the whole value."""
    before: Shown | None
    """None: the attribute is not on this side (created, or destroyed)."""
    after: Shown | None
    forces_replacement: bool = False


@dataclass(frozen=True)
class Diff:
    rows: tuple[AttributeRow, ...] = ()
    more: int = 0
    """Rows beyond ``MAX_ROWS``."""
    more_is_lower_bound: bool = False
    """The walk stopped at ``MAX_NODES``: there are at least ``more`` more rows."""


@dataclass(frozen=True)
class ResourceChange:
    address: str
    action: Action
    type: str
    provider: str
    reason: str | None
    deposed: str | None
    diff: Diff


@dataclass(frozen=True)
class OutputChange:
    name: str
    action: Action
    sensitive: bool
    diff: Diff


@dataclass(frozen=True)
class Group:
    action: Action
    total: int
    """Changes with this action in the whole plan."""
    changes: tuple[ResourceChange, ...]
    """Those on this page."""


@dataclass(frozen=True)
class PlanView:
    counts: Mapping[Action, int]
    groups: tuple[Group, ...]
    """The groups with changes on this page, in ``LISTED`` order."""
    page: int
    pages: int
    page_size: int
    listed: int
    """Resource changes listed over all pages (no-ops are not)."""
    outputs: tuple[OutputChange, ...] = ()
    outputs_more: int = 0
    unchanged_outputs: int = 0
    drift: tuple[ResourceChange, ...] = ()
    drift_total: int = 0
    format_version: str | None = None
    engine_version: str | None = None

    @property
    def has_changes(self) -> bool:
        return self.listed > 0 or bool(self.outputs) or self.outputs_more > 0

    @property
    def drift_more(self) -> int:
        return self.drift_total - len(self.drift)

    def count_items(self) -> list[tuple[Action, int]]:
        """The listed actions that some change has, with their counts, then the no-ops."""
        listed = [(action, self.counts.get(action, 0)) for action in LISTED]
        return [item for item in listed if item[1]] + [
            (Action.NO_OP, self.counts.get(Action.NO_OP, 0))
        ]

    def to_body(self) -> dict[str, Any]:
        """The view as JSON (the run API's ``GET /runs/{id}/plan``)."""
        return {
            "counts": {action.value: self.counts.get(action, 0) for action in Action},
            "page": {"number": self.page, "pages": self.pages, "size": self.page_size},
            "listed": self.listed,
            "resource_changes": [
                _change_body(change) for group in self.groups for change in group.changes
            ],
            "output_changes": [
                {
                    "name": o.name,
                    "action": o.action.value,
                    "sensitive": o.sensitive,
                    **_diff_body(o.diff),
                }
                for o in self.outputs
            ],
            "output_changes_more": self.outputs_more,
            "resource_drift": [_change_body(change) for change in self.drift],
            "resource_drift_total": self.drift_total,
        }


class PlanUnreadable(Exception):
    """The plan document cannot be shown: it does not parse, or is not a plan."""


# -- building the view ----------------------------------------------------------------------


def parse(document: bytes) -> Mapping[str, Any]:
    """The plan document, or ``PlanUnreadable``. ``NaN`` and infinities are refused, as are
    a nesting too deep for the parser and a number too long to convert."""
    if len(document) > MAX_PLAN_JSON_BYTES:
        raise PlanUnreadable("the plan is too large to show")
    try:
        parsed = json.loads(document, parse_constant=_refuse_constant)
    except (ValueError, RecursionError, UnicodeDecodeError) as error:
        raise PlanUnreadable("the plan document is not valid JSON") from error
    if not isinstance(parsed, dict):
        raise PlanUnreadable("the plan document is not a JSON object")
    return parsed


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def build_view(plan: Mapping[str, Any], page: int = 1, page_size: int = PAGE_SIZE) -> PlanView:
    """Page ``page`` (from 1) of the plan's resource changes, grouped by action, with every
    count, the output changes and the drift found. A page past the last is the last page.
    Raises ``PlanUnreadable`` if a value is too deep to walk."""
    try:
        return _build(plan, max(1, page), max(1, page_size))
    except RecursionError as error:  # nesting the walks cannot follow: show nothing of it
        raise PlanUnreadable("the plan document is nested too deeply") from error


def _build(plan: Mapping[str, Any], page: int, page_size: int) -> PlanView:
    entries = [(_action(entry), entry) for entry in _mappings(plan.get("resource_changes"))]
    counts = {action: 0 for action in Action}
    for action, _ in entries:
        counts[action] += 1
    # Grouped in listing order, each group in the document's order (a stable sort).
    order = {action: n for n, action in enumerate(Action)}
    listed = sorted(
        (item for item in entries if item[0] is not Action.NO_OP), key=lambda i: order[i[0]]
    )
    pages = max(1, -(-len(listed) // page_size))
    page = min(page, pages)
    on_page = listed[(page - 1) * page_size : page * page_size]
    groups = tuple(
        Group(
            action,
            counts[action],
            tuple(_resource_change(entry, a) for a, entry in on_page if a is action),
        )
        for action in LISTED
        if any(a is action for a, _ in on_page)
    )
    outputs, outputs_more, unchanged = _outputs(plan.get("output_changes"))
    drift_entries = [
        (a, e) for e in _mappings(plan.get("resource_drift")) if (a := _action(e)) != Action.NO_OP
    ]
    return PlanView(
        counts=counts,
        groups=groups,
        page=page,
        pages=pages,
        page_size=page_size,
        listed=len(listed),
        outputs=outputs,
        outputs_more=outputs_more,
        unchanged_outputs=unchanged,
        drift=tuple(_resource_change(e, a) for a, e in drift_entries[:MAX_DRIFT]),
        drift_total=len(drift_entries),
        format_version=_text(plan.get("format_version")),
        engine_version=_text(plan.get("terraform_version")),
    )


def _mappings(value: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def _action(entry: Mapping[str, Any]) -> Action:
    change = entry.get("change")
    actions = change.get("actions") if isinstance(change, Mapping) else None
    return _action_of(actions)


_SHAPES: Final = {
    ("create",): Action.CREATE,
    ("update",): Action.UPDATE,
    ("delete",): Action.DESTROY,
    ("read",): Action.READ,
    ("no-op",): Action.NO_OP,
    ("delete", "create"): Action.REPLACE,
    ("create", "delete"): Action.REPLACE,
}


def _action_of(actions: object) -> Action:
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        return Action.OTHER
    return _SHAPES.get(tuple(actions), Action.OTHER)


def _text(value: object, limit: int = MAX_NAME) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _resource_change(entry: Mapping[str, Any], action: Action) -> ResourceChange:
    raw_change = entry.get("change")
    change: Mapping[str, Any] = raw_change if isinstance(raw_change, Mapping) else {}
    reason = entry.get("action_reason")
    return ResourceChange(
        address=_text(entry.get("address")) or "(no address)",
        action=action,
        type=_text(entry.get("type")) or "",
        provider=_text(entry.get("provider_name")) or "",
        reason=(_REASONS.get(reason) or _text(reason.replace("_", " "), 120))
        if isinstance(reason, str)
        else None,
        deposed=_text(entry.get("deposed")),
        diff=_change_diff(change, action, _replace_paths(change.get("replace_paths"))),
    )


def _outputs(value: object) -> tuple[tuple[OutputChange, ...], int, int]:
    """The changed outputs by name (at most ``MAX_OUTPUTS``), how many more changed, and
    how many are unchanged."""
    if not isinstance(value, Mapping):
        return (), 0, 0
    changed: list[tuple[str, Mapping[str, Any], Action]] = []
    unchanged = 0
    for name, raw in value.items():
        change: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        action = _action_of(change.get("actions"))
        if action is Action.NO_OP:
            unchanged += 1
        elif isinstance(name, str):
            changed.append((name, change, action))
    changed.sort(key=lambda item: item[0])
    shown = tuple(_output_change(*item) for item in changed[:MAX_OUTPUTS])
    return shown, len(changed) - len(shown), unchanged


def _output_change(name: str, change: Mapping[str, Any], action: Action) -> OutputChange:
    label = _text(name) or ""
    flags = (change.get("sensitive"), change.get("before_sensitive"), change.get("after_sensitive"))
    if any(flag is True for flag in flags):
        # A sensitive output hides both sides, whatever its structures say.
        before = SENSITIVE if change.get("before") is not None else None
        after_there = change.get("after") is not None or change.get("after_unknown") is True
        rows = (
            AttributeRow(
                label,
                None if before is None else _shown(before),
                _shown(SENSITIVE) if after_there else None,
            ),
        )
        return OutputChange(label, action, True, Diff(rows))
    return OutputChange(label, action, False, _change_diff(change, action, frozenset(), label))


# -- the attribute diff ---------------------------------------------------------------------

_ABSENT: Final = Mark("ABSENT", unknown=False, sensitive=False)
"""Not on this side at all (``None`` is a null the engine planned)."""


def _side(change: Mapping[str, Any], which: str, *, unknown: bool) -> Any:
    """One side of a change with its sensitive and unknown places marked, or ``_ABSENT``.

    Fail closed, as ``policy_sanitize._redacted``: a non-null value without its
    ``*_sensitive`` structure, or with one that is malformed or does not mirror it, is
    hidden whole."""
    value = change.get(which)
    unknowns = change.get("after_unknown", False) if unknown else False
    if value is None and unknowns is not True:
        return _ABSENT
    mask_key = f"{which}_sensitive"
    if value is not None and mask_key not in change:
        return SENSITIVE
    try:
        return marked(value, change.get(mask_key, False), unknowns, unknown_first=False)
    except Mismatch:
        return SENSITIVE


def _change_diff(
    change: Mapping[str, Any], action: Action, replace_paths: frozenset[str], root: str = ""
) -> Diff:
    before = _side(change, "before", unknown=False)
    after = _side(change, "after", unknown=True)
    raw_before, raw_after = change.get("before"), change.get("after")
    # A create shows what will be; a destroy what was; anything else what changes.
    if action in (Action.CREATE, Action.READ):
        before, raw_before = _ABSENT, None
    elif action is Action.DESTROY:
        after, raw_after = _ABSENT, None
    walk = _Walk(replace_paths, only_changes=action not in (Action.CREATE, Action.READ))
    walk.diff(before, after, raw_before, raw_after, root, ())
    return Diff(tuple(walk.rows), walk.more, walk.stopped)


class _Stop(Exception):
    pass


class _Walk:
    """Both sides walked together, with the raw values at the same places (only to tell
    whether a sensitive value changed; never shown)."""

    def __init__(self, replace_paths: frozenset[str], *, only_changes: bool) -> None:
        self.replace_paths = replace_paths
        self.only_changes = only_changes
        self.rows: list[AttributeRow] = []
        self.more = 0
        self.nodes = 0
        self.stopped = False

    def diff(
        self, before: Any, after: Any, raw_b: Any, raw_a: Any, path: str, keys: tuple[str, ...]
    ) -> None:
        try:
            self._diff(before, after, raw_b, raw_a, path, keys)
        except _Stop:
            self.stopped = True

    def _diff(
        self, before: Any, after: Any, raw_b: Any, raw_a: Any, path: str, keys: tuple[str, ...]
    ) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Stop
        # A container on one side is walked into; a mark or null on the other side
        # stands for each of its items ("known after apply" over every old item).
        if _non_empty(before) or _non_empty(after):
            kind = dict if isinstance(before, dict) or isinstance(after, dict) else list
            if all(isinstance(side, kind | Mark) or side is None for side in (before, after)):
                if kind is dict:
                    self._object(before, after, raw_b, raw_a, path, keys)
                else:
                    self._list(before, after, raw_b, raw_a, path, keys)
                return
        self._leaf(before, after, raw_b, raw_a, path, keys)

    def _object(
        self, before: Any, after: Any, raw_b: Any, raw_a: Any, path: str, keys: tuple[str, ...]
    ) -> None:
        names = dict.fromkeys(
            [
                *(before if isinstance(before, dict) else ()),
                *(after if isinstance(after, dict) else ()),
            ]
        )
        for key in sorted(names):
            self._diff(
                _child(before, key),
                _child(after, key),
                _raw_child(raw_b, key),
                _raw_child(raw_a, key),
                _join(path, key),
                (*keys, key),
            )

    def _list(
        self, before: Any, after: Any, raw_b: Any, raw_a: Any, path: str, keys: tuple[str, ...]
    ) -> None:
        length = max(len(side) for side in (before, after) if isinstance(side, list))
        for index in range(length):
            self._diff(
                _child(before, index),
                _child(after, index),
                _raw_child(raw_b, index),
                _raw_child(raw_a, index),
                f"{path}[{index}]",
                (*keys, str(index)),
            )

    def _leaf(
        self, before: Any, after: Any, raw_b: Any, raw_a: Any, path: str, keys: tuple[str, ...]
    ) -> None:
        if _nothing(before) and _nothing(after):
            return  # null or absent on both sides: nothing to say
        if self.only_changes and not _changed(before, after, raw_b, raw_a):
            return
        if len(self.rows) >= MAX_ROWS:
            self.more += 1
            return
        self.rows.append(
            AttributeRow(
                _text(path) or "",
                None if before is _ABSENT else _shown(before),
                None if after is _ABSENT else _shown(after),
                forces_replacement=".".join(keys) in self.replace_paths,
            )
        )


def _non_empty(side: Any) -> bool:
    return isinstance(side, dict | list) and len(side) > 0


def _child(side: Any, key: str | int) -> Any:
    """A container's item; a mark or null spread over the other side's items; else
    ``_ABSENT``."""
    if isinstance(side, Mark) or side is None:
        return side
    if isinstance(side, dict) and isinstance(key, str):
        return side.get(key, _ABSENT)
    if isinstance(side, list) and isinstance(key, int) and key < len(side):
        return side[key]
    return _ABSENT


def _raw_child(raw: Any, key: str | int) -> Any:
    if isinstance(raw, dict) and isinstance(key, str):
        return raw.get(key)
    if isinstance(raw, list) and isinstance(key, int) and key < len(raw):
        return raw[key]
    return None


def _nothing(side: Any) -> bool:
    return side is _ABSENT or side is None


def _changed(before: Any, after: Any, raw_b: Any, raw_a: Any) -> bool:
    if isinstance(after, Mark) and after.unknown:
        return True
    if isinstance(before, Mark) or isinstance(after, Mark):
        # Sensitive on a side: changed if the sensitivity did, or the hidden values.
        if _is_sensitive(before) != _is_sensitive(after):
            return True
        return not _same(raw_b, raw_a)
    return not _same(before, after)


def _is_sensitive(side: Any) -> bool:
    return isinstance(side, Mark) and side.sensitive


def _same(one: Any, other: Any) -> bool:
    # Distinguishes true from 1 and 1 from 1.0, which Python's == does not.
    if isinstance(one, dict | list) or isinstance(other, dict | list):
        return _canonical(one) == _canonical(other)
    return type(one) is type(other) and one == other


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


_IDENTIFIER_START: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENTIFIER: Final = _IDENTIFIER_START | frozenset("0123456789-")


def _join(path: str, key: str) -> str:
    if key and key[0] in _IDENTIFIER_START and all(c in _IDENTIFIER for c in key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key[:MAX_NAME])}]"


def _replace_paths(value: object) -> frozenset[str]:
    """The engine's ``replace_paths`` (attribute paths that force the replacement), each
    as its keys joined by dots."""
    if not isinstance(value, list):
        return frozenset()
    found = set()
    for item in value[: MAX_ROWS * 10]:
        if isinstance(item, list) and all(isinstance(k, str | int) for k in item):
            found.add(".".join(str(k) for k in item))
    return frozenset(found)


def _shown(value: Any) -> Shown:
    if isinstance(value, Hidden):
        return Shown(SENSITIVE_TEXT, ValueKind.SENSITIVE)
    if isinstance(value, Mark):
        if value.sensitive:
            return Shown(SENSITIVE_TEXT, ValueKind.SENSITIVE)
        return Shown(UNKNOWN_TEXT, ValueKind.UNKNOWN)
    if value is None:
        return Shown("null", ValueKind.NULL)
    return Shown(_bounded_text(value), ValueKind.VALUE)


def _bounded_text(value: Any) -> str:
    """``value`` as compact JSON (marks as their words), cut at ``MAX_TEXT`` characters."""
    pieces: list[str] = []
    size = 0
    for piece in _pieces(value):
        pieces.append(piece)
        size += len(piece)
        if size > MAX_TEXT:
            break
    text = "".join(pieces)
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + "… (cut)"


def _pieces(value: Any) -> Iterator[str]:
    """Compact JSON text of an already marked value, lazily (a cut value stops early)."""
    if isinstance(value, Mark):
        yield SENSITIVE_TEXT if value.sensitive else f"({UNKNOWN_TEXT})"
    elif isinstance(value, Hidden):
        yield SENSITIVE_TEXT
    elif isinstance(value, dict):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield ("," if n else "") + json.dumps(key, ensure_ascii=False) + ":"
            yield from _pieces(item)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for n, item in enumerate(value):
            if n:
                yield ","
            yield from _pieces(item)
        yield "]"
    else:
        yield json.dumps(value, ensure_ascii=False)


# -- JSON -------------------------------------------------------------------------------


def _shown_body(shown: Shown | None) -> dict[str, str] | None:
    return None if shown is None else {"text": shown.text, "kind": shown.kind.value}


def _diff_body(diff: Diff) -> dict[str, Any]:
    return {
        "attributes": [
            {
                "path": row.path,
                "before": _shown_body(row.before),
                "after": _shown_body(row.after),
                "forces_replacement": row.forces_replacement,
            }
            for row in diff.rows
        ],
        "attributes_more": diff.more,
    }


def _change_body(change: ResourceChange) -> dict[str, Any]:
    return {
        "address": change.address,
        "action": change.action.value,
        "type": change.type,
        "provider": change.provider,
        "reason": change.reason,
        "deposed": change.deposed,
        **_diff_body(change.diff),
    }
