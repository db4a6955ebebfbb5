"""A runner's report of its phase: the body of ``POST /api/v1/runner/result``.

One contract for both ends. The runner builds one of these and sends ``to_wire()``;
the run API reads the body with ``from_wire``, which is strict: an unknown outcome,
or a missing, mistyped or unknown field, is an ``InvalidInput`` whose pointer names
it (HTTP 422, nothing written). Services take the typed report.

The union is discriminated by ``outcome``: ``planned`` (plan phase), ``applied``
and ``interrupted`` (apply phase), and ``failed`` or ``credentials_required`` (either
phase). Standard
library only: the sandbox image has no SDK.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeAlias, cast

from runplane.domain.capabilities import Phase
from runplane.domain.errors import InvalidInput
from runplane.domain.plan_summary import OUTPUT_ACTIONS, OutputAction, PlanSummary

MAX_REASON: Final = 2000
MAX_ID: Final = 200
MAX_OUTPUTS: Final = 10_000
# A phase uploads three artifacts at most (plan, plan JSON, log): room to spare.
MAX_UPLOADS: Final = 8
MAX_TICKET: Final = 4096
_SHA256: Final = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, kw_only=True)
class Planned:
    """The plan phase ended with a saved plan, uploaded with its JSON and log."""

    OUTCOME: ClassVar[str] = "planned"
    summary: PlanSummary
    plan_artifact_id: str
    plan_sha256: str
    plan_json_artifact_id: str
    plan_json_sha256: str
    log_artifact_id: str
    engine_version: str | None = None
    engine_seconds: float | None = None

    @property
    def has_changes(self) -> bool:
        return self.summary.has_changes

    def to_wire(self) -> dict[str, Any]:
        return _wire(
            self,
            has_changes=self.has_changes,
            summary=self.summary.as_dict(),
            plan_artifact_id=self.plan_artifact_id,
            plan_sha256=self.plan_sha256,
            plan_json_artifact_id=self.plan_json_artifact_id,
            plan_json_sha256=self.plan_json_sha256,
            engine_version=self.engine_version,
            log_artifact_id=self.log_artifact_id,
        )


@dataclass(frozen=True, kw_only=True)
class Applied:
    """The apply phase's engine succeeded (whether it published is checked separately)."""

    OUTCOME: ClassVar[str] = "applied"
    log_artifact_id: str
    engine_seconds: float | None = None

    def to_wire(self) -> dict[str, Any]:
        return _wire(self, log_artifact_id=self.log_artifact_id)


@dataclass(frozen=True, kw_only=True)
class Failed:
    """The phase failed; ``reason`` is safe to show (engine diagnostics, a refusal)."""

    OUTCOME: ClassVar[str] = "failed"
    reason: str
    log_artifact_id: str | None = None
    engine_seconds: float | None = None

    def to_wire(self) -> dict[str, Any]:
        return _wire(self, reason=self.reason, log_artifact_id=self.log_artifact_id)


@dataclass(frozen=True, kw_only=True)
class CredentialsRequired(Failed):
    """The phase failed because a provider found no credentials."""

    OUTCOME: ClassVar[str] = "credentials_required"


@dataclass(frozen=True, kw_only=True)
class Interrupted(Failed):
    """The apply's engine was ended by a signal before it finished: what it changed is
    unknown (the state may be partly applied), so the outcome is uncertain, not failed.
    ``reason`` names the signal."""

    OUTCOME: ClassVar[str] = "interrupted"


RunnerReport: TypeAlias = Planned | Applied | Failed | CredentialsRequired | Interrupted

_VARIANTS: Final[dict[str, type[RunnerReport]]] = {
    variant.OUTCOME: variant
    for variant in (Planned, Applied, Failed, CredentialsRequired, Interrupted)
}
# What each phase may report: a plan session cannot report an apply, nor the reverse
# (a plan changes nothing, so an interrupted plan is simply failed).
_BY_PHASE: Final = {
    Phase.PLAN: frozenset({"planned", "failed", "credentials_required"}),
    Phase.APPLY: frozenset({"applied", "failed", "credentials_required", "interrupted"}),
}


def _wire(report: RunnerReport, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"outcome": report.OUTCOME, **fields}
    if report.engine_seconds is not None:
        body["engine_seconds"] = report.engine_seconds
    return {key: value for key, value in body.items() if value is not None}


@dataclass(frozen=True)
class UploadReport:
    """What a runner says of one upload it asks to register: with its report, or alone."""

    artifact_id: str
    # What begin-upload returned: it stands in for a record begin-upload did not write.
    ticket: str = field(repr=False)
    size: int
    sha256: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "artifact_id": self.artifact_id,
            "ticket": self.ticket,
            "size": self.size,
            "sha256": self.sha256,
        }


def succeeded(report: RunnerReport) -> bool:
    return isinstance(report, Planned | Applied)


def check_phase(report: RunnerReport, phase: Phase) -> None:
    """A report only its session's phase can make; anything else is refused."""
    if report.OUTCOME not in _BY_PHASE[phase]:
        raise InvalidInput(f"a {phase} runner cannot report outcome {report.OUTCOME!r}", "/outcome")


# -- reading the wire ---------------------------------------------------------------------


@dataclass
class _Fields:
    """A JSON object read field by field; every field must be read exactly once."""

    body: Mapping[str, Any]
    at: str = ""
    seen: set[str] = field(default_factory=set)

    def take(self, name: str, required: bool) -> Any:
        self.seen.add(name)
        if name not in self.body or self.body[name] is None:
            if required:
                raise InvalidInput(f"{name} is required", f"{self.at}/{name}")
            return None
        return self.body[name]

    def text(self, name: str, *, limit: int = MAX_ID, required: bool = True) -> str | None:
        value = self.take(name, required)
        if value is None:
            return None
        if not isinstance(value, str) or not 0 < len(value) <= limit:
            raise InvalidInput(
                f"{name} must be a string of 1 to {limit} characters", f"{self.at}/{name}"
            )
        return value

    def required_text(self, name: str, *, limit: int = MAX_ID) -> str:
        return cast(str, self.text(name, limit=limit))

    def sha256(self, name: str) -> str:
        value = self.take(name, True)
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            raise InvalidInput(
                f"{name} must be 64 lowercase hexadecimal characters", f"{self.at}/{name}"
            )
        return value

    def count(self, name: str, *, required: bool = True) -> int | None:
        value = self.take(name, required)
        if value is None:
            return None
        if type(value) is not int or value < 0:
            raise InvalidInput(f"{name} must be a whole number, 0 or more", f"{self.at}/{name}")
        return value

    def flag(self, name: str) -> bool:
        value = self.take(name, True)
        if type(value) is not bool:
            raise InvalidInput(f"{name} must be true or false", f"{self.at}/{name}")
        return value

    def seconds(self, name: str) -> float | None:
        value = self.take(name, False)
        if value is None:
            return None
        number_ok = type(value) in (int, float) and math.isfinite(value) and value >= 0
        if not number_ok:
            raise InvalidInput(
                f"{name} must be a number of seconds, 0 or more", f"{self.at}/{name}"
            )
        return float(value)

    def object(self, name: str) -> _Fields:
        value = self.take(name, True)
        if not isinstance(value, Mapping):
            raise InvalidInput(f"{name} must be an object", f"{self.at}/{name}")
        return _Fields(value, f"{self.at}/{name}")

    def done(self) -> None:
        """Refuse a field the contract does not have (a typo is not silently dropped)."""
        for name in self.body:
            if name not in self.seen:
                raise InvalidInput(f"unknown field {_quoted(name)}", f"{self.at}/{_escaped(name)}")


def _quoted(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 80 else text[:76] + "...'"


def _escaped(name: object) -> str:
    """A JSON pointer token (RFC 6901), shortened like any echoed name."""
    return str(name)[:80].replace("~", "~0").replace("/", "~1")


def _output_changes(fields: _Fields) -> dict[str, OutputAction]:
    raw = fields.object("output_changes")
    if len(raw.body) > MAX_OUTPUTS:
        raise InvalidInput(f"at most {MAX_OUTPUTS} output changes", raw.at)
    changes: dict[str, OutputAction] = {}
    for name, action in raw.body.items():
        if action not in OUTPUT_ACTIONS:
            raise InvalidInput(
                f"an output's action must be one of {', '.join(sorted(OUTPUT_ACTIONS))}",
                f"{raw.at}/{_escaped(name)}",
            )
        changes[str(name)] = cast(OutputAction, action)
    return changes


def _summary(fields: _Fields) -> PlanSummary:
    raw = fields.object("summary")
    summary = PlanSummary(
        adds=cast(int, raw.count("adds")),
        changes=cast(int, raw.count("changes")),
        destroys=cast(int, raw.count("destroys")),
        replaces=cast(int, raw.count("replaces")),
        output_changes=_output_changes(raw),
        has_changes=raw.flag("has_changes"),
        drifted=raw.count("drifted", required=False),
    )
    raw.done()
    return summary


def from_wire(body: object) -> RunnerReport:
    """The report a runner sent, or ``InvalidInput`` naming what is wrong with it."""
    if not isinstance(body, Mapping):
        raise InvalidInput("a runner report must be a JSON object", "/")
    fields = _Fields(body)
    outcome = fields.take("outcome", True)
    variant = _VARIANTS.get(outcome) if isinstance(outcome, str) else None
    if variant is None:
        raise InvalidInput(f"outcome must be one of {', '.join(sorted(_VARIANTS))}", "/outcome")
    seconds = fields.seconds("engine_seconds")
    report: RunnerReport
    if variant is Planned:
        summary = _summary(fields)
        if fields.flag("has_changes") != summary.has_changes:
            raise InvalidInput("has_changes must agree with summary.has_changes", "/has_changes")
        report = Planned(
            summary=summary,
            plan_artifact_id=fields.required_text("plan_artifact_id"),
            plan_sha256=fields.sha256("plan_sha256"),
            plan_json_artifact_id=fields.required_text("plan_json_artifact_id"),
            plan_json_sha256=fields.sha256("plan_json_sha256"),
            log_artifact_id=fields.required_text("log_artifact_id"),
            engine_version=fields.text("engine_version", required=False),
            engine_seconds=seconds,
        )
    elif variant is Applied:
        report = Applied(
            log_artifact_id=fields.required_text("log_artifact_id"), engine_seconds=seconds
        )
    else:
        assert issubclass(variant, Failed)  # the rest of the union: a failure of one kind
        report = variant(
            reason=fields.required_text("reason", limit=MAX_REASON),
            log_artifact_id=fields.text("log_artifact_id", required=False),
            engine_seconds=seconds,
        )
    fields.done()
    return report


def read_result(body: object) -> tuple[RunnerReport, tuple[UploadReport, ...]]:
    """A result call's report, and the phase's uploads it asks registered first
    (``uploads``, optional): each as strictly read as the report."""
    if not isinstance(body, Mapping):
        raise InvalidInput("a runner report must be a JSON object", "/")
    report = {name: value for name, value in body.items() if name != "uploads"}
    raw = body.get("uploads")
    if raw is None:
        return from_wire(report), ()
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_UPLOADS:
        raise InvalidInput(f"uploads must be a list of 1 to {MAX_UPLOADS} uploads", "/uploads")
    uploads = tuple(_upload(each, f"/uploads/{index}") for index, each in enumerate(raw))
    if len({upload.artifact_id for upload in uploads}) < len(uploads):
        raise InvalidInput("each upload may be registered once per call", "/uploads")
    return from_wire(report), uploads


def _upload(raw: object, at: str) -> UploadReport:
    if not isinstance(raw, Mapping):
        raise InvalidInput("an upload must be an object", at)
    fields = _Fields(raw, at)
    upload = UploadReport(
        artifact_id=fields.required_text("artifact_id"),
        ticket=fields.required_text("ticket", limit=MAX_TICKET),
        size=cast(int, fields.count("size")),
        sha256=fields.sha256("sha256"),
    )
    fields.done()
    return upload


# -- the documented form ------------------------------------------------------------------


def wire_schema() -> dict[str, Any]:
    """The JSON schema of the wire form, for the OpenAPI document only: ``from_wire``
    stays the one validator, and a test holds the two to the same fields. A null is
    read as absent, so an optional field may be null and a required one may not."""

    text, sha256, count = _text_schema, _sha256_schema(), _count_schema()

    def optional(schema: dict[str, Any]) -> dict[str, Any]:
        return {**schema, "type": [schema["type"], "null"]}

    seconds = optional({"type": "number", "minimum": 0})
    summary = _closed(
        required={
            "adds": count,
            "changes": count,
            "destroys": count,
            "replaces": count,
            "output_changes": {
                "type": "object",
                "maxProperties": MAX_OUTPUTS,
                "additionalProperties": {"enum": sorted(OUTPUT_ACTIONS)},
            },
            "has_changes": {"type": "boolean"},
        },
        optional={"drifted": optional(count)},
    )
    failure = {
        "required": {"reason": text(MAX_REASON)},
        "optional": {"log_artifact_id": optional(text()), "engine_seconds": seconds},
    }
    fields: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
        Planned.OUTCOME: {
            "required": {
                "summary": summary,
                "has_changes": {"type": "boolean"},
                "plan_artifact_id": text(),
                "plan_sha256": sha256,
                "plan_json_artifact_id": text(),
                "plan_json_sha256": sha256,
                "log_artifact_id": text(),
            },
            "optional": {"engine_version": optional(text()), "engine_seconds": seconds},
        },
        Applied.OUTCOME: {
            "required": {"log_artifact_id": text()},
            "optional": {"engine_seconds": seconds},
        },
        Failed.OUTCOME: failure,
        CredentialsRequired.OUTCOME: failure,
        Interrupted.OUTCOME: failure,
    }
    return {
        "oneOf": [
            {
                "title": f"{outcome} report",
                **_closed(
                    required={"outcome": {"const": outcome}, **variant["required"]},
                    optional=variant["optional"],
                ),
            }
            for outcome, variant in fields.items()
        ],
        "discriminator": {"propertyName": "outcome"},
    }


def result_schema() -> dict[str, Any]:
    """``wire_schema`` with the optional ``uploads`` a result call may carry."""
    upload = _closed(
        required={
            "artifact_id": _text_schema(),
            "ticket": _text_schema(MAX_TICKET),
            "size": _count_schema(),
            "sha256": _sha256_schema(),
        },
        optional={},
    )
    uploads = {
        "type": ["array", "null"],
        "minItems": 1,
        "maxItems": MAX_UPLOADS,
        "items": upload,
        "description": "The phase's uploads, registered before the report is taken",
    }
    schema = wire_schema()
    for variant in schema["oneOf"]:
        variant["properties"]["uploads"] = uploads
    return schema


def _text_schema(limit: int = MAX_ID) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": limit}


def _sha256_schema() -> dict[str, Any]:
    return {"type": "string", "pattern": f"^{_SHA256.pattern}$"}


def _count_schema() -> dict[str, Any]:
    return {"type": "integer", "minimum": 0}


def _closed(
    required: dict[str, dict[str, Any]], optional: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **optional},
        "additionalProperties": False,
    }
