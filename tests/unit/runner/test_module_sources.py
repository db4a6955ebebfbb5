"""Refusing module sources that would make the engine read files outside the configuration."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runplane.runner.config_check import check_module_sources, check_root_module
from runplane.runner.refusal import Refused
from tests.unit.runner.configurations import write_configuration

PLAIN = 'output "a" {\n  value = 1\n}\n'
LEAVES = "resolves outside the configuration directory"
NOT_LITERAL = "has a source that is not a plain quoted string"


def module_call(source: str, name: str = "m") -> str:
    """A module block whose source is ``source``, written as is (quotes included)."""
    return f'module "{name}" {{\n  source = {source}\n}}\n'


def configuration(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    return write_configuration(tmp_path, files)


def refusal(tmp_path: Path, files: dict[str, str | bytes]) -> str:
    with pytest.raises(Refused) as refused:
        check_module_sources(configuration(tmp_path, files))
    return refused.value.message


@pytest.mark.parametrize(
    ("source", "why"),
    [
        pytest.param('"/etc/terraform"', "is an absolute path", id="absolute"),
        pytest.param('"\\\\\\\\server\\\\share"', "is an absolute path", id="unc-path"),
        pytest.param('"~/modules/x"', "starts with '~' (a home directory)", id="home"),
        pytest.param('"file::/srv/modules/x"', "uses the file:: getter", id="file-getter"),
        pytest.param('"FILE::./x"', "uses the file:: getter", id="file-getter-upper-case"),
        pytest.param('"file:///srv/modules/x"', "is a file: URL", id="file-url"),
        pytest.param('"git::file:///srv/repo.git"', "is a file: URL", id="git-over-file-url"),
        pytest.param('"git::/srv/repo.git"', "is an absolute path", id="git-over-absolute"),
        pytest.param('"C:\\\\modules\\\\x"', "is a Windows drive path", id="windows-drive"),
        pytest.param('"c:/modules/x"', "is a Windows drive path", id="windows-drive-slash"),
        pytest.param('"../shared"', LEAVES, id="parent"),
        pytest.param('".."', LEAVES, id="parent-bare"),
        pytest.param('"./a/../../shared"', LEAVES, id="inside-then-out"),
        pytest.param('"..\\\\shared"', LEAVES, id="backslashes"),
        pytest.param('"\\u002e\\u002e/shared"', LEAVES, id="unicode-escapes"),
        pytest.param('"shared/../../../etc"', "has a '..' component", id="detected-as-file"),
        pytest.param(
            '"git::https://example.com/r.git//../.."', "has a '..' component", id="subdir-up"
        ),
    ],
)
def test_a_source_outside_the_configuration_is_refused_naming_file_and_module(
    tmp_path: Path, source: str, why: str
) -> None:
    # Given a root module calling a module from outside the configuration directory
    files: dict[str, str | bytes] = {"main.tf": PLAIN + module_call(source, name="shared")}

    # When its module sources are checked
    message = refusal(tmp_path, files)

    # Then it is refused, naming the file, the module and why
    assert message.startswith("configuration file 'main.tf': module 'shared' source ")
    assert f" {why}; modules come from inside the configuration directory" in message


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('"${"../shared"}"', id="interpolation"),
        pytest.param('"%{if true}../shared%{endif}"', id="directive"),
        pytest.param("var.modules", id="reference"),
        pytest.param('("./a")', id="parentheses"),
        pytest.param('"./a" # fine\n  source = local.x', id="second-source"),
        pytest.param("<<EOT\n./a\nEOT", id="heredoc"),
        pytest.param('"\\q"', id="invalid-escape"),
        pytest.param('{\n    path = "./a"\n  }', id="object"),
    ],
)
def test_a_source_that_is_not_a_plain_string_is_refused(tmp_path: Path, source: str) -> None:
    # Given a module whose source the engine would have to evaluate
    message = refusal(tmp_path, {"main.tf": module_call(source)})

    # Then it is refused: what it would evaluate to is not guessed
    assert message.startswith(f"configuration file 'main.tf': module 'm' {NOT_LITERAL}")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"main.tf": PLAIN, "modules/a/main.tf": module_call('"../../../x"', "deep")},
            f"configuration file 'modules/a/main.tf': module 'deep' source '../../../x' {LEAVES}",
            id="nested-climbing-out",
        ),
        pytest.param(
            {"main.tf": 'module m { source = "/etc" }\n'},
            "configuration file 'main.tf': module 'm' source '/etc' is an absolute path",
            id="one-line-and-bare-label",
        ),
        pytest.param(
            {"main.tf": PLAIN, "zz_override.tf": module_call('"../x"')},
            f"configuration file 'zz_override.tf': module 'm' source '../x' {LEAVES}",
            id="override-file",
        ),
        pytest.param(
            {"main.tf": PLAIN, "modules/a/x.tofu": module_call('"/x"')},
            "configuration file 'modules/a/x.tofu': module 'm' source '/x' is an absolute path",
            id="tofu-in-a-module",
        ),
        pytest.param(
            {"main.tf": 'module "m" { # a\n  source /* b\n */ = "/etc" // c\n}\n'},
            "configuration file 'main.tf': module 'm' source '/etc' is an absolute path",
            id="comments-around",
        ),
        pytest.param(
            # A heredoc whose interpolation holds a line equal to the marker: the engine's
            # heredoc goes on past it, and the module block after it is real.
            {
                "main.tf": "locals {\n  x = <<EOT\n${<<EOX\nEOT\n}\n}\nEOX\n}\nEOT\n}\n"
                + module_call('"../x"')
            },
            f"configuration file 'main.tf': module 'm' source '../x' {LEAVES}",
            id="heredoc-nesting",
        ),
        pytest.param(
            {"main.tf": 'locals {\n  a = "${"}"}"\n}\n' + module_call('"../x"')},
            f"configuration file 'main.tf': module 'm' source '../x' {LEAVES}",
            id="brace-in-interpolated-string",
        ),
    ],
)
def test_module_calls_are_found_wherever_the_engine_finds_them(
    tmp_path: Path, files: dict[str, str | bytes], expected: str
) -> None:
    assert refusal(tmp_path, files).startswith(expected)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(
            {"module": {"m": {"source": "../x"}}},
            f"module 'm' source '../x' {LEAVES}",
            id="object",
        ),
        pytest.param(
            {"module": [{"a": [{"source": "./a"}]}, {"b": [{"source": "/etc"}]}]},
            "module 'b' source '/etc' is an absolute path",
            id="arrays",
        ),
        pytest.param(
            {"module": {"m": {"source": "${path.root}/../x"}}},
            f"module 'm' {NOT_LITERAL}",
            id="template",
        ),
        pytest.param(
            {"module": {"m": {"source": ["./a"]}}},
            f"module 'm' {NOT_LITERAL}",
            id="not-a-string",
        ),
    ],
)
def test_json_module_calls_are_checked(
    tmp_path: Path, document: dict[str, object], expected: str
) -> None:
    files: dict[str, str | bytes] = {"main.tf": PLAIN, "modules.tf.json": json.dumps(document)}

    assert refusal(tmp_path, files).startswith(f"configuration file 'modules.tf.json': {expected}")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"\\u006dodule": {"m": {"source": "/etc"}}}', id="escaped-key"),
        pytest.param('{"module": {"m": {"source": "./a", "source": "/etc"}}}', id="duplicate"),
        pytest.param('{"module": {}, "module": {"m": {"source": "/etc"}}}', id="second-block"),
    ],
)
def test_json_tricks_do_not_hide_a_source(tmp_path: Path, text: str) -> None:
    message = refusal(tmp_path, {"main.tf": PLAIN, "m.tf.json": text})

    assert message.startswith("configuration file 'm.tf.json': module 'm' source '/etc'")


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"main.tf": module_call('"./modules/a"')}, id="local-child"),
        pytest.param({"main.tf": module_call('"."')}, id="itself"),
        pytest.param(
            {
                "main.tf": module_call('"./modules/a"'),
                "modules/a/main.tf": module_call('"../b"'),
                "modules/a/c/main.tf": module_call('"../../b"'),
            },
            id="nested-relative-staying-inside",
        ),
        pytest.param({"main.tf": module_call('"hashicorp/consul/aws"')}, id="registry"),
        pytest.param(
            {"main.tf": module_call('"app.terraform.io/example/vpc/aws"')}, id="private-registry"
        ),
        pytest.param(
            {"main.tf": module_call('"git::https://example.com/vpc.git?ref=v1.2.0"')}, id="git"
        ),
        pytest.param({"main.tf": module_call('"git@github.com:x/y.git"')}, id="git-scp"),
        pytest.param({"main.tf": module_call('"github.com/hashicorp/example"')}, id="github"),
        pytest.param(
            {"main.tf": module_call('"s3::https://s3.amazonaws.com/bucket/vpc.zip"')}, id="s3"
        ),
        pytest.param({"main.tf": module_call('"https://example.com/vpc.zip"')}, id="https"),
        pytest.param(
            {"m.tf.json": json.dumps({"module": {"m": {"source": "./modules/a"}}})}, id="json"
        ),
        pytest.param(
            {
                "main.tf": '# module "m" { source = "/etc" }\n'
                '/* module "n" {\n  source = "/etc"\n} */\n'
                'locals {\n  a = "module \\"m\\" { source = \\"/etc\\" }"\n'
                '  b = <<-EOT\n    }\n    module "m" {\n      source = "/etc"\n    }\n    EOT\n'
                '  module = { source = "/etc" }\n}\n'
            },
            id="in-comments-strings-heredocs-and-objects",
        ),
        pytest.param(
            {
                "main.tf": 'resource "aws_s3_object" "o" {\n  source = "/etc/hosts"\n}\n'
                'module "m" {\n  source = "./a"\n  providers = {\n    source = aws\n  }\n}\n'
            },
            id="source-attributes-elsewhere",
        ),
        pytest.param(
            {"x.tf.json": json.dumps({"resource": {"t": {"n": {"source": "/etc"}}}})},
            id="json-elsewhere",
        ),
        pytest.param({"notes.txt": module_call('"/etc"')}, id="not-config"),
    ],
)
def test_module_sources_inside_the_configuration_or_remote_pass(
    tmp_path: Path, files: dict[str, str | bytes]
) -> None:
    check_module_sources(configuration(tmp_path, files))


def test_a_file_in_a_module_that_cannot_be_read_is_refused_not_guessed(tmp_path: Path) -> None:
    # Given a child module file the tokenizer cannot read (a module block never closed)
    files: dict[str, str | bytes] = {
        "main.tf": PLAIN,
        "modules/a/main.tf": 'module "m" {\n  source = "/etc"\n',
    }

    # When its module sources are checked, then it is refused, not skipped
    assert refusal(tmp_path, files) == (
        "configuration file 'modules/a/main.tf' cannot be checked for module sources "
        "(it is not valid UTF-8 HCL or JSON)"
    )


def test_the_root_module_check_refuses_module_sources_too(tmp_path: Path) -> None:
    # Given a configuration without a backend block whose child calls a module outside
    root = configuration(tmp_path, {"main.tf": PLAIN, "modules/a/main.tf": module_call('"/srv/x"')})

    # When the runner's check runs, then it refuses the module source
    with pytest.raises(Refused, match=re.escape("'modules/a/main.tf': module 'm' source '/srv/x'")):
        check_root_module(root)


def test_files_the_runner_wrote_are_skipped(tmp_path: Path) -> None:
    # Given a root file the runner wrote itself, and the same name in a child module
    written = "zz_runplane.tf"
    root = configuration(tmp_path, {"main.tf": PLAIN, written: module_call('"/srv/x"')})

    # When it is named in skip, then it is not checked; otherwise it is
    check_root_module(root, skip=frozenset({written}))
    check_module_sources(root, skip=frozenset({written}))
    with pytest.raises(Refused):
        check_module_sources(root)
    (root / "modules").mkdir()
    (root / "modules" / written).write_text(module_call('"/srv/x"'))
    with pytest.raises(Refused, match=re.escape("'modules/zz_runplane.tf'")):
        check_root_module(root, skip=frozenset({written}))
