"""What the CLI accepts as variables and durations, before any request is made."""

from __future__ import annotations

from pathlib import Path

import pytest

from runplane.cli_input import InputError, duration, read_var_file, variables


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3600", 3600),
        ("90s", 90),
        ("45m", 2700),
        ("72h", 259200),
        ("7d", 604800),
        ("2w", 1209600),
        ("1d12h", 129600),
        (" 1H ", 3600),
    ],
)
def test_durations_in_seconds_or_with_units(text: str, seconds: int) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "h", "3 days", "1.5h", "-1", "1x", "h1"])
def test_what_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(InputError):
        duration(text)


def test_tfvars_lines_with_escapes_comments_and_literal_templates(tmp_path: Path) -> None:
    # Given a .tfvars-style file with comments, escapes and an escaped template
    path = tmp_path / "v.tfvars"
    path.write_text(
        '# a comment\n\n// another\na = "x \\"y\\" \\\\ z"  # trailing\n'
        'b="$${literal} and %%{ also }"\nc = "tab\\there"\n'
    )

    # Then each value is the string it denotes
    assert read_var_file(path) == {
        "a": 'x "y" \\ z',
        "b": "${literal} and %{ also }",
        "c": "tab\there",
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("n = 3", 'expected NAME = "value"'),
        ("n = <<EOT", 'expected NAME = "value"'),
        ('n = "${var.x}"', "templates"),
        ('n = "%{ if x }"', "templates"),
        ('n = "bad \\q escape"', "invalid escape"),
        ('1n = "x"', 'expected NAME = "value"'),
    ],
)
def test_tfvars_lines_it_cannot_take_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "v.tfvars"
    path.write_text(f'ok = "fine"\n{line}\n')
    with pytest.raises(InputError, match="line 2") as refused:
        read_var_file(path)
    assert message in str(refused.value)


def test_json_var_files_hold_an_object_of_strings(tmp_path: Path) -> None:
    good, array, number = tmp_path / "g.json", tmp_path / "a.json", tmp_path / "n.json"
    good.write_text('{"a": "1", "b": "two"}')
    array.write_text('["a"]')
    number.write_text('{"a": 1}')

    assert read_var_file(good) == {"a": "1", "b": "two"}
    with pytest.raises(InputError, match="must be a JSON object"):
        read_var_file(array)
    with pytest.raises(InputError, match="a must be a string"):
        read_var_file(number)


def test_flags_override_files_and_a_bare_name_reads_the_environment(tmp_path: Path) -> None:
    # Given two files and flags naming the same variables
    first, second = tmp_path / "1.tfvars", tmp_path / "2.json"
    first.write_text('a = "file1"\nb = "file1"\nc = "file1"\n')
    second.write_text('{"b": "file2"}')

    # When they are combined
    found = variables(
        ["c=flag", "secret"],
        [str(first), str(second)],
        environ={"TF_VAR_secret": "from env", "secret": "not this"},
    )

    # Then later sources win and the bare name came from TF_VAR_secret
    assert found == {"a": "file1", "b": "file2", "c": "flag", "secret": "from env"}


def test_a_bare_name_without_its_environment_variable_is_refused() -> None:
    with pytest.raises(InputError, match="TF_VAR_missing is not set"):
        variables(["missing"], environ={})


def test_a_value_may_hold_equals_signs_and_be_empty() -> None:
    assert variables(["a=b=c", "e="], environ={}) == {"a": "b=c", "e": ""}
