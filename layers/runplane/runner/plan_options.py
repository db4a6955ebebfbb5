"""The run's plan options on the runner's side: what it asks the engine for, and the
check that the engine's saved plan carries them out.

The options (``runplane.domain.run_options``) come with the phase's manifest under
``"options"`` (none: the defaults); a ``refresh_only`` run is a refresh-only plan
whatever they say. The runner checks them again before any of them reaches the
engine's command line.

The engine is on the untrusted side of the sandbox: it writes whatever saved plan it
likes, and the apply carries out the file, in the mode and with the targets and
forced replacements the file records. So once the plan JSON is found to describe the
file (``plan_file.check_plan_json``), the file's mode (``ui_mode``), its targets
(``target_addrs``) and its forced replacements (``force_replace_addrs``) must be
exactly what the run asked for, compared as sets in the spelling that engine records
(``plan_file.recorded_address``); anything else refuses the phase, naming what
differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runplane.domain.errors import InvalidInput
from runplane.domain.run_options import RunOptions, check_run_options
from runplane.runner.plan_file import (
    PlanFileError,
    PlanMismatch,
    SavedPlan,
    check_plan_json,
    recorded_address,
)
from runplane.runner.refusal import Refused, shown


def run_options(manifest: Mapping[str, Any]) -> RunOptions:
    """The plan options of the phase's run, checked (``Refused`` if they cannot be used)."""
    try:
        options = RunOptions.from_body(manifest.get("options"))
        if manifest.get("kind") == "refresh_only" and not options.refresh_only:
            options = check_run_options(
                destroy=options.destroy,
                refresh_only=True,
                targets=options.targets,
                replacements=options.replacements,
            )
    except InvalidInput as error:
        raise Refused(f"the run's plan options cannot be used: {error.message}") from None
    return options


def checked_plan(plan: bytes, document: Mapping[str, Any], options: RunOptions) -> SavedPlan:
    """The saved plan in ``plan``, once its JSON (``document``) is found to describe it
    and it is found to carry out ``options``; ``Refused`` naming the first difference."""
    try:
        # The JSON, printed by the engine, is what policy and review read: it must
        # describe the plan the apply will carry out.
        saved = check_plan_json(plan, document)
    except (PlanMismatch, PlanFileError) as error:
        raise Refused(f"the engine's plan JSON does not describe its saved plan: {error}") from None
    check_plan_options(saved, options)
    return saved


def check_plan_options(saved: SavedPlan, options: RunOptions) -> None:
    """``Refused`` unless ``saved`` is in the mode ``options`` ask for, with exactly their
    targets and forced replacements."""
    if saved.ui_mode != options.mode.value:
        raise Refused(
            f"the engine's saved plan is a {saved.ui_mode} plan; "
            f"this run asked for a {options.mode.value} plan"
        )
    version = saved.terraform_version
    _same_addresses(
        saved.target_addrs,
        options.targets,
        version,
        ("targets", "does not target"),
    )
    _same_addresses(
        saved.force_replace_addrs,
        options.replacements,
        version,
        ("forces the replacement of", "does not force the replacement of"),
    )


def _same_addresses(
    recorded: Iterable[str], asked: Iterable[str], version: str, verbs: tuple[str, str]
) -> None:
    expected = {recorded_address(address, version) for address in asked}
    found = set(recorded)
    extra, missing = sorted(found - expected), sorted(expected - found)
    if extra:
        raise Refused(
            f"the engine's saved plan {verbs[0]} {shown(extra[0])}, which this run did not "
            f"ask for{_more(len(extra))}"
        )
    if missing:
        raise Refused(
            f"the engine's saved plan {verbs[1]} {shown(missing[0])}, which this run asked "
            f"for{_more(len(missing))}"
        )


def _more(count: int) -> str:
    return f" (and {count - 1} more)" if count > 1 else ""
