"""No silent passes, at path level: which ``input`` paths a module reads, and whether its
set's input shape provides them.

Pure: standard library only. A rule reading a path its shape never provides is undefined
on every plan, which reads as *passed*. Each shape's document has a fixed layout
(``SCHEMAS``): fixed fields, arrays, maps with arbitrary keys (output names, module
calls), and open values (``before``/``after``, ``values``, expression constants) below
which anything may be read. The scan is lexical and conservative: it reports a path
only when it is sure the path is read and sure the shape lacks it.

What it reads (``input_reads``):

- ``input.a.b``, ``input["a"]["b"]``, ``input.a[_].b``, ``input.a[i].b``, ``input.a[0]``
  (a bracket holding anything but one string is "any element or key");
- ``import input.a.b`` and ``import input.a.b as x`` (then ``x.c``);
- names bound to a path: ``x := input.a[_]``, ``x = input.a[_]``, ``some x in input.a``,
  ``some k, x in input.a``, ``every x in input.a``, chained (``y := x.b``), in the rule
  where they are bound (a comprehension's head may use a name its body binds); and rules
  that are a path (``rcs := input.a`` at the top of a module), in the whole module.

Its limits: a name bound to anything else anywhere in the same rule (a function
parameter, ``some x`` without ``in``, a second binding to another value) is not
followed; values passed to functions, keys built at run time (``input[k]``,
``object.get(input, "a", x)``), ``walk`` and rules defined as sets of input values are
not followed either. Paths under ``with ... as`` are mocks, not reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from runplane.domain.policy_capabilities import _string_value
from runplane.domain.rego_v0 import Tok, tokens

ANY: Final = None
"""A step that names no key: ``[_]``, ``[i]``, ``[0]``."""

Step = str | None


# -- the layout of each shape ---------------------------------------------------------------


class Node:
    """What a path may read below a point of a document."""

    def child(self, step: Step) -> Node | None:
        """The node one step below, or None if the document never has it."""
        raise NotImplementedError

    def fields(self) -> tuple[str, ...]:
        """The named fields below, for messages (empty when they are arbitrary)."""
        return ()


class _Open(Node):
    """A value of the plan or configuration: anything may be below."""

    def child(self, step: Step) -> Node | None:
        return self


class _Leaf(Node):
    """A string, number or boolean: nothing is below."""

    def child(self, step: Step) -> Node | None:
        return None


OPEN: Final = _Open()
LEAF: Final = _Leaf()


@dataclass(eq=False)
class Obj(Node):
    """An object with fixed fields."""

    members: dict[str, Node] = field(default_factory=dict)
    absent: Mapping[str, str] = field(default_factory=dict)
    """Fields the tool's document has and this one does not, with why."""

    def child(self, step: Step) -> Node | None:
        if step is ANY:
            return _Union(tuple(self.members.values()))
        return self.members.get(step)

    def fields(self) -> tuple[str, ...]:
        return tuple(sorted(self.members))


@dataclass(eq=False)
class Arr(Node):
    """An array: an index or ``[_]`` reads an item."""

    item: Node

    def child(self, step: Step) -> Node | None:
        if step is ANY or step.lstrip("-").isdigit():
            return self.item
        return None


@dataclass(eq=False)
class Keyed(Node):
    """An object whose keys are names from the plan (outputs, module calls, providers)."""

    value: Node

    def child(self, step: Step) -> Node | None:
        return self.value


@dataclass(eq=False)
class _Union(Node):
    """Any of several nodes (the fields of an object read with ``[_]``)."""

    options: tuple[Node, ...]

    def child(self, step: Step) -> Node | None:
        found = [n for n in (o.child(step) for o in self.options) if n is not None]
        if not found:
            return None
        return found[0] if len(found) == 1 else _Union(tuple(found))


def _obj(**members: Node) -> Obj:
    return Obj(dict(members))


def _change() -> Obj:
    return _obj(
        actions=Arr(LEAF),
        before=OPEN,
        after=OPEN,
        after_unknown=OPEN,
        before_sensitive=OPEN,
        after_sensitive=OPEN,
        replace_paths=Arr(Arr(LEAF)),
    )


def _resource_change() -> Obj:
    return _obj(
        address=LEAF,
        previous_address=LEAF,
        module_address=LEAF,
        mode=LEAF,
        type=LEAF,
        name=LEAF,
        index=LEAF,
        deposed=LEAF,
        provider_name=LEAF,
        action_reason=LEAF,
        change=_change(),
    )


def _state_module() -> Obj:
    module = _obj(address=LEAF)
    module.members["resources"] = Arr(
        _obj(
            address=LEAF,
            mode=LEAF,
            type=LEAF,
            name=LEAF,
            index=LEAF,
            provider_name=LEAF,
            schema_version=LEAF,
            values=OPEN,
            sensitive_values=OPEN,
            tainted=LEAF,
            deposed_key=LEAF,
            depends_on=Arr(LEAF),
        )
    )
    module.members["child_modules"] = Arr(module)
    return module


def _outputs() -> Keyed:
    return Keyed(_obj(sensitive=LEAF, value=OPEN))


def _expression() -> Obj:
    return _obj(constant_value=OPEN, references=Arr(LEAF))


def _configuration() -> Obj:
    expression = _expression()
    module = _obj(
        outputs=Keyed(
            _obj(sensitive=LEAF, expression=expression, description=LEAF, depends_on=Arr(LEAF))
        ),
        resources=Arr(
            _obj(
                address=LEAF,
                mode=LEAF,
                type=LEAF,
                name=LEAF,
                provider_config_key=LEAF,
                provisioners=Arr(_obj(type=LEAF, expressions=Keyed(OPEN))),
                expressions=Keyed(OPEN),
                schema_version=LEAF,
                count_expression=expression,
                for_each_expression=expression,
                depends_on=Arr(LEAF),
            )
        ),
        variables=Keyed(_obj(default=OPEN, description=LEAF, sensitive=LEAF)),
    )
    module.members["module_calls"] = Keyed(
        _obj(
            source=LEAF,
            version_constraint=LEAF,
            expressions=Keyed(OPEN),
            count_expression=expression,
            for_each_expression=expression,
            depends_on=Arr(LEAF),
            module=module,
        )
    )
    return _obj(
        provider_config=Keyed(
            _obj(
                name=LEAF,
                full_name=LEAF,
                alias=LEAF,
                version_constraint=LEAF,
                module_address=LEAF,
                expressions=Keyed(OPEN),
            )
        ),
        root_module=module,
    )


_PLAN_ABSENT: Final = {
    "resource_drift": "the engine (Terraform 1.0) does not write it",
    "relevant_attributes": "the engine (Terraform 1.0) does not write it",
    "checks": "the engine (Terraform 1.0) does not write it",
    "timestamp": "the engine (Terraform 1.0) does not write it",
}


def _plan_document() -> Obj:
    state_module = _state_module()
    return Obj(
        {
            "format_version": LEAF,
            "terraform_version": LEAF,
            "resource_changes": Arr(_resource_change()),
            "output_changes": Keyed(_change()),
            "variables": Keyed(_obj(value=OPEN)),
            "planned_values": _obj(outputs=_outputs(), root_module=state_module),
            "prior_state": _obj(
                format_version=LEAF,
                terraform_version=LEAF,
                values=_obj(outputs=_outputs(), root_module=state_module),
            ),
            "configuration": _configuration(),
        },
        _PLAN_ABSENT,
    )


def _runplane_document() -> Obj:
    return _obj(
        format=LEAF,
        run=_obj(workspace=LEAF, kind=LEAF, engine_version=LEAF),
        resource_changes=Arr(
            _obj(
                address=LEAF,
                module_address=LEAF,
                mode=LEAF,
                type=LEAF,
                name=LEAF,
                index=LEAF,
                provider_name=LEAF,
                deposed=LEAF,
                action_reason=LEAF,
                actions=Arr(LEAF),
                before=OPEN,
                after=OPEN,
            )
        ),
        output_changes=Arr(
            _obj(name=LEAF, actions=Arr(LEAF), sensitive=LEAF, before=OPEN, after=OPEN)
        ),
        summary=_obj(add=LEAF, change=LEAF, destroy=LEAF, replace=LEAF),
    )


_RUN_ABSENT: Final = "Runplane does not have it"


def _schemas() -> dict[str, Obj]:
    plan = _plan_document()
    hcp_run = Obj(
        {
            "id": LEAF,
            "created_at": LEAF,
            "kind": LEAF,
            "message": LEAF,
            "commit_sha": LEAF,
            "speculative": LEAF,
            "is_destroy": LEAF,
            "workspace": _obj(id=LEAF, name=LEAF, tags=Arr(LEAF)),
        },
        {k: _RUN_ABSENT for k in ("created_by", "organization", "project")},
    )
    commit = _obj(author=LEAF, branch=LEAF, hash=LEAF, message=LEAF)
    tfrun = Obj(
        {
            "id": LEAF,
            "created_at": LEAF,
            "message": LEAF,
            "is_destroy": LEAF,
            "is_dry": LEAF,
            "workspace": _obj(id=LEAF, name=LEAF, tags=Keyed(LEAF)),
            "vcs": _obj(
                repository_id=LEAF,
                path=LEAF,
                branch=LEAF,
                commit=_obj(sha=LEAF, message=LEAF, author=_obj(username=LEAF)),
                pull_request=_obj(id=LEAF, title=LEAF, author=LEAF),
            ),
        },
        {k: _RUN_ABSENT for k in ("cost_estimate", "credentials", "created_by", "environment")}
        | {"source": _RUN_ABSENT},
    )
    change = _obj(
        action=LEAF,
        phase=LEAF,
        entity=_obj(
            address=LEAF,
            name=LEAF,
            type=LEAF,
            entity_type=LEAF,
            entity_vendor=LEAF,
            data=_obj(values=OPEN, value=OPEN),
        ),
    )
    spacelift = Obj(
        {
            "commit": commit,
            "run": Obj(
                {
                    "id": LEAF,
                    "created_at": LEAF,
                    "type": LEAF,
                    "state": LEAF,
                    "commit": commit,
                    "changes": Arr(change),
                    "drift_detection": LEAF,
                },
                {k: _RUN_ABSENT for k in ("triggered_by", "flags")},
            ),
            "stack": Obj(
                {
                    "id": LEAF,
                    "name": LEAF,
                    "labels": Arr(LEAF),
                    "repository": LEAF,
                    "branch": LEAF,
                    "project_root": LEAF,
                },
                {"administrative": _RUN_ABSENT},
            ),
        },
        {},
    )
    bare = Obj(dict(plan.members), plan.absent)
    return {
        "runplane": _runplane_document(),
        "plan": _obj(plan=plan, run=hcp_run, configuration=plan.members["configuration"]),
        "tfplan": _obj(tfplan=plan, tfrun=tfrun),
        "terraform": _obj(terraform=plan, spacelift=spacelift),
        "bare": bare,
    }


_SCHEMAS: dict[str, Obj] = {}


def schema(shape: str) -> Obj:
    """The layout of ``shape``'s document (built on first use)."""
    if not _SCHEMAS:
        _SCHEMAS.update(_schemas())
    return _SCHEMAS[shape]


@dataclass(frozen=True)
class Miss:
    """Where a path leaves a shape's layout."""

    depth: int
    """How many steps of the path the shape provides."""
    parent: Node
    reason: str | None
    """Why the tool's field is absent here, when it is one Runplane leaves out."""


def resolve(shape: str, path: Sequence[Step]) -> Miss | None:
    """None if ``shape`` may provide ``path`` (steps below ``input``), else where it stops."""
    node: Node = schema(shape)
    for depth, step in enumerate(path):
        below = node.child(step)
        if below is None:
            reason = node.absent.get(step) if isinstance(node, Obj) and step else None
            return Miss(depth, node, reason)
        node = below
    return None


def spell(path: Sequence[Step]) -> str:
    """``input.a[_].b`` for the steps ``a``, ANY, ``b``."""
    out = "input"
    for step in path:
        if step is ANY:
            out += "[_]"
        elif step.isidentifier():
            out += f".{step}"
        elif step.lstrip("-").isdigit():
            out += f"[{step}]"
        else:
            out += f'["{step}"]'
    return out


# -- what a module reads ---------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    line: int
    path: tuple[Step, ...]
    """Steps below ``input``."""


_TERMINATORS: Final = frozenset({"nl", ";", "}", "]", ")", ",", "if", "{", "|"})
_UNKNOWN: Final = "?"
"""A name bound to something other than an input path."""


def _significant(toks: Sequence[Tok], i: int) -> Tok | None:
    return toks[i] if i < len(toks) else None


def _is(tok: Tok | None, *texts: str) -> bool:
    return tok is not None and tok.kind in ("op", "ident") and tok.text in texts


def _closing(toks: Sequence[Tok], i: int) -> int:
    """The index of the bracket closing the one opened at ``i`` (or the end)."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind != "op":
            continue
        if toks[j].text in "([{":
            depth += 1
        elif toks[j].text in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def _steps(toks: Sequence[Tok], i: int) -> tuple[list[Step], int]:
    """The steps after the name at ``i`` (``.x``, ``["x"]``, ``[...]``), and the index of
    the first token after them."""
    steps: list[Step] = []
    j = i + 1
    while j < len(toks):
        tok = toks[j]
        following = _significant(toks, j + 1)
        if _is(tok, ".") and following is not None and following.kind == "ident":
            steps.append(following.text)
            j += 2
        elif _is(tok, "["):
            end = _closing(toks, j)
            inside = [t for t in toks[j + 1 : end] if t.kind != "nl"]
            if len(inside) == 1 and inside[0].kind == "str":
                steps.append(_string_value(inside[0].text))
            elif len(inside) == 1 and inside[0].kind == "num":
                steps.append(inside[0].text)
            else:
                steps.append(ANY)
            j = end + 1
        else:
            break
    return steps, j


def _ends_here(toks: Sequence[Tok], j: int) -> bool:
    tok = _significant(toks, j)
    return (
        tok is None
        or tok.kind == "nl"
        or (tok.kind in ("op", "ident") and tok.text in _TERMINATORS)
    )


def _rules(toks: Sequence[Tok]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` token ranges of each top-level statement (a rule with its body,
    an import, the package line)."""
    depth, start = 0, None
    for i, tok in enumerate(toks):
        if tok.kind == "nl":
            if depth == 0 and start is not None:
                yield start, i
                start = None
            continue
        if start is None:
            start = i
        if tok.kind == "op" and tok.text in "([{":
            depth += 1
        elif tok.kind == "op" and tok.text in ")]}":
            depth = max(0, depth - 1)
    if start is not None:
        yield start, len(toks)


@dataclass
class _Binding:
    base: str
    steps: list[Step]
    iterate: bool
    """``some x in PATH``: the name is an element of the path."""


def _some_bindings(
    toks: Sequence[Tok], i: int, end: int, bind: Callable[[str, _Binding | str], None]
) -> int:
    """``some x in P`` / ``some k, x in P`` / ``some x`` (a declaration) at ``i``: bind its
    names; the index after the statement's part read."""
    names, j = [], i + 1
    while j < end and toks[j].kind == "ident" and toks[j].text != "in":
        names.append(toks[j].text)
        j += 1
        if _is(_significant(toks, j), ","):
            j += 1
            continue
        break
    if _is(_significant(toks, j), "in") and j + 1 < end and toks[j + 1].kind == "ident":
        steps, after = _steps(toks, j + 1)
        target = names[-1] if names else None
        for name in names[:-1]:
            bind(name, _UNKNOWN)  # the key or index
        if target is not None:
            bind(target, _Binding(toks[j + 1].text, steps, iterate=True))
        return after
    for name in names:
        bind(name, _UNKNOWN)
    return j


def _bindings(toks: Sequence[Tok], start: int, end: int) -> dict[str, list[_Binding | str]]:
    """Every name bound in the statement, to a path from a name (``input`` or another
    name) or to something else (``_UNKNOWN``)."""
    found: dict[str, list[_Binding | str]] = {}

    def bind(name: str, value: _Binding | str) -> None:
        found.setdefault(name, []).append(value)

    i = start
    while i < end:
        tok = toks[i]
        previous = toks[i - 1] if i > start else None
        if tok.kind == "ident" and tok.text in ("some", "every"):
            i = _some_bindings(toks, i, end, bind)
            continue
        following = _significant(toks, i + 1)
        if (
            tok.kind == "ident"
            and not _is(previous, ".")
            and _is(following, ":=", "=")
            and i + 2 < end
        ):
            value = toks[i + 2]
            if value.kind == "ident" and not _is(_significant(toks, i + 3), "("):
                steps, after = _steps(toks, i + 2)
                if _ends_here(toks, after):
                    bind(tok.text, _Binding(value.text, steps, iterate=False))
                    i = after
                    continue
            bind(tok.text, _UNKNOWN)
        elif tok.kind == "ident" and _is(following, "(") and i == start:
            # a function's parameters
            close = _closing(toks, i + 1)
            for param in toks[i + 2 : close]:
                if param.kind == "ident":
                    bind(param.text, _UNKNOWN)
        i += 1
    return found


def _resolve(
    name: str,
    local: Mapping[str, list[_Binding | str]],
    module: Mapping[str, list[Step]],
    seen: frozenset[str] = frozenset(),
) -> list[Step] | None:
    """The path below ``input`` that ``name`` stands for, or None if it is not one path."""
    if name == "input" and name not in local:
        return []
    if name in seen:
        return None
    bound = local.get(name)
    if bound is None:
        return list(module[name]) if name in module else None
    paths = []
    for binding in bound:
        if not isinstance(binding, _Binding):
            return None
        base = _resolve(binding.base, local, module, seen | {name})
        if base is None:
            return None
        paths.append([*base, *binding.steps, *([ANY] if binding.iterate else [])])
    if not paths or any(p != paths[0] for p in paths):
        return None
    return paths[0]


def _imports(toks: Sequence[Tok]) -> dict[str, list[Step]]:
    """Names bound by ``import input.a.b [as x]``."""
    found: dict[str, list[Step]] = {}
    for start, end in _rules(toks):
        if not (_is(toks[start], "import") and start + 1 < end and toks[start + 1].text == "input"):
            continue
        steps, after = _steps(toks, start + 1)
        alias = None
        if _is(_significant(toks, after), "as") and after + 1 < end:
            alias = toks[after + 1].text
        name = alias or (steps[-1] if steps and steps[-1] is not ANY else None)
        if name:
            found[name] = steps
    return found


def input_reads(source: str) -> list[Read]:
    """The ``input`` paths ``source`` reads, in source order (see the module doc)."""
    toks = tokens(source)
    module = _imports(toks)
    statements = list(_rules(toks))
    # Rules that are a path (`rcs := input.resource_changes`), visible module-wide.
    for start, end in statements:
        name, operator = toks[start], _significant(toks, start + 1)
        if (
            name.kind != "ident"
            or name.text in ("package", "import", "default")
            or not _is(operator, ":=", "=")
            or start + 2 >= end
            or toks[start + 2].kind != "ident"
        ):
            continue
        steps, after = _steps(toks, start + 2)
        base = _resolve(toks[start + 2].text, {}, module)
        if base is not None and _ends_here(toks, after):
            module[name.text] = [*base, *steps]
    reads: list[Read] = []
    for start, end in statements:
        if _is(toks[start], "import"):
            if start + 1 < end and toks[start + 1].text == "input":
                steps, _ = _steps(toks, start + 1)
                if steps:
                    reads.append(Read(toks[start + 1].line, tuple(steps)))
            continue
        if _is(toks[start], "package"):
            continue
        local = _bindings(toks, start, end)
        i = start
        while i < end:
            tok = toks[i]
            if tok.kind != "ident" or _is(toks[i - 1] if i else None, ".", "with"):
                i += 1
                continue
            steps, after = _steps(toks, i)
            base = _resolve(tok.text, local, module)
            if base is not None and (steps or tok.text != "input"):
                path = tuple([*base, *steps])
                if path:
                    reads.append(Read(tok.line, path))
            i = max(after, i + 1) if base is not None else i + 1
    return reads
