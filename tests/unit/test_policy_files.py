"""Reading a policy set directory's files: modules, test modules and data files."""

from __future__ import annotations

from pathlib import Path

import pytest

from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy_files import data_files, read_modules


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root


def test_modules_tests_and_data_are_read_apart_hidden_ones_skipped(tmp_path: Path) -> None:
    # Given a directory with modules, test modules and data files, some hidden
    root = _write(
        tmp_path,
        {
            "b.rego": b"package b\n",
            "lib/a.rego": b"package a\n",
            "lib/a_test.rego": b"package a\n",
            "b.test.rego": b"package b\n",
            ".hidden/c.rego": b"package c\n",
            "lib/.d.rego": b"package d\n",
            "mock.json": b"{}",
            "lib/more.yaml": b"a: 1\n",
            ".git/x.json": b"{}",
            "policy-set.json": b"{}",
        },
    )
    # When each kind is read
    # Then each is named by its relative path, in name order
    assert [m.name for m in read_modules(root)] == ["b.rego", "lib/a.rego"]
    assert [m.name for m in read_modules(root, tests=True)] == ["b.test.rego", "lib/a_test.rego"]
    assert [p.relative_to(root).as_posix() for p in data_files(root)] == [
        "lib/more.yaml",
        "mock.json",
    ]


@pytest.mark.parametrize(
    ("name", "tests", "message"),
    [
        ("a.rego", False, "module a.rego is not UTF-8 text"),
        ("a_test.rego", True, "test module a_test.rego is not UTF-8 text"),
    ],
)
def test_a_module_that_is_not_text_is_refused_by_its_kind(
    tmp_path: Path, name: str, tests: bool, message: str
) -> None:
    root = _write(tmp_path, {name: b"package a\n\xff\n"})
    with pytest.raises(InvalidPolicySet) as refused:
        read_modules(root, tests=tests)
    assert refused.value.message == message
