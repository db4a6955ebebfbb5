"""``runplane.domain.run_options``: a run's plan options (destroy, refresh-only, targets,
forced replacements), their address syntax, combinations and limits, their stored form
and the engine flags they become.

What the engine records for each address form, and the runner's check of the saved plan
against the options, are in tests/unit/runner/test_plan_options.py.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.domain.errors import InvalidInput
from runplane.domain.run_options import (
    MAX_ADDRESS_CHARS,
    MAX_ADDRESSES,
    PlanMode,
    RunOptions,
    check_run_options,
)

RESOURCES = [
    "aws_instance.web",
    "aws_instance.web[0]",
    'aws_instance.web["blue"]',
    'aws_instance.web[""]',
    'aws_instance.web["a b/c:d"]',
    'aws_instance.web["q\\"u\\\\o\\t\\n\\r"]',
    'aws_instance.web["é"]',
    "_private.with-hyphen_2",
    'module.app["blue"].aws_instance.web[0]',
    "module.app[2].module.db.aws_db_instance.main",
]
TARGETS_ONLY = [
    "module.app",
    'module.app["blue"]',
    "module.app[2].module.db",
    "data.aws_ami.base",
    'module.app.data.aws_ami.base["k"]',
]
NEVER = [
    "aws_instance",
    "aws_instance.web.extra",
    "aws_instance.web[0].attribute",
    "aws_instance.web[0][1]",
    "aws_instance.web[-1]",
    "aws_instance.web[*]",
    "aws_instance.web[count.index]",
    "aws_instance.web['blue']",
    'aws_instance.web["a"b"]',
    'aws_instance.web["\\u0041"]',
    'aws_instance.web["a\x01"]',
    'aws_instance.web["a\nb"]',
    "aws_instance.web [0]",
    " aws_instance.web",
    "aws_instance.web\n",
    "aws_instance. web",
    "1aws.web",
    "module",
    "module.",
    "module.app.",
    "module..app",
    "-destroy",
    "-target=aws_instance.web",
]


def ask(field: str, address: str) -> RunOptions:
    """``address`` checked as a target or as a replacement."""
    if field == "targets":
        return check_run_options(targets=[address])
    return check_run_options(replacements=[address])


@pytest.mark.parametrize("address", RESOURCES + TARGETS_ONLY)
def test_a_resource_or_module_address_is_a_target(address: str) -> None:
    """Given a resource, resource instance, module or module instance address
    When it is asked for as a target
    Then it is accepted as written"""
    assert check_run_options(targets=[address]).targets == (address,)


@pytest.mark.parametrize("address", RESOURCES)
def test_a_managed_resource_address_is_a_replacement(address: str) -> None:
    """Given a managed resource (instance) address, in a module or not
    When it is asked for as a forced replacement
    Then it is accepted as written"""
    assert check_run_options(replacements=[address]).replacements == (address,)


@pytest.mark.parametrize("address", TARGETS_ONLY)
def test_a_module_or_a_data_source_is_never_replaced(address: str) -> None:
    """Given a module or a data source address
    When it is asked for as a forced replacement
    Then it is refused, pointing at it and saying what a replacement names"""
    with pytest.raises(InvalidInput) as refused:
        check_run_options(replacements=["aws_instance.web", address])

    assert refused.value.pointer == "/replacements/1"
    assert refused.value.message == (
        f"{address!r} is not a valid address: a replacement names one managed resource "
        'instance, like aws_instance.web, aws_instance.web[0] or module.app["blue"].'
        "aws_instance.web"
    )


@pytest.mark.parametrize("address", NEVER)
@pytest.mark.parametrize("field", ["targets", "replacements"])
def test_what_is_not_an_address_in_canonical_form_is_refused(address: str, field: str) -> None:
    """Given text that is no address, or one spelt otherwise than the engine records
    it (spaces, single quotes, escapes beyond HCL's short ones, control characters)
    When it is asked for as a target or a replacement
    Then it is refused with a pointer to it, and a flag-like text never gets through"""
    with pytest.raises(InvalidInput) as refused:
        ask(field, address)

    assert refused.value.pointer == f"/{field}/0"
    assert "is not a valid address" in refused.value.message
    assert refused.value.http_status == 422


def test_a_refusal_echoes_only_a_short_printable_address() -> None:
    """Given an address with a control character and a long invalid one
    When they are refused
    Then neither is echoed: the message says "the address" instead"""
    for address in ['aws_instance.web["a\x1b[31m"]', "x" * 81]:
        with pytest.raises(InvalidInput) as refused:
            check_run_options(targets=[address])
        assert refused.value.message.startswith("the address is not a valid address")


@given(st.text(alphabet=string.printable + '\x00\x7f\u00a0é[]".-_\\', max_size=40))
def test_whatever_is_accepted_can_only_be_read_as_one_address_flag(text: str) -> None:
    """Given any text
    When it is asked for as a target and as a replacement
    Then it is refused as invalid input, or accepted only if it cannot be read as a
    flag of its own or break the command line (no leading dash, no control character)"""
    for field in ("targets", "replacements"):
        try:
            options = ask(field, text)
        except InvalidInput:
            continue
        assert not text.startswith("-")
        assert not any(ord(char) < 0x20 for char in text)
        flag = options.engine_flags()[0]
        assert flag.split("=", 1)[1] == text


# --------------------------------------------------------------------------- combinations


@pytest.mark.parametrize(
    ("options", "pointer", "message"),
    [
        (
            {"destroy": True, "refresh_only": True},
            "/refresh_only",
            "a run either destroys or only refreshes, not both: choose one",
        ),
        (
            {"destroy": True, "replacements": ["aws_instance.web"]},
            "/replacements",
            "forced replacement plans changes: it cannot be combined with destroy or refresh-only",
        ),
        (
            {"refresh_only": True, "replacements": ["aws_instance.web"]},
            "/replacements",
            "forced replacement plans changes: it cannot be combined with destroy or refresh-only",
        ),
    ],
)
def test_combinations_the_engine_refuses_are_refused(
    options: dict[str, object], pointer: str, message: str
) -> None:
    """Given destroy with refresh-only, or a forced replacement with either
    When the options are checked
    Then they are refused (the engine would refuse them too), pointing at the field"""
    with pytest.raises(InvalidInput) as refused:
        check_run_options(**options)  # type: ignore[arg-type]

    assert (refused.value.pointer, refused.value.message) == (pointer, message)


def test_targets_go_with_every_mode() -> None:
    """Given targets with destroy, with refresh-only, and with replacements
    When the options are checked
    Then each is accepted"""
    assert check_run_options(destroy=True, targets=["module.app"]).mode is PlanMode.DESTROY
    refresh = check_run_options(refresh_only=True, targets=["module.app"])
    assert refresh.mode is PlanMode.REFRESH_ONLY
    both = check_run_options(targets=["module.app"], replacements=["aws_instance.web"])
    assert (both.targets, both.replacements) == (("module.app",), ("aws_instance.web",))


def test_a_field_is_pointed_at_under_its_callers_name() -> None:
    """Given a caller with its own pointer prefix and field names (the Cloud API's)
    When an option is refused
    Then the pointer is into the caller's own request"""
    names = {"refresh_only": "refresh-only", "targets": "target-addrs"}
    with pytest.raises(InvalidInput) as both:
        check_run_options(destroy=True, refresh_only=True, pointer="/data/attributes", names=names)
    with pytest.raises(InvalidInput) as target:
        check_run_options(targets=["a.b", "bad"], pointer="/data/attributes", names=names)

    assert both.value.pointer == "/data/attributes/refresh-only"
    assert target.value.pointer == "/data/attributes/target-addrs/1"


# --------------------------------------------------------------------------- limits


def test_a_run_names_at_most_a_hundred_addresses_per_list() -> None:
    """Given 100 and 101 distinct targets
    When they are checked
    Then 100 are accepted and 101 refused, pointing at the list"""
    addresses = [f"aws_instance.web[{i}]" for i in range(MAX_ADDRESSES + 1)]

    assert len(check_run_options(targets=addresses[:-1]).targets) == MAX_ADDRESSES
    with pytest.raises(InvalidInput) as refused:
        check_run_options(replacements=addresses)
    assert refused.value.pointer == "/replacements"
    assert refused.value.message == "a run names at most 100 replacement addresses (101 given)"


def test_an_address_has_at_most_512_characters() -> None:
    """Given addresses of 512 and 513 characters
    When they are checked
    Then the first is accepted and the second refused, without being echoed"""
    longest = "a." + "b" * (MAX_ADDRESS_CHARS - 2)

    assert check_run_options(targets=[longest]).targets == (longest,)
    with pytest.raises(InvalidInput) as refused:
        check_run_options(targets=[longest + "b"])
    assert refused.value.pointer == "/targets/0"
    assert refused.value.message == "a target address has at most 512 characters"


@pytest.mark.parametrize(
    ("targets", "pointer", "message"),
    [
        ("aws_instance.web", "/targets", "the target addresses are a list of strings"),
        ([""], "/targets/0", "a target address is a non-empty string"),
        (["a.b", 3], "/targets/1", "a target address is a non-empty string"),
    ],
)
def test_the_addresses_are_a_list_of_non_empty_strings(
    targets: object, pointer: str, message: str
) -> None:
    """Given a string for the list, an empty address or one that is not a string
    When they are checked
    Then each is refused, pointing at it"""
    with pytest.raises(InvalidInput) as refused:
        check_run_options(targets=targets)  # type: ignore[arg-type]

    assert (refused.value.pointer, refused.value.message) == (pointer, message)


def test_an_address_asked_for_twice_is_kept_once_in_order() -> None:
    """Given targets naming one address twice
    When they are checked
    Then it is kept once, the first time it was named"""
    options = check_run_options(targets=["b.c", "a.b", "b.c"])

    assert options.targets == ("b.c", "a.b")


# --------------------------------------------------------------------------- stored form


@pytest.mark.parametrize(
    "options",
    [
        RunOptions(),
        RunOptions(destroy=True, targets=('module.app["blue"]',)),
        RunOptions(refresh_only=True),
        RunOptions(targets=("a.b", "module.c"), replacements=('aws_instance.web["q\\"u"]',)),
    ],
)
def test_options_survive_their_stored_form(options: RunOptions) -> None:
    """Given checked options
    When they are stored as JSON and read back
    Then they are the same options"""
    body = json.loads(json.dumps(options.to_body()))

    assert RunOptions.from_body(body) == options


def test_a_run_stored_without_options_has_the_defaults() -> None:
    """Given no stored options (a run created before runs had them), or not an object
    When they are read
    Then they are the defaults, and the defaults say so"""
    bodies: list[object] = [None, "destroy", ["destroy"], {}]
    for body in bodies:
        options = RunOptions.from_body(body)
        assert options == RunOptions()
        assert options.default
    assert not RunOptions(destroy=True).default


def test_only_true_turns_a_mode_on() -> None:
    """Given stored flags that are truthy but not true
    When they are read
    Then the plan stays normal"""
    options = RunOptions.from_body({"destroy": "true", "refresh_only": 1})

    assert options.mode is PlanMode.NORMAL


def test_stored_options_are_checked_again() -> None:
    """Given stored options that are not valid
    When they are read
    Then they are refused as they would have been when the run was created"""
    with pytest.raises(InvalidInput, match="choose one"):
        RunOptions.from_body({"destroy": True, "refresh_only": True})
    with pytest.raises(InvalidInput) as refused:
        RunOptions.from_body({"replacements": ["module.app"]})
    assert refused.value.pointer == "/replacements/0"


# --------------------------------------------------------------------------- engine flags


@pytest.mark.parametrize(
    ("options", "mode", "flags"),
    [
        (RunOptions(), PlanMode.NORMAL, []),
        (RunOptions(destroy=True), PlanMode.DESTROY, ["-destroy"]),
        (RunOptions(refresh_only=True), PlanMode.REFRESH_ONLY, ["-refresh-only"]),
        (
            RunOptions(destroy=True, targets=("module.app", 'a.b["k"]')),
            PlanMode.DESTROY,
            ["-destroy", "-target=module.app", '-target=a.b["k"]'],
        ),
        (
            RunOptions(targets=("a.b",), replacements=("c.d[0]", "e.f")),
            PlanMode.NORMAL,
            ["-target=a.b", "-replace=c.d[0]", "-replace=e.f"],
        ),
    ],
)
def test_each_option_is_one_engine_flag(
    options: RunOptions, mode: PlanMode, flags: list[str]
) -> None:
    """Given options
    When the plan's flags are built
    Then the mode's flag comes first, then one flag per target and per replacement, in
    the order asked; the mode is the one the saved plan records"""
    assert options.engine_flags() == flags
    assert options.mode is mode


def test_the_modes_are_spelt_as_the_saved_plan_records_them() -> None:
    """Given the plan modes
    Then their values are the saved plan's ui_mode spellings"""
    assert [mode.value for mode in PlanMode] == ["normal", "destroy", "refresh-only"]
