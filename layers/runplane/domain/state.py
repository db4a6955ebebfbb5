"""What a state version must declare and contain before it is stored (pure rules).

A serial beyond what the engines can count, a lineage with a newline in it, or a
state document that is not version 4 would be stored for ever and make the
workspace unusable (nothing can follow a serial of 10^40), so every such input
is refused up front with a 422 naming the field, and nothing is written.

Also the entities: a state version, the authority a state write is made under, and
an upload URL's token.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from runplane.domain.errors import InvalidInput, StateRejected

# Terraform and OpenTofu keep the serial in a 64-bit integer.
MAX_SERIAL: Final = 2**63 - 1
STATE_FORMAT: Final = 4
MAX_LINEAGE: Final = 64
# Engines write a UUID; letters, digits and '-' keep any UUID-like lineage.
_LINEAGE: Final = re.compile(rf"[0-9A-Za-z][0-9A-Za-z-]{{0,{MAX_LINEAGE - 1}}}")
_MD5: Final = re.compile(r"[0-9a-f]{32}")
_JSON_FORMAT: Final = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}")
_OUTPUT_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,254}")
OUTPUT_ID_PREFIX: Final = "wsout-"
_OUTPUT_ID: Final = re.compile(r"wsout-(?P<body>[a-z2-7]{26})-(?P<name>[A-Za-z_][A-Za-z0-9_-]*)")

ATTRIBUTES: Final = "/data/attributes"


def is_serial(value: object) -> bool:
    """An integer the engines can hold: not a bool, not a float, 0..2^63-1."""
    return type(value) is int and 0 <= value <= MAX_SERIAL


def check_declaration(serial: object, md5: object, lineage: object) -> None:
    """The attributes of a state-version create, before anything is looked up."""
    if not is_serial(serial):
        raise InvalidInput(
            f"serial must be an integer from 0 to {MAX_SERIAL}", f"{ATTRIBUTES}/serial"
        )
    if not isinstance(md5, str) or not _MD5.fullmatch(md5):
        raise InvalidInput("md5 must be 32 lowercase hexadecimal characters", f"{ATTRIBUTES}/md5")
    if not isinstance(lineage, str) or not _LINEAGE.fullmatch(lineage):
        raise InvalidInput(
            f"lineage must be 1-{MAX_LINEAGE} letters, digits or '-' (a UUID, as engines write)",
            f"{ATTRIBUTES}/lineage",
        )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(raw: bytes) -> Any:
    """Strict JSON: NaN and Infinity, which Python would accept, are not JSON."""
    return json.loads(raw, parse_constant=_refuse_constant)


def check_state(raw: bytes, *, serial: int, lineage: str, pointer: str | None) -> dict[str, Any]:
    """A raw state document agrees with its declaration: the document, parsed.

    ``pointer`` names the request field that carried it (inline ``state``); for
    a body that IS the state (the upload URL) the pointer goes into the document.
    """

    def at(field: str) -> str:
        return pointer if pointer is not None else f"/{field}"

    try:
        state = parse_json(raw)
    except (ValueError, RecursionError):
        raise StateRejected("the state is not valid JSON", at("")) from None
    if not isinstance(state, dict):
        raise StateRejected("the state must be a JSON object", at(""))
    version = state.get("version")
    if type(version) is not int or version != STATE_FORMAT:
        raise StateRejected(
            f"the state's version must be {STATE_FORMAT} (got {_shown(version)})", at("version")
        )
    found_serial = state.get("serial")
    if not is_serial(found_serial):
        raise StateRejected(
            f"the state's serial must be an integer from 0 to {MAX_SERIAL}", at("serial")
        )
    if found_serial != serial:
        raise StateRejected(
            f"the state's serial {found_serial} differs from the declared {serial}", at("serial")
        )
    found_lineage = state.get("lineage")
    if not isinstance(found_lineage, str):
        raise StateRejected("the state's lineage must be a string", at("lineage"))
    if found_lineage != lineage:
        raise StateRejected("the state's lineage differs from the declared lineage", at("lineage"))
    return state


def check_json_state(raw: bytes) -> None:
    """The JSON state (``terraform show -json`` format) a newer client uploads beside
    the raw state: an object with a ``format_version`` such as ``"1.0"``."""
    try:
        document = parse_json(raw)
    except (ValueError, RecursionError):
        raise StateRejected("the JSON state is not valid JSON", "/") from None
    if not isinstance(document, dict):
        raise StateRejected("the JSON state must be a JSON object", "/")
    found = document.get("format_version")
    if not isinstance(found, str) or not _JSON_FORMAT.fullmatch(found):
        raise StateRejected(
            'the JSON state needs a format_version such as "1.0" (the format of `show -json`)',
            "/format_version",
        )


def _shown(value: object) -> str:
    text = json.dumps(value) if value is None or isinstance(value, (bool, int, float)) else None
    return text if text is not None and len(text) <= 30 else type(value).__name__


# -- outputs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    name: str
    value: Any
    type: Any
    sensitive: bool


def outputs_of(state: Any) -> list[Output]:
    """The root module outputs of a parsed, checked state, by name."""
    found = state.get("outputs") if isinstance(state, dict) else None
    if not isinstance(found, dict):
        return []
    return [
        Output(name, spec.get("value"), spec.get("type"), spec.get("sensitive") is True)
        for name, spec in sorted(found.items())
        if isinstance(spec, dict) and _OUTPUT_NAME.fullmatch(name)
    ]


def masked(outputs: list[Output]) -> list[Output]:
    """The outputs as a page may show them: a sensitive one's value withheld (None)."""
    return [Output(out.name, None, out.type, True) if out.sensitive else out for out in outputs]


def output_id(state_version_id: str, name: str) -> str:
    """Outputs live inside the encrypted state, so their IDs are derived, not stored."""
    return f"{OUTPUT_ID_PREFIX}{state_version_id.removeprefix('sv-')}-{name}"


def parse_output_id(value: str) -> tuple[str, str] | None:
    """The state version ID and output name an output ID names, or None."""
    match = _OUTPUT_ID.fullmatch(value)
    if match is None:
        return None
    return f"sv-{match['body']}", match["name"]


def simple_type(detailed: Any) -> str:
    """TFE's ``type`` attribute: the JSON kind of the output's detailed type."""
    kind = detailed[0] if isinstance(detailed, list) and detailed else detailed
    return {
        "string": "string",
        "number": "number",
        "bool": "boolean",
        "list": "array",
        "tuple": "array",
        "set": "array",
        "map": "object",
        "object": "object",
    }.get(kind if isinstance(kind, str) else "", "string")


# -- state versions ---------------------------------------------------------------------

# A state version's statuses: uploaded but not yet state, then the workspace's state.
PENDING: Final = "pending"
FINALIZED: Final = "finalized"


@dataclass(frozen=True)
class StateVersion:
    id: str
    workspace_id: str
    organization_id: str
    serial: int
    lineage: str
    md5: str
    status: str
    created_at: datetime
    created_by: str
    predecessor_id: str | None = None
    sha256: str | None = None
    size: int | None = None
    artifact_id: str | None = None
    json_artifact_id: str | None = None
    forced: bool = False
    provenance: dict[str, Any] | None = None
    lock_id: str | None = None
    # When the JSON state of a still-pending version arrived (a claim on its upload).
    claimed_at: datetime | None = None
    # How many resource instances it manages, counted when it was published (None:
    # published before they were counted, or not yet).
    resources: int | None = None


@dataclass(frozen=True)
class Authority:
    """The exact workspace facts a state write was authorized under."""

    workspace_id: str
    holder_ref: str
    lock_id: str
    predecessor_id: str | None
    fence: int | None = None  # required for runner sessions
    run_id: str | None = None


@dataclass(frozen=True)
class UploadToken:
    """A single-use upload URL's token: the version it uploads, until when, and whether
    it was used."""

    sv_id: str
    purpose: str
    valid_until: datetime
    used: bool


@dataclass(frozen=True)
class ApplyGuard:
    """What a state write made with run ``run_id``'s apply authority commits only with:
    the run still ``applying`` and its apply attempt still open, so that a result, a
    cancellation or a loss committed first refuses it (``RunnerAuthorityRefused`` for
    an ended attempt, checked first, then ``RunNotApplying``)."""

    run_id: str
