"""Refusing root modules that declare their own backend or cloud block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runplane.runner.config_check import check_root_module
from runplane.runner.engine_config import BACKEND_OVERRIDE_NAME
from runplane.runner.refusal import Refused
from tests.unit.runner.configurations import write_configuration

PLAIN = 'output "a" {\n  value = 1\n}\n'


def module(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    return write_configuration(tmp_path, files)


def refusal(tmp_path: Path, files: dict[str, str | bytes]) -> str:
    with pytest.raises(Refused) as refused:
        check_root_module(module(tmp_path, files))
    return refused.value.message


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"main.tf": 'terraform {\n  backend "s3" {\n    bucket = "mine"\n  }\n}\n' + PLAIN},
            "configuration file 'main.tf' declares a terraform 'backend' block",
            id="s3-in-main",
        ),
        pytest.param(
            {"main.tf": PLAIN, "zz_override.tf": 'terraform {\n  backend "local" {}\n}\n'},
            "configuration file 'zz_override.tf' declares a terraform 'backend' block",
            id="local-in-override-sorting-last",
        ),
        pytest.param(
            {"main.tf": PLAIN, "b.tf.json": json.dumps({"terraform": {"backend": {"local": {}}}})},
            "configuration file 'b.tf.json' declares a terraform 'backend' block",
            id="json",
        ),
        pytest.param(
            {"b_override.tf.json": json.dumps({"terraform": [{}, {"backend": [{"s3": {}}]}]})},
            "configuration file 'b_override.tf.json' declares a terraform 'backend' block",
            id="json-array-override",
        ),
        pytest.param(
            {"c.tf.json": '{"terraform": {}, "terraform": {"cloud": {}}}'},
            "configuration file 'c.tf.json' declares a terraform 'cloud' block",
            id="json-duplicate-key",
        ),
        pytest.param(
            {"main.tf": 'terraform {\n  cloud {\n    organization = "x"\n  }\n}\n'},
            "configuration file 'main.tf' declares a terraform 'cloud' block",
            id="cloud",
        ),
        pytest.param(
            {"main.tofu": 'terraform {\n  backend "local" {}\n}\n'},
            "configuration file 'main.tofu' declares a terraform 'backend' block",
            id="tofu-extension",
        ),
        pytest.param(
            {"main.tf": 'terraform { # x\n  backend /* a\n */ "local" {\n  }\n}\n'},
            "configuration file 'main.tf' declares a terraform 'backend' block",
            id="comments-around",
        ),
        pytest.param(
            {"main.tf": '\ufeffterraform {\n  backend "local" {}\n}\n'},
            "configuration file 'main.tf' declares a terraform 'backend' block",
            id="byte-order-mark",
        ),
        pytest.param(
            # A heredoc whose interpolation holds a line equal to the marker: the
            # engine's heredoc goes on past it, and the backend block is real.
            {
                "main.tf": "locals {\n  x = <<EOT\n${<<EOX\nEOT\n}\n}\nEOX\n}\nEOT\n}\n"
                'terraform {\n  backend "local" {}\n}\n'
            },
            "configuration file 'main.tf' declares a terraform 'backend' block",
            id="heredoc-nesting",
        ),
    ],
)
def test_a_backend_or_cloud_block_is_refused_naming_the_file(
    tmp_path: Path, files: dict[str, str | bytes], expected: str
) -> None:
    assert refusal(tmp_path, files).startswith(expected)


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"main.tf": PLAIN}, id="plain"),
        pytest.param(
            {
                "main.tf": 'resource "google_compute_backend_service" "b" {\n'
                '  backend {\n    group = "g"\n  }\n}\n'
                'terraform {\n  required_version = ">= 1.0"\n  required_providers {\n'
                '    cloud = { source = "x/cloud" }\n  }\n}\n'
            },
            id="nested-backend-blocks-elsewhere",
        ),
        pytest.param(
            {
                "main.tf": '# terraform { backend "s3" {} }\n'
                'locals {\n  a = "terraform { backend \\"s3\\" {} } ${"}"}"\n'
                '  b = <<-EOT\n    }\n    terraform {\n      backend "s3" {}\n    EOT\n'
                "  c = { terraform = { backend = 1 } }\n}\n" + PLAIN
            },
            id="in-comments-strings-heredocs-and-objects",
        ),
        pytest.param({"modules/m/main.tf": 'terraform {\n  backend "s3" {}\n}\n'}, id="child"),
        pytest.param({"notes.txt": 'terraform {\n  backend "s3" {}\n}\n'}, id="not-config"),
        pytest.param(
            {"x.tf.json": json.dumps({"terraform": {"required_version": ">= 1"}, "backend": 1})},
            id="json-elsewhere",
        ),
    ],
)
def test_configurations_without_their_own_backend_pass(
    tmp_path: Path, files: dict[str, str | bytes]
) -> None:
    check_root_module(module(tmp_path, files))


def test_the_runners_own_override_is_skipped(tmp_path: Path) -> None:
    root = module(tmp_path, {BACKEND_OVERRIDE_NAME: 'terraform {\n  backend "remote" {}\n}\n'})

    check_root_module(root, skip=frozenset({BACKEND_OVERRIDE_NAME}))
    with pytest.raises(Refused):
        check_root_module(root)


@pytest.mark.parametrize(
    "content",
    [
        'locals {\n  a = "unterminated\n}\n',
        "locals {\n",
        "}\n",
        "/* never closed\n",
        "locals {\n  a = <<EOT\nno end\n}\n",
        b"\xff\xfe not utf-8",
    ],
    ids=["string", "open-brace", "close-brace", "comment", "heredoc", "encoding"],
)
def test_a_file_that_cannot_be_read_is_refused_not_guessed(
    tmp_path: Path, content: str | bytes
) -> None:
    assert refusal(tmp_path, {"main.tf": content}).startswith(
        "configuration file 'main.tf' cannot be checked for a backend block"
    )


def test_invalid_json_is_refused(tmp_path: Path) -> None:
    assert "'x.tf.json' cannot be checked" in refusal(tmp_path, {"x.tf.json": "[1, 2]"})
    assert "'y.tf.json' cannot be checked" in refusal(tmp_path / "b", {"y.tf.json": "{"})


REMOTE_BACKEND = 'terraform {\n  backend "remote" {\n    organization = "o"\n  }\n}\n'


def test_a_remote_operation_may_name_its_backend_in_a_primary_file(tmp_path: Path) -> None:
    # Given the configuration a remote backend uploads (it declares that backend)
    root = module(tmp_path, {"main.tf": REMOTE_BACKEND + PLAIN})

    # When it is checked for a remote operation, it passes (the runner's override
    # replaces the block whole); for any other run it is still refused
    check_root_module(root, replaced_backend=True)
    with pytest.raises(Refused):
        check_root_module(root)


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"zz_override.tf": REMOTE_BACKEND}, id="override-file"),
        pytest.param({"override.tf.json": json.dumps({"terraform": {"backend": {}}})}, id="json"),
        pytest.param({"main.tf": "terraform {\n  cloud {\n  }\n}\n"}, id="cloud-block"),
    ],
)
def test_a_remote_operation_still_refuses_override_backends_and_cloud_blocks(
    tmp_path: Path, files: dict[str, str | bytes]
) -> None:
    with pytest.raises(Refused):
        check_root_module(module(tmp_path, files), replaced_backend=True)
