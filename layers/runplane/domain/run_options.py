"""Plan options: destroy, refresh-only, resource targeting and forced replacement.

A run's options are part of its inputs, pinned when it is created and shown in its
review: the plan carries them out (``plan -destroy``, ``-refresh-only``, ``-target``,
``-replace``), policy reads them, the approval binds the plan they produced, and the
runner checks that the engine's saved plan is in the mode and has the targets and
replacements asked for before anyone sees it.

Addresses are checked for syntax here, in the canonical form the engine writes into
its saved plan (no spaces, string keys in double quotes), so the runner can compare
them exactly; the engine checks that they name something.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from runplane.domain.errors import InvalidInput
from runplane.domain.run import RunKind

MAX_ADDRESSES: Final = 100
"""Per list: a targeted run names a few resources; more is a full run's job."""
MAX_ADDRESS_CHARS: Final = 512

_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
# A string key holds no template sequence (``${``, ``%{``): the engine records one
# unescaped in its saved plan and then cannot read the plan back.
_KEY = r'\[(?:[0-9]+|"(?:[^"\\\x00-\x1f$%]|\\["\\nrt]|[$%](?!\{))*")\]'
_MODULES = rf"(?:module\.{_NAME}(?:{_KEY})?\.)*"
# No resource type is named ``data`` or ``module``: those are the addresses' keywords.
_TYPED = rf"(?!data\.|module\.){_NAME}\.{_NAME}(?:{_KEY})?"
_RESOURCE = rf"(?:data\.)?{_TYPED}"
# A target is a module (with or without an instance key) or a resource in one.
_TARGET: Final = re.compile(rf"{_MODULES}(?:module\.{_NAME}(?:{_KEY})?|{_RESOURCE})")
# A replacement is one managed resource instance: never a module, never a data source.
_REPLACEMENT: Final = re.compile(rf"{_MODULES}{_TYPED}")


class PlanMode(StrEnum):
    """The engine's plan mode, as its saved plan records it."""

    NORMAL = "normal"
    DESTROY = "destroy"
    REFRESH_ONLY = "refresh-only"


@dataclass(frozen=True)
class RunOptions:
    """What a run asks of its plan beyond the configuration and the variables."""

    destroy: bool = False
    refresh_only: bool = False
    targets: tuple[str, ...] = ()
    replacements: tuple[str, ...] = ()

    @property
    def mode(self) -> PlanMode:
        if self.destroy:
            return PlanMode.DESTROY
        if self.refresh_only:
            return PlanMode.REFRESH_ONLY
        return PlanMode.NORMAL

    @property
    def default(self) -> bool:
        return self == RunOptions()

    def for_kind(self, kind: RunKind) -> RunOptions:
        """These options for a run of ``kind``: a refresh-only run's plan only refreshes
        (it may target), so it neither destroys nor replaces."""
        if kind is not RunKind.REFRESH_ONLY:
            return self
        if self.destroy or self.replacements:
            raise InvalidInput(
                "a refresh_only run only refreshes: it cannot destroy or replace",
                "/destroy" if self.destroy else "/replacements",
            )
        return RunOptions(refresh_only=True, targets=self.targets)

    def engine_flags(self) -> list[str]:
        """The plan command's flags for these options (addresses as checked, so none
        can be read as another flag)."""
        flags = {PlanMode.DESTROY: ["-destroy"], PlanMode.REFRESH_ONLY: ["-refresh-only"]}
        return [
            *flags.get(self.mode, []),
            *(f"-target={address}" for address in self.targets),
            *(f"-replace={address}" for address in self.replacements),
        ]

    def to_body(self) -> dict[str, Any]:
        """As stored in the run's inputs, shown in its review and sent to the runner."""
        return {
            "destroy": self.destroy,
            "refresh_only": self.refresh_only,
            "targets": list(self.targets),
            "replacements": list(self.replacements),
        }

    @classmethod
    def from_body(cls, body: object) -> RunOptions:
        """The options stored with a run (none for a run created before runs had them).
        Stored options were checked when the run was created; they are checked again."""
        if not isinstance(body, Mapping):
            return cls()
        return check_run_options(
            destroy=body.get("destroy") is True,
            refresh_only=body.get("refresh_only") is True,
            targets=_strings(body.get("targets")),
            replacements=_strings(body.get("replacements")),
        )


NO_OPTIONS: Final = RunOptions()
"""A plain run's: a normal plan of everything."""


def check_run_options(
    *,
    destroy: bool = False,
    refresh_only: bool = False,
    targets: Sequence[str] = (),
    replacements: Sequence[str] = (),
    pointer: str = "",
    names: Mapping[str, str] | None = None,
) -> RunOptions:
    """The options asked for, checked, or ``InvalidInput`` naming the field at fault.

    ``pointer`` prefixes each field's JSON pointer and ``names`` renames the fields
    (the Cloud API's ``is-destroy``, ``target-addrs``…), so each caller's error points
    into its own request."""
    name = {
        "destroy": "destroy",
        "refresh_only": "refresh_only",
        "targets": "targets",
        "replacements": "replacements",
        **(names or {}),
    }

    def at(field: str) -> str:
        return f"{pointer}/{name[field]}"

    if destroy and refresh_only:
        raise InvalidInput(
            "a run either destroys or only refreshes, not both: choose one",
            at("refresh_only"),
        )
    if replacements and (destroy or refresh_only):
        raise InvalidInput(
            "forced replacement plans changes: it cannot be combined with destroy or refresh-only",
            at("replacements"),
        )
    checked_targets = _addresses(targets, _TARGET, "target", at("targets"))
    checked_replacements = _addresses(replacements, _REPLACEMENT, "replacement", at("replacements"))
    return RunOptions(destroy, refresh_only, checked_targets, checked_replacements)


def _addresses(
    addresses: Sequence[str], grammar: re.Pattern[str], what: str, pointer: str
) -> tuple[str, ...]:
    if isinstance(addresses, str):
        raise InvalidInput(f"the {what} addresses are a list of strings", pointer)
    if len(addresses) > MAX_ADDRESSES:
        raise InvalidInput(
            f"a run names at most {MAX_ADDRESSES} {what} addresses ({len(addresses)} given)",
            pointer,
        )
    seen: list[str] = []
    for index, address in enumerate(addresses):
        where = f"{pointer}/{index}"
        if not isinstance(address, str) or not address:
            raise InvalidInput(f"a {what} address is a non-empty string", where)
        if len(address) > MAX_ADDRESS_CHARS:
            raise InvalidInput(
                f"a {what} address has at most {MAX_ADDRESS_CHARS} characters", where
            )
        if not grammar.fullmatch(address):
            raise InvalidInput(
                f"{_shown(address)} is not a valid address: {_expected(what)}", where
            )
        if address not in seen:
            seen.append(address)
    return tuple(seen)


def _shown(address: str) -> str:
    # Echoed only when it is short and printable: an error never carries a control
    # character or a wall of text.
    return repr(address) if address.isprintable() and len(address) <= 80 else "the address"


def _expected(what: str) -> str:
    if what == "replacement":
        return (
            "a replacement names one managed resource instance, like aws_instance.web, "
            'aws_instance.web[0] or module.app["blue"].aws_instance.web'
        )
    return (
        "a target names a resource or a module, like aws_instance.web, "
        'module.app, module.app["blue"].aws_instance.web[0] or data.aws_ami.base'
    )


def _strings(value: object) -> tuple[str, ...]:
    # Fails closed: a stored list that is not one of strings is refused, never read as
    # "no targets" (which would turn a targeted run into a full one).
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(i, str) for i in value):
        raise InvalidInput("the run's stored options are malformed: addresses are strings")
    return tuple(value)
