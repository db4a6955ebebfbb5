"""`runplane policy test`: a policy author's loop, with the production evaluator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runplane.cli import main

DENY_DELETE = Path(__file__).resolve().parents[2] / "examples" / "policies" / "deny-delete"


def saved_plan(tmp_path: Path, actions: list[str]) -> Path:
    plan = {
        "format_version": "0.2",
        "terraform_version": "1.0.3",
        "resource_changes": [
            {
                "address": "aws_s3_bucket.logs",
                "mode": "managed",
                "type": "aws_s3_bucket",
                "name": "logs",
                "provider_name": "registry.terraform.io/hashicorp/aws",
                "change": {
                    "actions": actions,
                    "before": {"bucket": "logs"},
                    "after": None if actions == ["delete"] else {"bucket": "logs"},
                    "after_unknown": {},
                    "before_sensitive": {},
                    "after_sensitive": {} if actions != ["delete"] else False,
                },
            }
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    return path


def test_a_violating_plan_fails_with_the_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a saved plan deleting a bucket
    plan = saved_plan(tmp_path, ["delete"])
    # When the deny-delete set is tested against it
    status = main(["policy", "test", str(DENY_DELETE), "--plan", str(plan)])
    # Then it exits 1 and says which policy failed and why
    out = capsys.readouterr().out
    assert status == 1
    assert "failed   deny_delete (hard_mandatory)" in out
    assert "aws_s3_bucket.logs would be deleted" in out
    assert out.strip().endswith("overall: hard_failed")


def test_a_clean_plan_passes_and_json_matches_the_review_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = saved_plan(tmp_path, ["update"])
    status = main(["policy", "test", str(DENY_DELETE), "--plan", str(plan), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["outcome"] == "passed"
    assert [r["outcome"] for r in report["results"]] == ["passed"]


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    # Given a command whose output goes to a pipe the reader has already closed
    # (as with `runplane ... --json | head -1`)
    plan = saved_plan(tmp_path, ["update"])
    read, write = os.pipe()
    os.close(read)
    # When it prints
    command = ["policy", "test", str(DENY_DELETE), "--plan", str(plan), "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "runplane.cli", *command],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    os.close(write)
    # Then it stops with the shell's SIGPIPE status and says nothing
    assert done.returncode == 141
    assert done.stderr == ""


def test_the_directory_may_be_given_with_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a saved plan deleting a bucket
    plan = saved_plan(tmp_path, ["delete"])
    # When the set is named with --dir instead of the positional argument
    status = main(["policy", "test", "--dir", str(DENY_DELETE), "--plan", str(plan)])
    # Then it is evaluated the same way
    assert status == 1
    assert "aws_s3_bucket.logs would be deleted" in capsys.readouterr().out
    # And the same directory both ways is accepted
    assert (
        main(["policy", "test", str(DENY_DELETE), "--dir", str(DENY_DELETE), "--plan", str(plan)])
        == 1
    )


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--dir", "elsewhere"], "two directories given"),
        ([], "pass the policy set directory: --dir DIR"),
    ],
)
def test_two_directories_or_none_is_bad_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    plan = saved_plan(tmp_path, ["delete"])
    positional = [str(DENY_DELETE)] if extra else []
    # When the command names two different directories, or none
    status = main(["policy", "test", *positional, *extra, "--plan", str(plan)])
    # Then it exits 2 with one line saying so, and evaluates nothing
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.startswith(f"error: {said}")
    assert "overall" not in captured.out
