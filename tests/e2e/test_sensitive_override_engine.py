"""Sensitive variables under transformation, against the real pinned engine.

With the runner's override (runner/sensitive_override.py) the engine itself treats the
run's sensitive variables as sensitive: it refuses a plain output derived from one,
plans derived attributes as ``(sensitive)`` and keeps derived values out of most of its
messages. Some of Terraform 1.0.3's messages print them anyway (function errors, the
var file's line in a type error, a provider's own errors); for those the runner's log
redaction (runner/bounded_log.py) is what keeps them out of the run's log, and these
tests pin exactly which.

The engine tests need the linux_amd64 Terraform 1.0.3 binary from tests/engine.py; the
provider tests need the ``runplane/test`` provider (the ``tf`` package, docs/test-provider.md).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import platform
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from examples.providers.install import install_mirror, provider_installation_block
from runplane.runner.bounded_log import BoundedLog
from runplane.runner.sensitive_override import write_sensitive_override
from tests.engine import engine_env, engine_path

linux_amd64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}),
    reason="the pinned engine binary is linux_amd64",
)
pytestmark = linux_amd64

# Mixed case, so that its upper- and lower-case spellings differ from it, and a '-' so
# that no function takes it for base64 or a number.
SECRET = "Sk-Tr0ub4dor-Horse-93e1"
RAW = SECRET.encode()
SENSITIVE_OUTPUT_ERROR = "Error: Output refers to sensitive values"

PROVIDER = """\
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
"""


def spellings(secret: str = SECRET) -> dict[str, str]:
    """What a configuration can cheaply make of the value, and the engine could print."""
    raw = secret.encode()
    return {
        "raw": secret,
        "upper": secret.upper(),
        "lower": secret.lower(),
        "reversed": secret[::-1],
        "base64": base64.b64encode(raw).decode(),
        "hex": raw.hex(),
        "urlencoded": urllib.parse.quote_plus(secret, safe=""),
    }


def leaked(text: str, secret: str = SECRET) -> list[str]:
    """The spellings of ``secret`` found in ``text`` (letter case ignored)."""
    lowered = text.lower()
    return [name for name, form in spellings(secret).items() if form.lower() in lowered]


class Workdir:
    """A root module, the run's variables file, and the engine in a clean environment."""

    def __init__(self, tmp_path: Path, cli_config: str = "") -> None:
        self.path = tmp_path / "work"
        self.path.mkdir()
        home = tmp_path / "home"
        home.mkdir()
        config = tmp_path / "cli.tfrc"
        config.write_text("disable_checkpoint = true\n\n" + cli_config, encoding="utf-8")
        self.env = engine_env(home, config)
        self.var_file = tmp_path / "runplane.tfvars.json"

    def configure(self, files: dict[str, str], variables: dict[str, str]) -> None:
        for name, content in files.items():
            (self.path / name).write_text(content, encoding="utf-8")
        # As the runner writes it: one JSON object of strings.
        self.var_file.write_text(json.dumps(variables), encoding="utf-8")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(engine_path()), *args, "-no-color"],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def init(self) -> None:
        result = self.run("init", "-input=false")
        assert result.returncode == 0, result.stdout + result.stderr

    def plan(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("plan", "-input=false", f"-var-file={self.var_file}", *args)


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def redacted(text: str, secret: str = SECRET) -> str:
    """``text`` as the run's log keeps it."""
    log = BoundedLog(secrets=[secret])
    log.write(text)
    return log.text()


@pytest.fixture
def work(tmp_path: Path) -> Workdir:
    return Workdir(tmp_path)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert importlib.util.find_spec("tf") is not None, (
        "the runplane/test provider needs the 'tf' package: pip install -e '.[dev]'"
    )
    return install_mirror(tmp_path_factory.mktemp("provider-mirror"))


@pytest.fixture
def with_provider(tmp_path: Path, mirror: Path) -> Workdir:
    return Workdir(tmp_path, provider_installation_block(mirror))


# --------------------------------------------------------------------------- outputs


def test_a_plain_output_derived_from_a_sensitive_variable_is_refused(work: Workdir) -> None:
    # Given a configuration printing an upper-cased variable in a plain output
    work.configure(
        {"main.tf": 'variable "s" {\n  type = string\n}\noutput "o" { value = upper(var.s) }\n'},
        {"s": SECRET},
    )
    work.init()

    # When it is planned without the override, the engine prints the derived value
    unmarked = work.plan()
    assert unmarked.returncode == 0, output(unmarked)
    assert f'+ o = "{SECRET.upper()}"' in output(unmarked)

    # When the runner marks the variable sensitive and it is planned again
    assert write_sensitive_override(work.path, ["s"]) is not None
    marked = work.plan()

    # Then the engine refuses the output, and prints no spelling of the value
    assert marked.returncode == 1
    assert SENSITIVE_OUTPUT_ERROR in output(marked)
    assert 'on main.tf line 4:\n   4: output "o" { value = upper(var.s) }' in output(marked)
    assert leaked(output(marked)) == []


@pytest.mark.parametrize("own", ["true", "false"])
def test_the_override_wins_over_the_configurations_own_sensitive_setting(
    work: Workdir, own: str
) -> None:
    # Given a configuration whose variable block says sensitive already, either way
    work.configure(
        {
            "main.tf": f'variable "s" {{\n  type      = string\n  sensitive = {own}\n}}\n'
            'output "masked" {\n  value     = base64encode(var.s)\n  sensitive = true\n}\n'
        },
        {"s": SECRET},
    )
    work.init()
    write_sensitive_override(work.path, ["s"])

    # When it is planned, a sensitive output of it is accepted and masked
    masked = work.plan()
    assert masked.returncode == 0, output(masked)
    assert "+ masked = (sensitive value)" in output(masked)

    # When a plain output of it is added
    (work.path / "plain.tf").write_text('output "plain" { value = lower(var.s) }\n')
    plain = work.plan()

    # Then it is refused: the variable is sensitive whatever the block said
    assert plain.returncode == 1
    assert SENSITIVE_OUTPUT_ERROR in output(plain)
    assert leaked(output(masked) + output(plain)) == []


def test_a_variable_declared_in_json_is_marked_too(work: Workdir) -> None:
    # Given a configuration written in JSON
    work.configure(
        {
            "main.tf.json": json.dumps(
                {
                    "variable": {"s": {"type": "string"}},
                    "output": {"o": {"value": '${join("", reverse(split("", var.s)))}'}},
                }
            )
        },
        {"s": SECRET},
    )
    work.init()

    # When the runner marks the variable and it is planned
    write_sensitive_override(work.path, ["s"])
    result = work.plan()

    # Then the reversed value's output is refused, unprinted
    assert result.returncode == 1
    assert SENSITIVE_OUTPUT_ERROR in output(result)
    assert leaked(output(result)) == []


def test_a_value_for_an_undeclared_variable_is_only_named_in_a_warning(work: Workdir) -> None:
    # Given variables, one of them sensitive and not declared by the configuration
    other = "Undeclared-Secret-Value-77"
    work.configure(
        {"main.tf": 'variable "s" {}\noutput "n" { value = 1 }\n'}, {"s": SECRET, "other": other}
    )
    work.init()

    # When the runner marks both (only the declared one is written) and it is planned
    write_sensitive_override(work.path, ["s", "other"])
    result = work.plan()

    # Then the engine warns, naming the undeclared variable but not its value
    assert result.returncode == 0, output(result)
    assert 'The root module does not declare a variable named "other"' in output(result)
    assert leaked(output(result), other) == []
    assert leaked(output(result)) == []


# --------------------------------------------------------------------------- engine errors


def test_a_conversion_error_of_a_derived_value_does_not_print_it(work: Workdir) -> None:
    # Given an expression that fails on the lower-cased variable
    work.configure(
        {
            "main.tf": 'variable "s" {}\n'
            'output "o" {\n  value     = tonumber(lower(var.s))\n  sensitive = true\n}\n'
        },
        {"s": SECRET},
    )
    work.init()
    write_sensitive_override(work.path, ["s"])

    # When it is planned
    result = work.plan()

    # Then the error says a sensitive value could not be converted, without the value
    assert result.returncode == 1
    assert "var.s has a sensitive value" in output(result)
    assert "cannot convert this sensitive string to\nnumber." in output(result)
    assert leaked(output(result)) == []


# Terraform 1.0.3's function errors that print their argument even when it is sensitive,
# and which spelling of the value each prints here.
PRINTING_FUNCTIONS = {
    "file": ("file(upper(var.s))", "upper"),
    "templatefile": ("templatefile(lower(var.s), {})", "lower"),
    "filebase64": ('filebase64("/x/${var.s}")', "raw"),
    "parseint": ("parseint(base64encode(var.s), 10)", "base64"),
    "base64decode": ("base64decode(strrev(var.s))", "reversed"),
    "cidrhost": ("cidrhost(var.s, 1)", "raw"),
    "cidrsubnet": ("cidrsubnet(upper(var.s), 8, 1)", "upper"),
    "cidrnetmask": ("cidrnetmask(var.s)", "raw"),
    "lookup": ("lookup({}, lower(var.s))", "lower"),
    "timeadd": ('timeadd(var.s, "1h")', "raw"),
    "formatdate": ('formatdate("YYYY", lower(var.s))', "lower"),
    "sum": ("sum([upper(var.s)])", "upper"),
    "regex": ('regex("(${var.s}", "x")', "raw"),
    "replace": ('replace("x", "/(${strrev(var.s)}/", "y")', "reversed"),
}


@pytest.mark.parametrize(
    ("expression", "spelling"), PRINTING_FUNCTIONS.values(), ids=PRINTING_FUNCTIONS.keys()
)
def test_function_errors_that_print_a_sensitive_value_are_redacted_in_the_log(
    work: Workdir, expression: str, spelling: str
) -> None:
    # Given a marked variable, and a function call that fails on a value derived from it
    work.configure(
        {
            "main.tf": 'variable "s" {}\n'
            f'output "o" {{\n  value     = {expression}\n  sensitive = true\n}}\n'
        },
        {"s": SECRET},
    )
    work.init()
    write_sensitive_override(work.path, ["s"])

    # When it is planned
    result = work.plan()

    # Then the engine prints the derived value in its error, sensitive or not ...
    assert result.returncode == 1
    assert spellings()[spelling] in output(result)
    # ... and the run's log holds no spelling of it
    log = redacted(output(result))
    assert "[redacted]" in log
    assert leaked(log) == []


def test_a_value_the_engine_word_wraps_in_an_error_is_redacted_in_the_log(work: Workdir) -> None:
    # Given a marked variable whose value has spaces, and a file() call on it
    secret = "correct horse battery staple and several more words of it"
    work.configure(
        {
            "main.tf": 'variable "s" {}\n'
            'output "o" {\n  value     = file(var.s)\n  sensitive = true\n}\n'
        },
        {"s": secret},
    )
    work.init()
    write_sensitive_override(work.path, ["s"])

    # When it is planned
    result = work.plan()

    # Then the engine's message breaks the value across lines at one of its spaces ...
    assert result.returncode == 1
    assert secret not in output(result)
    assert secret in output(result).replace("\n", " ")
    # ... and the run's log holds the marker instead
    log = redacted(output(result), secret)
    assert "no file exists at [redacted];" in log.replace("\n", " ")
    assert secret not in log.replace("\n", " ")


def test_a_type_error_prints_the_var_files_line_which_the_log_redacts(work: Workdir) -> None:
    # Given a marked number variable given a string, and a short second value
    work.configure(
        {"main.tf": 'variable "n" {\n  type = number\n}\nvariable "t" {}\n'},
        {"n": SECRET, "t": "abc"},
    )
    work.init()
    write_sensitive_override(work.path, ["n"])

    # When it is planned
    result = work.plan()

    # Then the engine quotes the var file's line, every value on it included ...
    assert result.returncode == 1
    assert "Error: Invalid value for input variable" in output(result)
    assert f'   1: {{"n": "{SECRET}", "t": "abc"}}' in output(result)
    # ... and the run's log, redacting the run's values, holds none of them
    log = BoundedLog(secrets=[SECRET, "abc"])
    log.write(output(result))
    assert '   1: {"n": "[redacted]", "t": "[redacted]"}' in log.text()
    assert leaked(log.text()) == []


# --------------------------------------------------------------------------- resources


def test_derived_resource_attributes_plan_as_sensitive(with_provider: Workdir) -> None:
    # Given resources whose content is the variable base64-encoded, upper-cased, reversed
    things = {
        "b64": "base64encode(var.s)",
        "up": "upper(var.s)",
        "rev": 'join("", reverse(split("", var.s)))',
    }
    resources = "".join(
        f'resource "test_thing" "{name}" {{\n  name    = "{name}"\n  content = {value}\n}}\n'
        for name, value in things.items()
    )
    with_provider.configure({"main.tf": PROVIDER + 'variable "s" {}\n' + resources}, {"s": SECRET})
    with_provider.init()

    # When the runner marks the variable and the configuration is planned
    write_sensitive_override(with_provider.path, ["s"])
    result = with_provider.plan()

    # Then each derived attribute is planned as (sensitive), and no spelling is printed
    assert result.returncode == 0, output(result)
    assert output(result).count("+ content  = (sensitive)") == 3
    assert "Plan: 3 to add, 0 to change, 0 to destroy." in output(result)
    assert leaked(output(result)) == []


def test_a_providers_error_naming_a_derived_value_is_redacted_in_the_log(
    with_provider: Workdir,
) -> None:
    # Given a resource named after the upper-cased variable, whose apply fails
    with_provider.configure(
        {
            "main.tf": PROVIDER
            + 'variable "s" {}\n'
            + 'resource "test_thing" "t" {\n  name          = upper(var.s)\n'
            + "  fail_on_apply = true\n}\n"
        },
        {"s": SECRET},
    )
    with_provider.init()
    write_sensitive_override(with_provider.path, ["s"])

    # When it is planned (the name is masked) and applied
    planned = with_provider.plan("-out=run.tfplan")
    assert planned.returncode == 0, output(planned)
    assert "+ name          = (sensitive)" in output(planned)
    applied = with_provider.run("apply", "-input=false", "run.tfplan")

    # Then the provider's error names the thing by its value: the engine cannot mask
    # what a provider writes ...
    assert applied.returncode == 1
    assert f"Error: test_thing {SECRET.upper()}: failing on demand" in output(applied)
    # ... and the run's log holds the marker instead
    log = redacted(output(planned) + output(applied))
    assert "Error: test_thing [redacted]: failing on demand" in log
    assert leaked(log) == []
