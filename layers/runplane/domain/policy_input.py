"""Input shapes: the documents a policy set can be evaluated against.

Pure: standard library only. A policy set declares its ``input_shape`` (default
``runplane``). Every shape is built from the engine's ``show -json`` plan with the same
sanitization rules: a value the engine marks sensitive is ``"(sensitive)"``, a value
whose sensitivity structure is missing, malformed or shaped differently is hidden
whole, and configuration constants that may be secret are masked
(``policy_configuration``).

- ``runplane``: ``sanitize_plan``'s document, unchanged (markers for unknown values).
- ``plan`` (HCP Terraform OPA): ``input.plan``, ``input.run``, ``input.configuration``.
- ``tfplan`` (Scalr): ``input.tfplan``, ``input.tfrun``.
- ``terraform`` (Spacelift): ``input.terraform``, ``input.spacelift``.
- ``bare`` (conftest, ``opa eval``): the plan document itself.

The plan-shaped documents keep Terraform's ``show -json`` layout (``policy_plan``):
values unknown until apply are left out of ``after`` and marked ``true`` in
``after_unknown``, as the engine does. Which paths each shape provides is
``policy_paths``' layout, which publication checks modules against.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from runplane.domain.errors import (
    InvalidPolicySet,
    PolicyInputPathRefused,
    PolicyInputRootRefused,
)
from runplane.domain.policy_paths import Arr, Miss, Step, input_reads, resolve, spell
from runplane.domain.policy_plan import sanitized_plan_document
from runplane.domain.policy_run import RunMetadata as RunMetadata  # its first home
from runplane.domain.policy_run import (
    RunOrigin,
    hcp_run,
    scalr_tfrun,
    spacelift_changes,
    spacelift_context,
)

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
        | {"variables", "planned_values", "prior_state", "configuration"}
    ),
}
"""The top-level ``input`` keys each shape provides (``prior_state`` only when the
engine wrote one: a workspace's first plan has none)."""

SHAPES: Final = tuple(SHAPE_ROOTS)

REFUSE, WARN = "refuse", "warn"
UNKNOWN_ROOT_MODES: Final = (REFUSE, WARN)
"""What publication does when a module reads a path its shape does not provide."""

UNKNOWN_PATHS_FIELD: Final = "unknown_input_paths"
"""The setting's name; ``unknown_input_roots``, its first name, is read too."""
LEGACY_PATHS_FIELD: Final = "unknown_input_roots"


# -- policy-set options -------------------------------------------------------------------------


def shape_options(doc: Mapping[str, Any]) -> dict[str, str]:
    """``input_shape`` and the unknown-path mode read from a set's document, checked.

    The mode may be given as ``unknown_input_paths`` or, as before, ``unknown_input_roots``;
    it is kept under the latter, so a set's digest does not depend on the spelling."""
    options: dict[str, str] = {}
    shape = doc.get("input_shape", DEFAULT_SHAPE)
    if not isinstance(shape, str) or shape not in SHAPE_ROOTS:
        raise InvalidPolicySet(
            f"input_shape {shape!r} is not one of {', '.join(SHAPES)} (default {DEFAULT_SHAPE})"
        )
    options["input_shape"] = shape
    given = {key: doc[key] for key in (UNKNOWN_PATHS_FIELD, LEGACY_PATHS_FIELD) if key in doc}
    if len(given) == 2 and len({repr(v) for v in given.values()}) == 2:
        raise InvalidPolicySet(
            f"{UNKNOWN_PATHS_FIELD} and {LEGACY_PATHS_FIELD} name the same setting: give one"
        )
    field, mode = next(iter(given.items()), (UNKNOWN_PATHS_FIELD, REFUSE))
    if not isinstance(mode, str) or mode not in UNKNOWN_ROOT_MODES:
        raise InvalidPolicySet(
            f"{field} {mode!r} is not one of {', '.join(UNKNOWN_ROOT_MODES)} (default {REFUSE})"
        )
    options["unknown_input_roots"] = mode
    return options


def inferred_shape(sources: Iterable[str]) -> str:
    """The shape of a set packaged for another tool without a configuration file
    (conftest, Spacelift, ``opa eval``): Spacelift's when a module reads
    ``input.spacelift`` or ``input.terraform`` (Spacelift plan policies read both);
    Scalr's or HCP Terraform's when modules read ``input.tfplan``/``input.tfrun`` or
    ``input.plan`` (their policies shipped without their configuration file);
    otherwise the plan JSON itself (``bare``), which conftest and ``opa eval -i
    plan.json`` policies read."""
    roots = {root for source in sources for root, _ in input_roots(source)}
    for shape, markers in (
        ("terraform", {"spacelift", "terraform"}),
        ("tfplan", {"tfplan", "tfrun"}),
        ("plan", {"plan"}),
    ):
        if roots & markers:
            return shape
    return "bare"


# -- no silent passes: which input paths a module reads -----------------------------------------


@dataclass(frozen=True)
class InputPathFinding:
    """A read of ``input`` the set's shape never provides."""

    module: str
    line: int
    path: tuple[Step, ...]
    """The steps below ``input`` up to and including the first one the shape lacks."""
    shape: str
    """The set's declared shape, which does not provide ``path``."""
    miss: Miss

    @property
    def root(self) -> str:
        return str(self.path[0])

    @property
    def providers(self) -> tuple[str, ...]:
        """The shapes that provide the path."""
        return tuple(s for s in SHAPES if resolve(s, self.path) is None)

    @property
    def spelled(self) -> str:
        return spell(self.path)

    def _where(self) -> str:
        providers = self.providers
        if not providers:
            return "no input shape provides it"
        many = len(providers) > 1
        return (
            f"the {' and '.join(providers)} shape{'s' if many else ''} "
            f"provide{'' if many else 's'} it"
        )

    @property
    def message(self) -> str:
        if len(self.path) == 1:
            provided = ", ".join(f"input.{root}" for root in sorted(SHAPE_ROOTS[self.shape]))
            detail = f"{self._where()}; {self.shape} provides {provided}"
        else:
            parent = spell(self.path[:-1])
            node = self.miss.parent
            fields = node.fields()
            if self.miss.reason:
                what = f"{self.miss.reason}"
            elif fields:
                what = f"{parent} has {', '.join(fields)}"
            elif isinstance(node, Arr):
                what = f"{parent} is an array: its elements are read with [_]"
            else:
                what = f"{parent} is a single value with nothing below it"
            detail = f"{what}; {self._where()}"
        return (
            f"{self.module} line {self.line} reads {self.spelled}, which the {self.shape} "
            f"input shape does not provide ({detail}): the rule would be undefined on every "
            "plan and pass silently"
        )


def input_roots(source: str) -> list[tuple[str, int]]:
    """The ``input`` roots ``source`` reads, as ``(root, first line)`` in source order.

    Lexical and conservative (see ``policy_paths``): ``input.x``, ``input["x"]``,
    ``import input.x`` and names bound to them count; comments and string contents do
    not; ``input`` alone (``with input as``, ``input[k]`` with a variable) names no root.
    """
    found: dict[str, int] = {}
    for read in input_reads(source):
        root = read.path[0]
        if root is not None:
            found.setdefault(root, read.line)
    return list(found.items())


def unknown_input_paths(content: PolicySetContent) -> list[InputPathFinding]:
    """Every path the set's shape does not provide that a module reads, at the first
    line reading it (modules by name)."""
    shape = content.input_shape
    findings: list[InputPathFinding] = []
    seen: set[tuple[str, tuple[Step, ...]]] = set()
    for module in content.modules:
        for read in input_reads(module.source):
            miss = resolve(shape, read.path)
            if miss is None:
                continue
            path = read.path[: miss.depth + 1]
            if (module.name, path) in seen:
                continue
            seen.add((module.name, path))
            findings.append(InputPathFinding(module.name, read.line, path, shape, miss))
    return findings


def unknown_input_roots(content: PolicySetContent) -> list[InputPathFinding]:
    """``unknown_input_paths``' findings about roots only."""
    return [finding for finding in unknown_input_paths(content) if len(finding.path) == 1]


def check_input_roots(content: PolicySetContent) -> list[str]:
    """Refuse (``PolicyInputRootRefused`` for a root, ``PolicyInputPathRefused`` below
    one) or, with ``"unknown_input_paths": "warn"``, return warnings for modules reading
    paths the declared shape does not provide."""
    findings = unknown_input_paths(content)
    if findings and content.unknown_input_roots != WARN:
        first = findings[0]
        message = first.message + (
            ' (declare the shape the modules are written for with "input_shape" in '
            'policy-set.json, or publish with "unknown_input_paths": "warn")'
        )
        if len(first.path) == 1:
            raise PolicyInputRootRefused(
                message,
                module=first.module,
                line=first.line,
                root=first.root,
                providers=first.providers,
            )
        raise PolicyInputPathRefused(
            message,
            module=first.module,
            line=first.line,
            root=first.root,
            path=first.spelled,
            providers=first.providers,
        )
    return [finding.message for finding in findings]


check_input_paths = check_input_roots


# -- every shape, from one plan -------------------------------------------------------------------


class PolicyInputs:
    """The documents of every shape for one plan and run, built on demand, each once.

    ``digest(shape)`` is the SHA-256 of the canonical JSON of exactly the document a
    set of that shape sees.
    """

    def __init__(
        self, plan: Mapping[str, Any], meta: RunMetadata, governing: tuple[str, ...] = ()
    ) -> None:
        self._plan = plan
        self._meta = meta
        # The workspaces whose attached sets judge the run, when the caller knows more
        # than its own: a pull request's preview's bound workspace (never in a document).
        self.governing = governing
        # Whether the run's organization had no policy set when the request read the
        # run (its tally, read ahead with it): the evaluation then reads no set.
        self.no_policy_sets = False
        self._documents: dict[str, dict[str, Any]] = {}
        self._digests: dict[str, str] = {}
        self._canonical: dict[str, bytes] = {}
        self._hidden: list[str] | None = None
        self._plan_document: dict[str, Any] | None = None
        self._origin: RunOrigin | None = None

    def preset(self, shape: str, document: dict[str, Any]) -> None:
        """Use ``document`` as the ``shape`` document (one the caller already holds)."""
        self._documents[shape] = document
        self._digests.pop(shape, None)
        self._canonical.pop(shape, None)

    def _terraform_shaped(self) -> dict[str, Any]:
        if self._plan_document is None:
            self._plan_document, self._hidden = sanitized_plan_document(self._plan)
        return self._plan_document

    @property
    def origin(self) -> RunOrigin:
        """The run's origin, read once, when a shape first needs it."""
        if self._origin is None:
            self._origin = self._meta.origin()
        return self._origin

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
                options=meta.options,
            )
        elif shape == "plan":
            plan = self._terraform_shaped()
            document = {
                "plan": plan,
                "run": hcp_run(meta, self.origin),
                "configuration": plan["configuration"],
            }
        elif shape == "tfplan":
            document = {
                "tfplan": self._terraform_shaped(),
                "tfrun": scalr_tfrun(meta, self.origin),
            }
        elif shape == "terraform":
            plan = self._terraform_shaped()
            document = {
                "terraform": plan,
                "spacelift": spacelift_context(meta, self.origin, spacelift_changes(plan)),
            }
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
