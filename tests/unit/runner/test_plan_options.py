"""``runplane.runner.plan_options``: the runner plans with the run's options and refuses
a saved plan that does not carry them out.

The plans come from the runner's own engine driver (``runplane.runner.engine``) running
the pinned engine (Terraform 1.0.3, tests/engine.py) with the offline ``runplane/test``
provider (docs/test-provider.md): a configuration is applied, changed, and planned once
per set of options; each check then reads the engine's own saved plan and JSON. A forged
plan is an honest one checked against options it was not made with: exactly what an
engine that ignores its flags would hand the runner.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runplane.domain.run_options import RunOptions
from runplane.runner.bounded_log import BoundedLog
from runplane.runner.engine import Engine, EngineResult
from runplane.runner.engine_errors import EngineCommandFailed
from runplane.runner.plan_file import read_plan, recorded_address
from runplane.runner.plan_options import check_plan_options, checked_plan, run_options
from runplane.runner.refusal import Refused
from tests.engine import engine_env, engine_path
from tests.unit.real_plans import PROVIDER
from tests.unit.real_plans import Engine as RealEngine


def root_module(content: str) -> str:
    return f"""
module "a" {{
  source   = "./a"
  for_each = toset(["x", "y"])
  content  = "{content}"
}}
resource "test_thing" "plain" {{
  name    = "plain"
  content = "{content}"
}}
resource "test_thing" "keyed" {{
  for_each = toset(["a b", "d\\u007fel", "$${{x}}"])
  name     = "keyed"
  content  = "{content}"
}}
"""


CHILD = (
    PROVIDER
    + """
variable "content" {
  type = string
}
resource "test_thing" "b" {
  count   = 2
  name    = "b${count.index}"
  content = var.content
}
"""
)

# The run options each plan is made with, once the configuration is applied and changed.
OPTIONS = {
    "normal": RunOptions(),
    "destroy": RunOptions(destroy=True),
    "refresh": RunOptions(refresh_only=True),
    "targeted": RunOptions(targets=('module.a["x"].test_thing.b[0]', "test_thing.plain")),
    "module": RunOptions(targets=("module.a",)),
    "replace": RunOptions(replacements=('test_thing.keyed["a b"]',)),
    # Spellings the options' grammar accepts and the engine records otherwise.
    "respelt": RunOptions(
        targets=('module.a["x"].test_thing.b[01]', 'test_thing.keyed["d\x7fel"]')
    ),
}


@dataclass(frozen=True)
class Planned:
    """A plan the runner's engine driver made with ``options``."""

    options: RunOptions
    result: EngineResult
    path: Path
    plan: bytes
    document: dict[str, Any]

    def changes(self) -> dict[str, list[str]]:
        return {
            change["address"]: change["change"]["actions"]
            for change in self.document.get("resource_changes", [])
        }


@dataclass(frozen=True)
class Applied:
    """The applied, then changed, configuration's directory and its engine environment."""

    work: Path
    env: dict[str, str]

    def engine(self, work: Path | None = None) -> Engine:
        return Engine(engine_path(), work or self.work, self.env, BoundedLog(), timeout_seconds=180)


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Applied:
    root = tmp_path_factory.mktemp("options")
    # Skips off linux_amd64; installs the test provider's mirror and a CLI configuration.
    cli_config = RealEngine(root).cli_config
    (root / "home").mkdir()
    work = root / "work"
    (work / "a").mkdir(parents=True)
    (work / "versions.tf").write_text(PROVIDER, encoding="utf-8")
    (work / "main.tf").write_text(root_module("one"), encoding="utf-8")
    (work / "a" / "main.tf").write_text(CHILD, encoding="utf-8")
    out = Applied(work, engine_env(root / "home", cli_config))
    engine = out.engine()
    assert engine.init().succeeded
    assert engine.plan(work / "create.bin", lock=True).succeeded
    assert engine.apply(work / "create.bin").succeeded
    # Every resource's content changes in place from now on.
    (work / "main.tf").write_text(root_module("two"), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def plans(applied: Applied) -> dict[str, Planned]:
    def plan(name: str) -> Planned:
        path = applied.work / f"{name}.bin"
        engine = applied.engine()
        result = engine.plan(path, lock=False, options=OPTIONS[name])
        assert result.succeeded, engine.log.text()
        document = engine.show_json(path)
        return Planned(OPTIONS[name], result, path, path.read_bytes(), document)

    # Plans of one directory may run side by side: none of them writes the state.
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(OPTIONS, pool.map(plan, OPTIONS), strict=True))


# --------------------------------------------------------------------------- honest plans


@pytest.mark.parametrize("name", list(OPTIONS))
def test_a_plan_made_with_the_runs_options_is_accepted(
    plans: dict[str, Planned], name: str
) -> None:
    """Given the engine's saved plan and JSON of a plan made with a run's options
    When the runner checks them against those options
    Then the plan is accepted, and its command line carried the options' flags"""
    planned = plans[name]

    saved = checked_plan(planned.plan, planned.document, planned.options)

    assert saved.ui_mode == planned.options.mode.value
    option_flags = ("-destroy", "-refresh-only", "-target=", "-replace=")
    flags = [arg for arg in planned.result.command if arg.startswith(option_flags)]
    assert flags == planned.options.engine_flags()


def test_what_terraform_records_for_each_option(plans: dict[str, Planned]) -> None:
    """Given the plans made with each set of options
    When their saved plans are read
    Then the engine records the mode, targets and replacements as asked, in its own
    spelling: no leading zero, ``$${`` read as ``${`` and DEL as a unicode escape"""
    recorded = {name: checked_plan(p.plan, p.document, p.options) for name, p in plans.items()}

    assert {name: saved.ui_mode for name, saved in recorded.items()} == {
        "normal": "normal",
        "destroy": "destroy",
        "refresh": "refresh-only",
        "targeted": "normal",
        "module": "normal",
        "replace": "normal",
        "respelt": "normal",
    }
    assert recorded["targeted"].target_addrs == (
        'module.a["x"].test_thing.b[0]',
        "test_thing.plain",
    )
    assert recorded["module"].target_addrs == ("module.a",)
    assert recorded["replace"].force_replace_addrs == ('test_thing.keyed["a b"]',)
    assert recorded["respelt"].target_addrs == (
        'module.a["x"].test_thing.b[1]',
        'test_thing.keyed["d\\u007fel"]',
    )
    assert all(
        not saved.target_addrs and not saved.force_replace_addrs
        for name, saved in recorded.items()
        if name in ("normal", "destroy", "refresh")
    )


def test_terraform_1_0_cannot_read_back_a_target_whose_key_holds_a_template_escape(
    applied: Applied,
) -> None:
    """Given a target whose key is written ``$${x}`` (HCL's escape for ``${x}``)
    When the pinned engine plans with it
    Then it records the key as ``["${x}"]``, the spelling the runner expects, and then
    cannot read its own saved plan: ``show`` fails, and so would the phase"""
    path = applied.work / "template.bin"
    engine = applied.engine()
    options = RunOptions(targets=('test_thing.keyed["$${x}"]',))

    assert engine.plan(path, lock=False, options=options).succeeded

    assert read_plan(path.read_bytes()).target_addrs == ('test_thing.keyed["${x}"]',)
    assert recorded_address(options.targets[0], "1.0.3") == 'test_thing.keyed["${x}"]'
    with pytest.raises(EngineCommandFailed):
        engine.show_json(path)
    assert "Template sequences are not" in engine.log.text()


def test_each_plan_changes_what_its_options_say(plans: dict[str, Planned]) -> None:
    """Given the changed configuration planned with each set of options
    When the engine's JSON is read
    Then destroy deletes everything, refresh-only changes nothing, targets limit the
    changes to what they name, and a forced replacement replaces its resource only"""
    everything = plans["normal"].changes()

    assert len(everything) == 8
    assert all(actions == ["update"] for actions in everything.values())
    assert plans["destroy"].changes() == {address: ["delete"] for address in everything}
    assert plans["refresh"].changes() == {}
    assert plans["targeted"].changes() == {
        'module.a["x"].test_thing.b[0]': ["update"],
        "test_thing.plain": ["update"],
    }
    assert set(plans["module"].changes()) == {
        f'module.a["{key}"].test_thing.b[{index}]' for key in "xy" for index in (0, 1)
    }
    replaced = plans["replace"].changes()
    assert replaced.pop('test_thing.keyed["a b"]') == ["delete", "create"]
    assert replaced == {address: ["update"] for address in everything if address in replaced}
    assert len(replaced) == 7


def test_an_approved_destroy_plan_applies_as_any_saved_plan(
    applied: Applied, plans: dict[str, Planned], tmp_path: Path
) -> None:
    """Given the applied directory (a copy) and its approved destroy plan
    When the runner's engine driver applies it
    Then the command is ``apply`` of the saved plan with no mode flag, and the state is
    empty afterwards"""
    work = tmp_path / "work"
    shutil.copytree(applied.work, work, symlinks=True)
    saved = work / plans["destroy"].path.name

    result = applied.engine(work).apply(saved)

    assert result.succeeded
    assert result.command == ("apply", "-input=false", "-no-color", str(saved))
    state = json.loads((work / "terraform.tfstate").read_text(encoding="utf-8"))
    assert state["resources"] == []


# --------------------------------------------------------------------------- forged plans


@pytest.mark.parametrize(
    ("made", "asked", "reason"),
    [
        (
            "normal",
            RunOptions(destroy=True),
            "the engine's saved plan is a normal plan; this run asked for a destroy plan",
        ),
        (
            "destroy",
            RunOptions(),
            "the engine's saved plan is a destroy plan; this run asked for a normal plan",
        ),
        (
            "refresh",
            RunOptions(),
            "the engine's saved plan is a refresh-only plan; this run asked for a normal plan",
        ),
        (
            "normal",
            RunOptions(targets=("test_thing.plain",)),
            "the engine's saved plan does not target 'test_thing.plain', which this run asked for",
        ),
        (
            "targeted",
            RunOptions(targets=("test_thing.plain",)),
            "the engine's saved plan targets 'module.a[\"x\"].test_thing.b[0]', which this "
            "run did not ask for",
        ),
        (
            "module",
            RunOptions(targets=('module.a["x"]',)),
            "the engine's saved plan targets 'module.a', which this run did not ask for",
        ),
        (
            "replace",
            RunOptions(),
            "the engine's saved plan forces the replacement of 'test_thing.keyed[\"a b\"]', "
            "which this run did not ask for",
        ),
        (
            "normal",
            RunOptions(replacements=("test_thing.plain", 'test_thing.keyed["a b"]')),
            "the engine's saved plan does not force the replacement of "
            "'test_thing.keyed[\"a b\"]', which this run asked for (and 1 more)",
        ),
    ],
)
def test_a_saved_plan_that_does_not_carry_out_the_options_is_refused(
    plans: dict[str, Planned], made: str, asked: RunOptions, reason: str
) -> None:
    """Given an honest plan made with some options (its JSON describes it)
    When the runner checks it against other options, as if the engine had ignored them
    Then the phase is refused with a sentence naming what differs"""
    planned = plans[made]

    with pytest.raises(Refused) as refused:
        checked_plan(planned.plan, planned.document, asked)

    assert refused.value.message == reason


def test_the_json_is_checked_before_the_options(plans: dict[str, Planned]) -> None:
    """Given a destroy plan's file with a normal plan's JSON
    When the runner checks them against destroy options
    Then it is the JSON that is refused, as before the options existed"""
    with pytest.raises(Refused) as refused:
        checked_plan(plans["destroy"].plan, plans["normal"].document, RunOptions(destroy=True))

    assert refused.value.message.startswith(
        "the engine's plan JSON does not describe its saved plan: resource_changes: "
    )


def test_the_options_check_reads_the_file_not_the_json(plans: dict[str, Planned]) -> None:
    """Given the saved plan of a normal plan, read by the JSON check
    When its mode is checked against destroy options directly
    Then it is refused whatever a JSON might say (the 1.0 JSON shows no mode at all)"""
    saved = checked_plan(plans["normal"].plan, plans["normal"].document, RunOptions())

    with pytest.raises(Refused, match="is a normal plan; this run asked for a destroy plan"):
        check_plan_options(saved, RunOptions(destroy=True))


# --------------------------------------------------------------------------- the manifest


def test_a_manifest_without_options_plans_with_the_defaults() -> None:
    """Given manifests of runs created before runs had options (none, null, not an object)
    When the runner reads their options
    Then they are the defaults: a normal plan of everything"""
    for manifest in ({"kind": "plan_and_apply"}, {"options": None}, {"options": "destroy"}):
        assert run_options(manifest) == RunOptions()


def test_a_manifests_options_are_read_and_checked() -> None:
    """Given a manifest carrying a run's options as the control plane stores them
    When the runner reads them
    Then it gets them back as they were sent"""
    options = RunOptions(destroy=True, targets=('module.app["blue"]', "aws_instance.web[0]"))

    assert run_options({"kind": "plan_only", "options": options.to_body()}) == options


def test_a_refresh_only_run_plans_refresh_only_whatever_its_options_say() -> None:
    """Given a refresh_only run with no options, and one with targets
    When the runner reads their options
    Then both are refresh-only plans, the second keeping its targets"""
    targets = RunOptions(targets=("test_thing.plain",)).to_body()

    assert run_options({"kind": "refresh_only"}) == RunOptions(refresh_only=True)
    assert run_options({"kind": "refresh_only", "options": targets}) == RunOptions(
        refresh_only=True, targets=("test_thing.plain",)
    )


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        (
            {"kind": "refresh_only", "options": {"destroy": True}},
            "a run either destroys or only refreshes, not both",
        ),
        (
            {"kind": "refresh_only", "options": {"replacements": ["test_thing.plain"]}},
            "forced replacement plans changes",
        ),
        (
            {"kind": "plan_only", "options": {"targets": ["-destroy"]}},
            "'-destroy' is not a valid address",
        ),
        (
            {"kind": "plan_only", "options": {"replacements": ["module.a"]}},
            "'module.a' is not a valid address",
        ),
    ],
)
def test_options_the_runner_cannot_carry_out_refuse_the_phase(
    manifest: dict[str, Any], reason: str
) -> None:
    """Given a manifest whose options are not valid (for its kind)
    When the runner reads them, before anything runs
    Then the phase is refused, saying why"""
    with pytest.raises(Refused) as refused:
        run_options(manifest)

    assert refused.value.message.startswith("the run's plan options cannot be used: ")
    assert reason in refused.value.message


# --------------------------------------------------------------------------- the engine's argv


@pytest.mark.skipif(os.name != "posix", reason="the fake engine is a shell script")
def test_the_options_flags_follow_the_plans_own(tmp_path: Path) -> None:
    """Given a fake engine that records its arguments
    When a plan runs with a target, a replacement and a variables file
    Then the options' flags come after the plan's own and before the variables file"""
    argv_file = tmp_path / "argv"
    fake = tmp_path / "tofu"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGV_FILE"\n', encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    options = RunOptions(targets=('module.a["x"]',), replacements=("test_thing.plain",))

    Engine(fake, tmp_path, {"ARGV_FILE": str(argv_file)}, BoundedLog()).plan(
        tmp_path / "plan", lock=False, var_file=tmp_path / "v.json", options=options
    )

    assert argv_file.read_text(encoding="utf-8").splitlines() == [
        "plan",
        "-input=false",
        "-no-color",
        "-detailed-exitcode",
        f"-out={tmp_path / 'plan'}",
        "-lock=false",
        '-target=module.a["x"]',
        "-replace=test_thing.plain",
        f"-var-file={tmp_path / 'v.json'}",
    ]
