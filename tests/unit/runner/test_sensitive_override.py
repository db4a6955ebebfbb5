"""The override file that marks the run's sensitive variables sensitive to the engine.

What the engine then does with it is tested against the real engine in
tests/e2e/test_sensitive_override_engine.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runplane.runner.refusal import Refused
from runplane.runner.sensitive_override import (
    SENSITIVE_OVERRIDE_NAME,
    declared_variables,
    write_sensitive_override,
)
from tests.unit.runner.configurations import write_configuration


def module(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    return write_configuration(tmp_path, files)


def marked(path: Path | None) -> list[str]:
    """The names the written override file marks sensitive, in order."""
    assert path is not None
    text = path.read_text(encoding="utf-8")
    return [line.split('"')[1] for line in text.splitlines() if line.startswith("variable ")]


def test_declared_sensitive_variables_are_marked_and_others_left_alone(tmp_path: Path) -> None:
    # Given a root module declaring three variables
    root = module(
        tmp_path,
        {
            "main.tf": 'variable "token" {\n  type = string\n}\nvariable "region" {}\n',
            "more.tf": 'variable "password" {\n  sensitive = false\n}\n',
        },
    )

    # When two of them, and one it does not declare, are sensitive
    path = write_sensitive_override(root, ["token", "password", "undeclared"])

    # Then the override file marks exactly the declared sensitive ones, sorted
    assert path == root / SENSITIVE_OVERRIDE_NAME
    assert path.read_text(encoding="utf-8") == (
        "# Written by the Runplane runner: these variables are sensitive workspace variables.\n"
        "\n"
        'variable "password" {\n  sensitive = true\n}\n\n'
        'variable "token" {\n  sensitive = true\n}\n\n'
    )


@pytest.mark.parametrize(
    "declaration",
    [
        pytest.param('variable "s" {}\n', id="quoted"),
        pytest.param("variable s {}\n", id="bare-identifier"),
        pytest.param('variable "\\u0073" {}\n', id="escaped"),
        pytest.param('variable "s" { type = string }\n', id="one-line"),
        pytest.param('variable "s" {\n  default = "${upper("x")}"\n}\n', id="interpolation"),
        pytest.param('variable "s" {\n  default = <<-EOT\n  }\n  EOT\n}\n', id="heredoc-body"),
        pytest.param('\ufeff# a comment\nvariable /* c */ "s" {}\n', id="bom-and-comments"),
    ],
)
def test_native_declarations_are_found(tmp_path: Path, declaration: str) -> None:
    root = module(tmp_path, {"main.tf": declaration})
    assert marked(write_sensitive_override(root, ["s"])) == ["s"]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('# variable "s" {}\n', id="line-comment"),
        pytest.param('/* variable "s" {} */\n', id="block-comment"),
        pytest.param('locals {\n  x = <<EOT\nvariable "s" {\nEOT\n}\n', id="heredoc"),
        pytest.param('locals {\n  x = "variable \\"s\\" {}"\n}\n', id="string"),
        pytest.param('module "m" {\n  source = "./m"\n  variable "s" {}\n}\n', id="nested"),
        pytest.param('variable "${"s"}" {}\n', id="template-label"),
        pytest.param('resource "variable" "s" {}\n', id="other-block"),
    ],
)
def test_what_only_looks_like_a_declaration_is_not_one(tmp_path: Path, text: str) -> None:
    root = module(tmp_path, {"main.tf": text})
    assert write_sensitive_override(root, ["s"]) is None
    assert not (root / SENSITIVE_OVERRIDE_NAME).exists()


@pytest.mark.parametrize(
    "document",
    [
        pytest.param({"variable": {"s": {"type": "string"}}}, id="object"),
        pytest.param({"variable": [{"s": {}}, {"t": {}}]}, id="array"),
        pytest.param({"variable": {"s": [{"sensitive": False}]}}, id="body-array"),
    ],
)
def test_json_declarations_are_found(tmp_path: Path, document: dict[str, object]) -> None:
    root = module(tmp_path, {"vars.tf.json": json.dumps(document)})
    assert marked(write_sensitive_override(root, ["s"])) == ["s"]


def test_json_duplicate_keys_are_all_read(tmp_path: Path) -> None:
    # Given a JSON file whose second "variable" key declares the variable
    root = module(tmp_path, {"a.tf.json": '{"variable": {}, "variable": {"s": {}}}'})
    # Then it is found, as the engine reads both
    assert marked(write_sensitive_override(root, ["s"])) == ["s"]


def test_every_root_module_file_kind_counts_and_nothing_else(tmp_path: Path) -> None:
    root = module(
        tmp_path,
        {
            "a.tf": 'variable "a" {}\n',
            "b.tofu": 'variable "b" {}\n',
            "c.tf.json": json.dumps({"variable": {"c": {}}}),
            "d.tofu.json": json.dumps({"variable": {"d": {}}}),
            "e_override.tf": 'variable "a" {\n  description = "x"\n}\n',
            "notes.txt": 'variable "f" {}\n',
            "terraform.tfvars": 'g = "1"\n',
            "modules/child/main.tf": 'variable "h" {}\n',
        },
    )
    assert declared_variables(root) == {"a", "b", "c", "d"}


def test_nothing_is_written_when_no_sensitive_variable_is_declared(tmp_path: Path) -> None:
    root = module(tmp_path, {"main.tf": 'variable "region" {}\n'})
    assert write_sensitive_override(root, ["token"]) is None
    assert write_sensitive_override(root, []) is None
    assert sorted(p.name for p in root.iterdir()) == ["main.tf"]


def test_a_file_of_the_override_s_name_in_the_configuration_is_replaced(tmp_path: Path) -> None:
    # Given a configuration shipping its own file of the runner's override name
    root = module(
        tmp_path,
        {
            "main.tf": 'variable "s" {}\n',
            SENSITIVE_OVERRIDE_NAME: 'variable "s" {\n  sensitive = false\n}\n',
        },
    )

    # When the runner writes its override
    path = write_sensitive_override(root, ["s"])

    # Then the file is the runner's
    assert path is not None
    assert "sensitive = true" in path.read_text(encoding="utf-8")
    assert "false" not in path.read_text(encoding="utf-8")


def test_an_override_file_that_sorts_earlier_may_declare_the_variable(tmp_path: Path) -> None:
    root = module(
        tmp_path,
        {
            "main.tf": 'variable "s" {}\n',
            "a_override.tf": 'variable "s" {\n  sensitive = false\n}\n',
            "zz_override.tf": 'variable "other" {\n  sensitive = false\n}\n',
            "zz.tf": 'variable "other" {}\n',
        },
    )
    assert marked(write_sensitive_override(root, ["s"])) == ["s"]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("zz_override.tf", 'variable "s" {\n  sensitive = false\n}\n'),
        ("runplane_z_override.tf", 'variable "s" {}\n'),
        ("runplane_sensitive_override.tf.json", json.dumps({"variable": {"s": {}}})),
        ("s_override.tofu", 'variable "s" {}\n'),
    ],
)
def test_an_override_file_merged_after_the_runners_is_refused(
    tmp_path: Path, name: str, content: str
) -> None:
    # Given a configuration whose own override file, merged after the runner's, declares
    # a sensitive variable (it could set sensitive = false again)
    root = module(tmp_path, {"main.tf": 'variable "s" {}\n', name: content})

    # When the runner writes its override
    with pytest.raises(Refused) as refused:
        write_sensitive_override(root, ["s"])

    # Then the run is refused, naming the file and the variable, and nothing is written
    assert refused.value.message.startswith(
        f"configuration file {name!r} overrides sensitive variable 's' after the runner's"
    )
    assert not (root / SENSITIVE_OVERRIDE_NAME).exists()


def test_a_tofu_file_that_would_replace_the_override_is_refused(tmp_path: Path) -> None:
    root = module(
        tmp_path, {"main.tf": 'variable "s" {}\n', "runplane_sensitive_override.tofu": ""}
    )
    with pytest.raises(Refused, match=r"runplane_sensitive_override\.tofu"):
        write_sensitive_override(root, ["s"])


@pytest.mark.parametrize(
    "name",
    [
        'x" { sensitive = false }\nvariable "y',
        "s\n",
        "${s}",
        "count",
        "",
        "TF_STATE_PERSIST_INTERVAL",
    ],
)
def test_a_name_the_engine_would_not_accept_is_refused(tmp_path: Path, name: str) -> None:
    # Given a configuration (declaring nothing unusual)
    root = module(tmp_path, {"main.tf": 'variable "s" {}\n'})

    # When a name that is no variable name is passed in
    with pytest.raises(Refused, match="variable name"):
        write_sensitive_override(root, ["s", name])

    # Then nothing is written
    assert not (root / SENSITIVE_OVERRIDE_NAME).exists()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("main.tf", 'variable "s" {\n'),
        ("main.tf", b'variable "s" {}\n\xff'),
        ("main.tf", 'variable "s" {\n  default = "unterminated\n}\n'),
        ("main.tf.json", '{"variable": '),
        ("main.tf.json", '"a string"'),
        ("main.tf", 'x = "${' * 2000 + "}" * 2000),
    ],
)
def test_a_file_that_cannot_be_read_is_refused(
    tmp_path: Path, name: str, content: str | bytes
) -> None:
    root = module(tmp_path, {name: content})
    with pytest.raises(Refused) as refused:
        write_sensitive_override(root, ["s"])
    assert refused.value.message == (
        f"configuration file {name!r} cannot be read for its variable declarations "
        "(it is not valid UTF-8 HCL or JSON)"
    )


def test_a_link_in_place_of_the_override_is_not_followed(tmp_path: Path) -> None:
    # Given a configuration whose entry of the override's name links elsewhere
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched", encoding="utf-8")
    root = module(tmp_path, {"main.tf": 'variable "s" {}\n'})
    os.symlink(outside, root / SENSITIVE_OVERRIDE_NAME)

    # When the runner writes its override, it refuses rather than write through the link
    with pytest.raises(Refused, match="has a name the runner reserves"):
        write_sensitive_override(root, ["s"])
    assert outside.read_text(encoding="utf-8") == "untouched"


def test_a_directory_in_place_of_the_override_is_refused(tmp_path: Path) -> None:
    root = module(tmp_path, {"main.tf": 'variable "s" {}\n'})
    (root / SENSITIVE_OVERRIDE_NAME).mkdir()
    with pytest.raises(Refused, match="has a name the runner reserves"):
        write_sensitive_override(root, ["s"])
