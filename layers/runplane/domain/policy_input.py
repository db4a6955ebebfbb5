"""Input shapes: the documents a policy set can be evaluated against.

Pure: standard library only. A policy set declares its ``input_shape`` (default
``runplane``). Every shape is built from the engine's ``show -json`` plan with the same
sanitization rules: a value the engine marks sensitive is ``"(sensitive)"``, a value
whose sensitivity structure is missing, malformed or shaped differently is hidden
whole, and nothing but resource changes, output changes, a sanitized subset of the
configuration and the run's metadata is copied.

- ``runplane``: ``sanitize_plan``'s document, unchanged (markers for unknown values).
- ``plan`` (HCP Terraform OPA): ``input.plan``, ``input.run``, ``input.configuration``.
- ``tfplan`` (Scalr): ``input.tfplan``, ``input.tfrun``.
- ``terraform`` (Spacelift): ``input.terraform``, ``input.spacelift``.
- ``bare`` (conftest, ``opa eval``): the plan document itself.

The plan-shaped documents keep Terraform's ``change.{actions, before, after,
after_unknown, before_sensitive, after_sensitive}``: values unknown until apply are
left out of ``after`` and marked ``true`` in ``after_unknown``, as the engine does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from runplane.domain.errors import InvalidPolicySet, PolicyInputRootRefused
from runplane.domain.policy_capabilities import _tokens
from runplane.domain.policy_plan import known_fields, sanitized_plan_document

if TYPE_CHECKING:
    from runplane.domain.policy import PolicySetContent

DEFAULT_SHAPE: Final = "runplane"

SHAPE_ROOTS: Final[Mapping[str, frozenset[str]]] = {
    "runplane": frozenset({"format", "run", "resource_changes", "output_changes", "summary"}),
    "plan": frozenset({"plan", "run", "configuration"}),
    "tfplan": frozenset({"tfplan", "tfrun"}),
    "terraform": frozenset({"terraform", "spacelift"}),
    "bare": frozenset(
        {"format_version", "terraform_version", "resource_changes", "output_changes"}
        | {"configuration"}
    ),
}
"""The top-level ``input`` keys each shape provides."""

SHAPES: Final = tuple(SHAPE_ROOTS)

REFUSE, WARN = "refuse", "warn"
UNKNOWN_ROOT_MODES: Final = (REFUSE, WARN)
"""What publication does when a module reads a root its shape does not provide."""


# -- policy-set options -------------------------------------------------------------------------


def shape_options(doc: Mapping[str, Any]) -> dict[str, str]:
    """``input_shape`` and ``unknown_input_roots`` read from a set's document, checked."""
    options: dict[str, str] = {}
    shape = doc.get("input_shape", DEFAULT_SHAPE)
    if not isinstance(shape, str) or shape not in SHAPE_ROOTS:
        raise InvalidPolicySet(
            f"input_shape {shape!r} is not one of {', '.join(SHAPES)} (default {DEFAULT_SHAPE})"
        )
    options["input_shape"] = shape
    mode = doc.get("unknown_input_roots", REFUSE)
    if not isinstance(mode, str) or mode not in UNKNOWN_ROOT_MODES:
        raise InvalidPolicySet(
            f"unknown_input_roots {mode!r} is not one of {', '.join(UNKNOWN_ROOT_MODES)} "
            f"(default {REFUSE})"
        )
    options["unknown_input_roots"] = mode
    return options


# -- no silent passes: which input roots a module reads -----------------------------------------


@dataclass(frozen=True)
class InputRootFinding:
    module: str
    line: int
    root: str
    shape: str
    """The set's declared shape, which does not provide ``root``."""

    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(s for s in SHAPES if self.root in SHAPE_ROOTS[s])

    @property
    def message(self) -> str:
        providers = self.providers
        where = (
            f"the {' and '.join(providers)} shape{'s' if len(providers) > 1 else ''} "
            f"provide{'' if len(providers) > 1 else 's'} it"
            if providers
            else "no input shape provides it"
        )
        provided = ", ".join(f"input.{root}" for root in sorted(SHAPE_ROOTS[self.shape]))
        return (
            f"{self.module} line {self.line} reads input.{self.root}, which the "
            f"{self.shape} input shape does not provide ({where}; {self.shape} provides "
            f"{provided}): the rule would be undefined on every plan and pass silently"
        )


def input_roots(source: str) -> list[tuple[str, int]]:
    """The ``input`` roots ``source`` reads, as ``(root, line)`` in source order.

    Lexical and conservative: ``input.x``, ``input["x"]`` and ``import input.x``
    count; comments and string contents do not; ``input`` alone (``with input as``,
    ``input[k]`` with a variable) names no root.
    """
    tokens = _tokens(source)
    found: list[tuple[str, int]] = []
    for i, (kind, text, line) in enumerate(tokens):
        if kind != "ident" or text != "input" or (i > 0 and tokens[i - 1][0] == "."):
            continue
        dotted = i + 2 < len(tokens) and [t[0] for t in tokens[i + 1 : i + 3]] == [".", "ident"]
        indexed = i + 3 < len(tokens) and [t[0] for t in tokens[i + 1 : i + 4]] == ["[", "str", "]"]
        root = tokens[i + 2][1] if dotted or indexed else None
        if root is not None and (root, line) not in found:
            found.append((root, line))
    return found


def unknown_input_roots(content: PolicySetContent) -> list[InputRootFinding]:
    """Every read of a root the set's shape does not provide (modules by name)."""
    shape = content.input_shape
    provided = SHAPE_ROOTS[shape]
    return [
        InputRootFinding(module.name, line, root, shape)
        for module in content.modules
        for root, line in input_roots(module.source)
        if root not in provided
    ]


def check_input_roots(content: PolicySetContent) -> list[str]:
    """Refuse (``PolicyInputRootRefused``) or, with ``"unknown_input_roots": "warn"``,
    return warnings for modules reading roots the declared shape does not provide."""
    findings = unknown_input_roots(content)
    if findings and content.unknown_input_roots != WARN:
        first = findings[0]
        raise PolicyInputRootRefused(
            first.message + ' (declare the shape the modules are written for with "input_shape", '
            'or publish with "unknown_input_roots": "warn")',
            module=first.module,
            line=first.line,
            root=first.root,
            providers=first.providers,
        )
    return [finding.message for finding in findings]


# -- the run's metadata ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunMetadata:
    """What the shapes may say about the run; ``None`` is "not known" and left out."""

    workspace: str
    kind: str
    engine_version: str
    run_id: str | None = None
    created_at: str | None = None
    """ISO 8601."""

    @property
    def dry(self) -> bool:
        """A run that will apply nothing whatever the plan (plan-only, speculative)."""
        return self.kind != "plan_and_apply"


def hcp_run(meta: RunMetadata) -> dict[str, Any]:
    """``input.run`` in HCP Terraform's field names, where Runplane has them."""
    return known_fields(
        id=meta.run_id,
        created_at=meta.created_at,
        kind=meta.kind,
        speculative=meta.dry,
        is_destroy=False,  # Runplane has no destroy-mode runs: a destroy is a plan
        workspace={"name": meta.workspace},
    )


def scalr_tfrun(meta: RunMetadata) -> dict[str, Any]:
    """``input.tfrun`` in Scalr's field names, where Runplane has them."""
    return known_fields(
        id=meta.run_id,
        created_at=meta.created_at,
        is_destroy=False,
        is_dry=meta.dry,
        workspace={"name": meta.workspace},
    )


def spacelift_context(meta: RunMetadata) -> dict[str, Any]:
    """``input.spacelift``: the run (``type``, ``state``) and the stack (the workspace)."""
    run = known_fields(
        id=meta.run_id,
        created_at=meta.created_at,
        # A tracked run may apply; a proposed one never does.
        type="PROPOSED" if meta.dry else "TRACKED",
        state="PLANNING",  # plan policies judge the run while it plans
    )
    return {"run": run, "stack": {"name": meta.workspace}}


# -- every shape, from one plan -------------------------------------------------------------------


class PolicyInputs:
    """The documents of every shape for one plan and run, built on demand, each once.

    ``digest(shape)`` is the SHA-256 of the canonical JSON of exactly the document a
    set of that shape sees.
    """

    def __init__(self, plan: Mapping[str, Any], meta: RunMetadata) -> None:
        self._plan = plan
        self._meta = meta
        self._documents: dict[str, dict[str, Any]] = {}
        self._digests: dict[str, str] = {}
        self._canonical: dict[str, bytes] = {}
        self._hidden: list[str] | None = None
        self._plan_document: dict[str, Any] | None = None

    def preset(self, shape: str, document: dict[str, Any]) -> None:
        """Use ``document`` as the ``shape`` document (one the caller already holds)."""
        self._documents[shape] = document
        self._digests.pop(shape, None)
        self._canonical.pop(shape, None)

    def _terraform_shaped(self) -> dict[str, Any]:
        if self._plan_document is None:
            self._plan_document, self._hidden = sanitized_plan_document(self._plan)
        return self._plan_document

    def document(self, shape: str) -> dict[str, Any]:
        cached = self._documents.get(shape)
        if cached is not None:
            return cached
        meta = self._meta
        if shape == "runplane":
            from runplane.domain.policy_sanitize import sanitize_plan

            document = sanitize_plan(
                self._plan,
                workspace=meta.workspace,
                run_kind=meta.kind,
                engine_version=meta.engine_version,
            )
        elif shape == "plan":
            plan = self._terraform_shaped()
            document = {
                "plan": plan,
                "run": hcp_run(meta),
                "configuration": plan["configuration"],
            }
        elif shape == "tfplan":
            document = {"tfplan": self._terraform_shaped(), "tfrun": scalr_tfrun(meta)}
        elif shape == "terraform":
            document = {"terraform": self._terraform_shaped(), "spacelift": spacelift_context(meta)}
        elif shape == "bare":
            document = self._terraform_shaped()
        else:
            raise ValueError(f"unknown input shape {shape!r}")
        self._documents[shape] = document
        return document

    def documents(self, shapes: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {shape: self.document(shape) for shape in dict.fromkeys(shapes)}

    def canonical(self, shape: str) -> bytes:
        """The canonical JSON of the ``shape`` document: what its digest covers, and what
        the evaluator loads (serialized once)."""
        text = self._canonical.get(shape)
        if text is None:
            from runplane.domain.policy_sanitize import canonical_json

            text = self._canonical[shape] = canonical_json(self.document(shape))
        return text

    def digest(self, shape: str) -> str:
        digest = self._digests.get(shape)
        if digest is None:
            digest = self._digests[shape] = (
                "sha256:" + hashlib.sha256(self.canonical(shape)).hexdigest()
            )
        return digest

    @property
    def hidden_whole(self) -> list[str]:
        """Values hidden whole because the plan had no sensitivity map for them."""
        self._terraform_shaped()
        return list(self._hidden or [])
