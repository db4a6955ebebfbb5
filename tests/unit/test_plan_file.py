"""``runplane.runner.plan_file``: a plan's JSON checked against the saved plan file.

Real plans come from the pinned engine (Terraform 1.0.3, tests/engine.py) with the
offline ``runplane/test`` provider (docs/test-provider.md), made once per module; the
forgeries edit copies of their JSON or rebuild their archives. The engine tests need
the linux_amd64 binary and the ``tf`` package (the project's ``dev`` extra).
"""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import platform
import shutil
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from examples.providers.install import install_mirror, provider_installation_block
from runplane.runner import plan_file
from runplane.runner.plan_file import (
    UNKNOWN,
    AttributeStep,
    PlanFileError,
    PlanMismatch,
    check_plan_json,
    go_quoted,
    hcl_quoted,
    parse_address,
    read_plan,
    recorded_address,
    resource_address,
    value_difference,
)
from tests.engine import engine_env, engine_path

linux_amd64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}),
    reason="the pinned engine binary is linux_amd64",
)

PROVIDER = """\
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
"""


def configuration(victim: str = "victim", *, changed: bool = False) -> str:
    """The root module: ``changed`` updates the victim, replaces ``other``, deletes
    ``keyed["a b"]`` and changes the sensitive variable."""
    keys = '["q\\"uote"]' if changed else '["a b", "q\\"uote"]'
    return (
        PROVIDER
        + f"""
variable "secret" {{
  type      = string
  default   = "{"hunter3" if changed else "hunter2"}"
  sensitive = true
}}
resource "test_thing" "{victim}" {{
  name    = "{victim}"
  content = "{"changed" if changed else "hello"}"
}}
resource "test_thing" "other" {{
  name = "{"other2" if changed else "other"}"
}}
resource "test_thing" "counted" {{
  count = 2
  name  = "counted-${{count.index}}"
}}
resource "test_thing" "keyed" {{
  for_each = toset({keys})
  name     = "keyed-${{each.key}}"
}}
resource "test_thing" "secret" {{
  name    = "secret"
  content = var.secret
}}
module "box" {{
  source = "./box"
}}
output "content" {{
  value = test_thing.{victim}.content
}}
output "password" {{
  value     = "s3cr3t"
  sensitive = true
}}
output "revision" {{
  value = test_thing.{victim}.revision
}}
output "numbers" {{
  value = [1, 2.5, 0.1, 12345678901234567890123]
}}
"""
    )


BOX = PROVIDER + 'resource "test_thing" "inner" {\n  name = "inner"\n}\n'


@dataclass(frozen=True)
class Saved:
    """A saved plan's bytes and the engine's ``show -json`` of it."""

    plan: bytes
    document: dict[str, Any]

    def json(self) -> dict[str, Any]:
        """A copy of the document to forge."""
        return copy.deepcopy(self.document)


class Workdir:
    def __init__(self, root: Path, cli_config: Path) -> None:
        self.path = root / "work"
        (self.path / "box").mkdir(parents=True)
        (root / "home").mkdir()
        self.cli_config = cli_config
        self.env = engine_env(root / "home", cli_config)

    def copy(self, root: Path) -> Workdir:
        """This directory (configuration, state, installed providers) under ``root``."""
        other = Workdir(root, self.cli_config)
        shutil.rmtree(other.path)
        shutil.copytree(self.path, other.path, symlinks=True)
        return other

    def write(self, main: str) -> None:
        (self.path / "main.tf").write_text(main, encoding="utf-8")
        (self.path / "box" / "main.tf").write_text(BOX, encoding="utf-8")

    def run(self, *args: str) -> str:
        result = subprocess.run(
            [str(engine_path()), *args, "-no-color"],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def plan(self, name: str, *options: str) -> Saved:
        # Plans of one directory may run side by side: none of them writes the state.
        self.run("plan", "-input=false", "-lock=false", *options, f"-out={name}")
        shown = json.loads(self.run("show", "-json", name))
        return Saved((self.path / name).read_bytes(), shown)


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Saved]:
    """``create`` (everything new), ``evil`` (the same with ``evil`` for ``victim``), and
    after applying ``create``: ``refresh`` (refresh-only), ``changes`` (an update, a
    replacement, a delete, no-ops) and ``destroy``."""
    if not (sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}):
        pytest.skip("the pinned engine binary is linux_amd64")
    assert importlib.util.find_spec("tf") is not None, "the test provider needs 'tf'"
    mirror = install_mirror(tmp_path_factory.mktemp("mirror"))
    cli_config = tmp_path_factory.mktemp("cli") / "cli.tfrc"
    cli_config.write_text(
        "disable_checkpoint = true\n\n" + provider_installation_block(mirror), encoding="utf-8"
    )
    main, evil = (Workdir(tmp_path_factory.mktemp(name), cli_config) for name in "ab")
    main.write(configuration())
    evil.write(configuration("evil"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        # The two directories share nothing: plan them side by side.
        evil_plan = pool.submit(lambda: (evil.run("init", "-input=false"), evil.plan("evil.bin")))
        main.run("init", "-input=false")
        out = {"create": main.plan("create.bin")}
        main.run("apply", "-input=false", "create.bin")
        # A refresh-only plan needs the applied configuration: plan it in a copy.
        refresh = main.copy(tmp_path_factory.mktemp("c"))
        refreshed = pool.submit(refresh.plan, "refresh.bin", "-refresh-only")
        main.write(configuration(changed=True))
        destroy = pool.submit(main.plan, "destroy.bin", "-destroy")
        out["changes"] = main.plan("changes.bin")
        out["refresh"], out["destroy"] = refreshed.result(), destroy.result()
        out["evil"] = evil_plan.result()[1]
    return out


def entry(document: dict[str, Any], address: str, section: str = "resource_changes") -> Any:
    return next(item for item in document[section] if item["address"] == address)


def planned(document: dict[str, Any], address: str) -> Any:
    modules = [document["planned_values"]["root_module"]]
    while modules:
        module = modules.pop()
        modules.extend(module.get("child_modules", []))
        for resource in module.get("resources", []):
            if resource["address"] == address:
                return resource
    raise KeyError(address)


# --------------------------------------------------------------------------- honest plans


@linux_amd64
@pytest.mark.parametrize("name", ["create", "evil", "refresh", "changes", "destroy"])
def test_the_engines_own_json_describes_its_plan(plans: dict[str, Saved], name: str) -> None:
    # Given a saved plan and the engine's show -json of it
    saved = plans[name]

    # When the JSON is checked against the file, then nothing is raised
    check_plan_json(saved.plan, saved.document)


@linux_amd64
def test_read_plan_decodes_actions_values_unknowns_and_sensitivity(
    plans: dict[str, Saved],
) -> None:
    # When the plan with every kind of change is read
    saved = read_plan(plans["changes"].plan)

    # Then each change carries its address, actions and values as the engine planned them
    changes = {change.address: change for change in saved.resource_changes}
    assert saved.terraform_version == "1.0.3"
    assert changes["test_thing.victim"].change.actions == ("update",)
    assert changes["test_thing.other"].change.actions == ("delete", "create")
    assert changes['test_thing.keyed["a b"]'].change.actions == ("delete",)
    assert changes['test_thing.keyed["a b"]'].index == "a b"
    assert changes['test_thing.keyed["q\\"uote"]'].change.actions == ("no-op",)
    assert changes["test_thing.counted[1]"].index == 1
    assert changes["module.box.test_thing.inner"].module_address == "module.box"
    victim = changes["test_thing.victim"].change
    assert victim.before["content"] == "hello"
    assert victim.after["content"] == "changed"
    assert victim.after["revision"] is UNKNOWN
    assert changes["test_thing.other"].replace_paths == ((AttributeStep("name"),),)
    assert changes["test_thing.secret"].change.after_sensitive == ((AttributeStep("content"),),)
    assert changes["test_thing.victim"].provider_name == "registry.terraform.io/runplane/test"
    outputs = {output.name: output for output in saved.output_changes}
    assert outputs["revision"].change.after is UNKNOWN
    assert outputs["password"].sensitive is True
    numbers = [1, Decimal("2.5"), Decimal("0.1"), Decimal("12345678901234567890123")]
    assert outputs["numbers"].change.after == numbers
    assert saved.module_sources == {"box": "./box"}
    assert saved.resource_drift == ()
    assert {obj.address for obj in saved.prior_state} >= {"test_thing.victim"}


# --------------------------------------------------------------------------- forgeries


def edit(saved: Saved, change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    document = saved.json()
    change(document)
    return document


def assert_mismatch(saved: Saved, document: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanMismatch) as raised:
        check_plan_json(saved.plan, document)
    assert message in str(raised.value)


@linux_amd64
def test_a_benign_json_with_an_evil_plan_file_is_refused(plans: dict[str, Saved]) -> None:
    # Given the JSON of a plan that creates test_thing.victim and the file of one that
    # creates test_thing.evil instead
    with pytest.raises(PlanMismatch) as raised:
        check_plan_json(plans["evil"].plan, plans["create"].document)

    # Then the mismatch names both changes
    assert str(raised.value) == (
        "resource_changes: the plan JSON lists test_thing.victim (create), "
        "the plan file test_thing.evil (create)"
    )


FORGERIES: list[tuple[str, str, Callable[[dict[str, Any]], object], str]] = [
    (
        "create",
        "an action changed",
        lambda d: entry(d, "test_thing.victim")["change"].update(actions=["update"]),
        "resource_changes: test_thing.victim is update in the plan JSON, create in the plan file",
    ),
    (
        "changes",
        "a delete removed",
        lambda d: d["resource_changes"].remove(entry(d, 'test_thing.keyed["a b"]')),
        'resource_changes: the plan file holds test_thing.keyed["a b"] (delete), '
        "which the plan JSON does not list",
    ),
    (
        "changes",
        "a delete shown as no-op",
        lambda d: entry(d, 'test_thing.keyed["a b"]')["change"].update(actions=["no-op"]),
        'test_thing.keyed["a b"] is no-op in the plan JSON, delete in the plan file',
    ),
    (
        "changes",
        "a replacement shown as an update",
        lambda d: entry(d, "test_thing.other")["change"].update(actions=["update"]),
        "test_thing.other is update in the plan JSON, delete, create in the plan file",
    ),
    (
        "create",
        "a change dropped",
        lambda d: d["resource_changes"].remove(entry(d, "test_thing.other")),
        "the plan file holds test_thing.other (create), which the plan JSON does not list",
    ),
    (
        "create",
        "a change added",
        lambda d: d["resource_changes"].append(
            {**entry(d, "test_thing.victim"), "address": "test_thing.extra", "name": "extra"}
        ),
        "the plan JSON lists test_thing.extra (create), which the plan file does not hold",
    ),
    (
        "changes",
        "an after attribute changed",
        lambda d: entry(d, "test_thing.victim")["change"]["after"].update(content="benign"),
        "resource_changes: test_thing.victim change.after.content differs from the plan file",
    ),
    (
        "changes",
        "a before attribute changed",
        lambda d: entry(d, "test_thing.victim")["change"]["before"].update(content="x"),
        "test_thing.victim change.before.content differs from the plan file",
    ),
    (
        "changes",
        "an unknown shown as known",
        lambda d: entry(d, "test_thing.victim")["change"].update(after_unknown={}),
        "test_thing.victim change.after_unknown differs from the plan file at.revision",
    ),
    (
        "changes",
        "an unknown given a value",
        lambda d: entry(d, "test_thing.victim")["change"]["after"].update(revision=2),
        "test_thing.victim change.after.revision differs from the plan file",
    ),
    (
        "create",
        "a resource's provider changed",
        lambda d: entry(d, "test_thing.victim").update(provider_name="registry.terraform.io/x/y"),
        "resource_changes: test_thing.victim provider_name differs from the plan file",
    ),
    (
        "changes",
        "replace paths dropped",
        lambda d: entry(d, "test_thing.other")["change"].pop("replace_paths"),
        "test_thing.other change.replace_paths differs from the plan file",
    ),
    (
        "changes",
        "an action reason dropped",
        lambda d: entry(d, "test_thing.other").pop("action_reason"),
        "test_thing.other action_reason differs from the plan file",
    ),
    (
        "changes",
        "an output value changed",
        lambda d: d["output_changes"]["content"].update(after="benign"),
        "output_changes: output content after differs from the plan file",
    ),
    (
        "changes",
        "an output's action changed",
        lambda d: d["output_changes"]["content"].update(actions=["no-op"]),
        "output_changes: output content is no-op in the plan JSON, update in the plan file",
    ),
    (
        "create",
        "an output dropped",
        lambda d: d["output_changes"].pop("numbers"),
        "output_changes: the plan file holds output numbers, which the plan JSON does not list",
    ),
    (
        "create",
        "an exact number rounded",
        lambda d: d["output_changes"]["numbers"]["after"].__setitem__(3, 12345678901234567890124),
        "output_changes: output numbers after[3] differs from the plan file",
    ),
    (
        "create",
        "a sensitive output's value changed",
        lambda d: d["output_changes"]["password"].update(after="other"),
        "output_changes: output password after differs from the plan file",
    ),
    (
        "create",
        "a sensitive output shown as not sensitive",
        lambda d: d["output_changes"]["password"].update(after_sensitive=False),
        "output_changes: output password after_sensitive differs from the plan file",
    ),
    (
        "changes",
        "a sensitive attribute's value changed",
        lambda d: entry(d, "test_thing.secret")["change"]["after"].update(content="hunter2"),
        "test_thing.secret change.after.content differs from the plan file",
    ),
    (
        "changes",
        "a sensitive attribute shown as not sensitive",
        lambda d: entry(d, "test_thing.secret")["change"].update(after_sensitive={}),
        "test_thing.secret change.after_sensitive does not mark.content, "
        "which the plan file marks sensitive",
    ),
    (
        "create",
        "a planned_values resource renamed",
        lambda d: planned(d, "test_thing.victim").update(address="test_thing.renamed"),
        "planned_values: the plan JSON lists test_thing.renamed, which the plan file does not plan",
    ),
    (
        "create",
        "a planned_values value changed",
        lambda d: planned(d, "test_thing.victim")["values"].update(content="benign"),
        "planned_values: test_thing.victim values.content differs from the plan file",
    ),
    (
        "changes",
        "a deleted resource listed as planned",
        lambda d: d["planned_values"]["root_module"]["resources"].append(
            {**planned(d, 'test_thing.keyed["q\\"uote"]'), "address": 'test_thing.keyed["a b"]'}
        ),
        'planned_values: the plan JSON lists test_thing.keyed["a b"], '
        "which the plan file does not plan",
    ),
    (
        "create",
        "a module's resource moved to the root module",
        lambda d: (
            d["planned_values"]["root_module"]["resources"].append(
                planned(d, "module.box.test_thing.inner")
            ),
            d["planned_values"]["root_module"].pop("child_modules"),
        ),
        "planned_values: module.box.test_thing.inner is listed under another module",
    ),
    (
        "create",
        "a planned output value changed",
        lambda d: d["planned_values"]["outputs"]["content"].update(value="benign"),
        "planned_values outputs: output content value differs from the plan file",
    ),
    (
        "changes",
        "a prior state value changed",
        lambda d: next(
            resource
            for resource in d["prior_state"]["values"]["root_module"]["resources"]
            if resource["address"] == "test_thing.victim"
        )["values"].update(content="benign"),
        "prior_state: test_thing.victim values.content differs from the plan file",
    ),
    (
        "create",
        "a variable's value changed",
        lambda d: d["variables"]["secret"].update(value="other"),
        "variables: variable secret value differs from the plan file",
    ),
    (
        "create",
        "a module call's source changed",
        lambda d: d["configuration"]["root_module"]["module_calls"]["box"].update(
            source="git::https://example.com/evil.git"
        ),
        "configuration: module call box source differs from the plan file",
    ),
    (
        "create",
        "another engine version",
        lambda d: d.update(terraform_version="1.0.4"),
        "terraform_version: the plan JSON names another engine version",
    ),
]


@linux_amd64
@pytest.mark.parametrize(
    ("name", "forgery", "message"),
    [(name, forgery, message) for name, _, forgery, message in FORGERIES],
    ids=[label for _, label, _, _ in FORGERIES],
)
def test_a_forged_json_is_refused_naming_the_difference(
    plans: dict[str, Saved], name: str, forgery: Callable[[dict[str, Any]], object], message: str
) -> None:
    # Given the engine's JSON of a real plan, edited
    saved = plans[name]
    document = edit(saved, forgery)

    # Then checking it against the plan file names the first difference
    assert_mismatch(saved, document, message)


@linux_amd64
def test_messages_never_carry_values(plans: dict[str, Saved]) -> None:
    # Given forgeries of secret values
    saved = plans["changes"]
    documents = [
        edit(saved, lambda d: d["output_changes"]["password"].update(after="leak-me-1")),
        edit(
            saved,
            lambda d: entry(d, "test_thing.secret")["change"]["after"].update(content="leak-me-2"),
        ),
        edit(saved, lambda d: d["variables"]["secret"].update(value="leak-me-3")),
    ]

    # Then no message holds the forged or the real value
    for document in documents:
        with pytest.raises(PlanMismatch) as raised:
            check_plan_json(saved.plan, document)
        text = str(raised.value)
        assert "leak-me" not in text
        assert "hunter" not in text
        assert "s3cr3t" not in text


# --------------------------------------------------------------------------- rebuilt archives


def members(plan: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(plan)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def rezip(plan: bytes, **replace: bytes) -> bytes:
    """The plan's archive with members replaced (``tfstate_prev`` for ``tfstate-prev``)."""
    content = members(plan) | {name.replace("_", "-"): data for name, data in replace.items()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in content.items():
            archive.writestr(name, data)
    return out.getvalue()


@linux_amd64
def test_drift_the_json_leaves_out_is_refused(plans: dict[str, Saved]) -> None:
    # Given a plan file whose refreshed state differs from the previous run's state
    saved = plans["changes"]
    state = json.loads(members(saved.plan)["tfstate"])
    victim = next(item for item in state["resources"] if item["name"] == "victim")
    victim["instances"][0]["attributes"]["content"] = "changed outside"
    forged = rezip(saved.plan, tfstate=json.dumps(state).encode())

    # Then the engine's JSON without that drift does not describe it
    with pytest.raises(PlanMismatch) as raised:
        check_plan_json(forged, saved.document)
    assert str(raised.value) == (
        "resource_drift: the plan file holds test_thing.victim (update), "
        "which the plan JSON does not list"
    )


@linux_amd64
def test_every_truncation_of_tfplan_is_refused_or_read(plans: dict[str, Saved]) -> None:
    # Given the tfplan of a real plan cut at many places
    tfplan = members(plans["changes"].plan)["tfplan"]

    # Then each cut is either refused with PlanFileError or still a whole message
    refused = 0
    for cut in range(1, len(tfplan), 7):
        try:
            read_plan(rezip(plans["changes"].plan, tfplan=tfplan[:cut]))
        except PlanFileError:
            refused += 1
    assert refused > len(tfplan) // 7 * 0.9
    with pytest.raises(PlanFileError):
        read_plan(rezip(plans["changes"].plan, tfplan=tfplan[: len(tfplan) // 2]))


@linux_amd64
def test_a_damaged_tfplan_raises_only_the_checks_errors(plans: dict[str, Saved]) -> None:
    # Given a real plan with single bytes of its tfplan changed
    saved = plans["changes"]
    tfplan = members(saved.plan)["tfplan"]
    outcomes: set[str] = set()
    for position in range(0, len(tfplan), 11):
        damaged = bytearray(tfplan)
        damaged[position] ^= 0x5A
        # When it is checked against the engine's JSON
        try:
            check_plan_json(rezip(saved.plan, tfplan=bytes(damaged)), saved.document)
            outcomes.add("passed")
        except (PlanFileError, PlanMismatch) as error:
            outcomes.add(type(error).__name__)

    # Then it is refused (or the byte did not matter), and nothing else is raised
    assert outcomes <= {"PlanFileError", "PlanMismatch", "passed"}
    assert {"PlanFileError", "PlanMismatch"} <= outcomes


@linux_amd64
def test_a_damaged_archive_raises_only_plan_file_error(plans: dict[str, Saved]) -> None:
    # Given a real plan file with single bytes changed anywhere (headers included)
    plan = plans["create"].plan
    outcomes: set[str] = set()
    for position in range(0, len(plan), 17):
        damaged = bytearray(plan)
        damaged[position] ^= 0xFF
        # When it is read, then it is refused with PlanFileError or read
        try:
            read_plan(bytes(damaged))
            outcomes.add("read")
        except PlanFileError:
            outcomes.add("refused")
    assert "refused" in outcomes


# --------------------------------------------------------------------------- the later format


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def proto_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """A protobuf message's fields (varint and length-delimited only)."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        else:
            assert wire == 2
            length, pos = _read_varint(data, pos)
            yield number, wire, data[pos : pos + length]
            pos += length


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def proto_field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def later_change(raw: bytes) -> bytes:
    """A Terraform 1.0 resource change as later engines write it: one ``addr``."""
    fields = list(proto_fields(raw))
    parts: dict[int, Any] = {number: value for number, _, value in fields if number <= 6}
    key = parts[5].decode() if 5 in parts else parts.get(6)
    mode = "data" if parts.get(2) == 1 else "managed"
    module = parts.get(1, b"").decode()
    address = resource_address(module, mode, parts[3].decode(), parts[4].decode(), key)
    kept = [proto_field(number, value) for number, _, value in fields if number > 6]
    return proto_field(13, address) + b"".join(kept)


def as_later_engine(plan: bytes, version: str) -> bytes:
    fields = []
    for number, _, value in proto_fields(members(plan)["tfplan"]):
        if number == 3 and isinstance(value, bytes):
            fields.append(proto_field(number, later_change(value)))
        else:
            fields.append(proto_field(number, version if number == 14 else value))
    return rezip(plan, tfplan=b"".join(fields))


@linux_amd64
def test_a_plan_in_the_later_layout_is_read_by_its_addresses(plans: dict[str, Saved]) -> None:
    # Given a real plan rewritten as OpenTofu writes it (addresses as one string)
    saved = plans["changes"]
    later = as_later_engine(saved.plan, "1.6.2")
    document = saved.json() | {"terraform_version": "1.6.2"}

    # When it is read, then the addresses are parsed into their parts
    changes = {change.address: change for change in read_plan(later).resource_changes}
    assert changes['test_thing.keyed["q\\"uote"]'].index == 'q"uote'
    assert changes["module.box.test_thing.inner"].module_address == "module.box"

    # And the engine's JSON describes it, and a renamed change does not
    check_plan_json(later, document)
    entry(document, "test_thing.victim")["address"] = "test_thing.renamed"
    with pytest.raises(PlanMismatch, match=r"the plan JSON lists test_thing\.renamed"):
        check_plan_json(later, document)


# --------------------------------------------------------------------------- hostile archives


def local_zip(name: str, data: bytes, *, declared: int, crc: int = 0, method: int = 8) -> bytes:
    """A one-entry zip whose sizes say what the caller wants, not what the data holds."""
    name_bytes = name.encode()
    header = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(data), declared,
        len(name_bytes), 0,
    )  # fmt: skip
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, len(data), declared,
        len(name_bytes), 0, 0, 0, 0, 0, 0,
    ) + name_bytes  # fmt: skip
    body = header + name_bytes + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(body), 0)
    return body + central + end


def zeros_deflated(mebibytes: int) -> bytes:
    """A raw deflate stream of that many MiB of zeros, made without inflating them:
    one fully flushed MiB (it refers to nothing before it) repeated, then an empty
    final block."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    one = deflater.compress(bytes(1 << 20)) + deflater.flush(zlib.Z_FULL_FLUSH)
    return one * mebibytes + b"\x03\x00"


def refused_quickly(plan: bytes) -> str:
    """The PlanFileError ``plan`` raises, checked to take little time and memory."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(PlanFileError) as raised:
            read_plan(plan)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5
    assert peak < 32 * 1024 * 1024
    return str(raised.value)


def test_bytes_that_are_not_a_zip_are_refused() -> None:
    assert "not a zip archive" in refused_quickly(b"tfplan, honestly")
    assert "not a zip archive" in refused_quickly(b"")


def test_a_zip_without_tfplan_is_refused() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("tfstate", "{}")
    assert refused_quickly(out.getvalue()) == "the plan file has no tfplan: it is not a saved plan"


def test_a_zip_with_a_trailing_comment_or_leading_bytes_is_refused() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("tfplan", b"")
        archive.comment = b"hidden"
    assert "comment" in refused_quickly(out.getvalue())
    plain = local_zip("tfplan", b"", declared=0, method=0)
    assert "outside its entries" in refused_quickly(b"prefix" + plain)


def test_a_zip_bomb_declaring_a_huge_size_is_refused_unread() -> None:
    # Given a tfplan that declares more than the check reads
    bomb = local_zip("tfplan", zeros_deflated(1), declared=plan_file.MAX_MEMBER_BYTES + 1)

    # Then it is refused without inflating it
    assert refused_quickly(bomb) == "the plan file's tfplan is larger than the check reads"


def test_a_zip_bomb_hiding_its_size_is_refused_after_its_declared_size() -> None:
    # Given a tfplan declaring 1 KiB whose deflate stream holds 256 MiB of zeros
    bomb = local_zip("tfplan", zeros_deflated(256), declared=1024)

    # Then inflating stops past the declared size and the member is refused
    assert "inflates to other than its declared size" in refused_quickly(bomb)


def minimal_plan(*changes: bytes, version: str = "1.0.3") -> bytes:
    """A saved plan of the given resource changes and empty states."""
    tfplan = proto_field(1, 3) + b"".join(proto_field(3, change) for change in changes)
    tfplan += proto_field(14, version)
    state = json.dumps({"version": 4, "resources": [], "outputs": {}}).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("tfplan", tfplan)
        archive.writestr("tfstate", state)
        archive.writestr("tfstate-prev", state)
        archive.writestr("tfconfig/modules.json", '[{"Key": "", "Dir": "."}]')
    return out.getvalue()


def create_change(msgpack: bytes, name: str = "x") -> bytes:
    """A Terraform 1.0 resource change creating ``test_thing.NAME`` with that value."""
    value = proto_field(2, proto_field(1, msgpack))
    return (
        proto_field(3, "test_thing")
        + proto_field(4, name)
        + proto_field(8, 'provider["registry.terraform.io/runplane/test"]')
        + proto_field(9, proto_field(1, 1) + value)
    )


def test_a_minimal_plan_is_read() -> None:
    # Given a hand-made plan creating one thing with a nested value and an unknown
    value = b"\x82\xa4name\xa1x\xa4tags\x92\xa1a\xd4\x00\x00"  # {name: "x", tags: ["a", ?]}
    saved = read_plan(minimal_plan(create_change(value)))

    # Then its change is decoded
    (change,) = saved.resource_changes
    assert change.address == "test_thing.x"
    assert change.change.after == {"name": "x", "tags": ["a", UNKNOWN]}


def test_deeply_nested_msgpack_is_refused_quickly() -> None:
    nested = b"\x91" * 200_000 + b"\xc0"
    assert "nested too deeply" in refused_quickly(minimal_plan(create_change(nested)))


def test_a_msgpack_count_larger_than_its_bytes_is_refused_quickly() -> None:
    huge = b"\xdd\xff\xff\xff\xff\xc0"
    assert "declares more elements than it holds" in refused_quickly(
        minimal_plan(create_change(huge))
    )


def test_more_values_than_the_budget_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_file, "MAX_VALUES", 1000)
    many = b"\xdc\x07\xd0" + b"\xc0" * 2000
    assert "more values than the check reads" in refused_quickly(minimal_plan(create_change(many)))


@pytest.mark.parametrize(
    ("msgpack", "problem"),
    [
        (b"\xc4\x01x", "binary data outside a dynamic value"),
        (b"\xc1", "never writes"),
        (b"\xa5abc", "truncated"),
        (b"\xc0\xc0", "bytes after its value"),
        (b"\x82\xa1a\xc0\xa1a\xc0", "repeats a map key"),
        (b"\x81\x01\xc0", "map key that is not a string"),
        (b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00", "NaN"),
        (b"\xc7\x02\x05ab", "extension"),
        (b"\x92\xc4\x05bogus\xc0", "type is not JSON"),
        (b'\x92\xc4\x08"string"\x05', "holds a int where its type says string"),
    ],
)
def test_msgpack_cty_never_writes_is_refused(msgpack: bytes, problem: str) -> None:
    assert problem in refused_quickly(minimal_plan(create_change(msgpack)))


def test_a_dynamic_value_is_read_by_its_type() -> None:
    # Given [type, value] for a list of numbers, one spelled as a string (a big number)
    value = b'\x92\xc4\x11["list","number"]\x93\x01\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00\xa30.1'

    # Then the value is decoded with exact numbers
    (change,) = read_plan(minimal_plan(create_change(value))).resource_changes
    assert change.change.after == [1, Decimal("1.5"), Decimal("0.1")]


def test_a_singular_protobuf_field_given_twice_is_refused() -> None:
    change = create_change(b"\xc0") + proto_field(3, "other_type")
    assert "repeats field 3" in refused_quickly(minimal_plan(change))


def test_a_protobuf_group_is_refused() -> None:
    change = create_change(b"\xc0") + _varint(20 << 3 | 3)
    assert "groups" in refused_quickly(minimal_plan(change))


def test_a_plan_of_another_format_version_is_refused() -> None:
    plan = rezip(minimal_plan(), tfplan=proto_field(1, 4) + proto_field(14, "1.0.3"))
    assert refused_quickly(plan) == "the plan file is not in plan format 3"


# --------------------------------------------------------------------------- values and addresses


@pytest.mark.parametrize(
    ("shown", "planned", "difference"),
    [
        (12345678901234567890123, Decimal("12345678901234567890123"), None),
        (12345678901234567890124, Decimal("12345678901234567890123"), ()),
        (0.1, Decimal("0.1"), None),
        (0.1, "0.1", None),  # a number the file spells as a string
        ("0.1", "0.1", None),
        (1, True, ()),
        (True, 1, ()),
        (None, UNKNOWN, None),
        ([None, 2], [UNKNOWN, 2], None),  # a list keeps an unknown's place as null
        ([2], [UNKNOWN, 2], None),  # a set or tuple drops it
        ({"a": 1}, {"a": 1, "b": UNKNOWN}, None),
        ({"a": 1, "b": None}, {"a": 1, "b": UNKNOWN}, ("b",)),
        ({"a": [1, {"c": "x"}]}, {"a": [1, {"c": "y"}]}, ("a", 1, "c")),
        ({}, {"a": None}, ("a",)),
    ],
)
def test_values_compare_exactly_and_unknowns_as_the_engine_leaves_them_out(
    shown: Any, planned: Any, difference: tuple[Any, ...] | None
) -> None:
    assert value_difference(shown, planned) == difference


@pytest.mark.parametrize(
    "key", ["a b", 'q"uote', "back\\slash", "${x}", "%{y}", "t\tab", "é", "\u200b"]
)
def test_an_address_quoted_as_later_engines_do_parses_back(key: str) -> None:
    quoted = hcl_quoted(key)
    parts = parse_address(f"module.m[0].module.n[{quoted}].data.test_thing.x[{quoted}]")
    assert parts.index == key
    assert parts.mode == "data"
    assert parts.module_address == f"module.m[0].module.n[{quoted}]"


def test_terraform_1_0_quotes_keys_as_go_does() -> None:
    assert go_quoted('q"\\\x07\u200bé') == '"q\\"\\\\\\a\\u200bé"'
    assert resource_address("module.m", "managed", "t", "n", "a b") == 'module.m.t.n["a b"]'
    assert resource_address("", "data", "t", "n", 3) == "data.t.n[3]"


def test_terraform_1_0_writes_del_in_a_key_as_a_unicode_escape() -> None:
    """Given a key holding DEL, control characters below space and ``${``
    When Terraform 1.0's quoting is applied
    Then DEL is ``\\u007f``, as the pinned engine writes it (Go 1.16's ``%q``), controls
    below space keep Go's short escapes, and ``${`` is left as is"""
    assert go_quoted("a\x7fb\x01\x1b${x}") == '"a\\u007fb\\x01\\x1b${x}"'


@pytest.mark.parametrize(
    ("asked", "terraform_1_0", "later"),
    [
        ("module.a", "module.a", "module.a"),
        ('module.a["x"].test_thing.b[0]', 'module.a["x"].test_thing.b[0]', None),
        ("test_thing.b[007]", "test_thing.b[7]", "test_thing.b[7]"),
        ('test_thing.b["a$${x}%%{y}"]', 'test_thing.b["a${x}%{y}"]', None),
        ('test_thing.b["q\\"u\\\\o\\t"]', None, None),
        ('test_thing.b["d\x7fel"]', 'test_thing.b["d\\u007fel"]', 'test_thing.b["d\\u007fel"]'),
        ('test_thing.b["\xa0é"]', 'test_thing.b["\\u00a0é"]', 'test_thing.b["\\u00a0é"]'),
        ('data.test_thing.d["k"]', None, None),
    ],
)
def test_an_address_is_compared_in_the_spelling_its_engine_records(
    asked: str, terraform_1_0: str | None, later: str | None
) -> None:
    """Given an address as a run's options may spell it
    When it is spelt as Terraform 1.0.3 and as later engines record it (None: unchanged)
    Then integer keys lose leading zeros, HCL's escapes are read and each engine's own
    quoting is applied"""
    assert recorded_address(asked, "1.0.3") == (terraform_1_0 or asked)
    assert recorded_address(asked, "1.8.5") == (later or asked)
