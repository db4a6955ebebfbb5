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


TRUSTED_AUTHORS = """package spacelift

import rego.v1

deny contains sprintf("%s is not trusted", [input.spacelift.commit.author]) if {
	not input.spacelift.commit.author in {"alice"}
}

deny contains "drift reconciliation needs a person" if input.spacelift.run.drift_detection

deny contains "the stack needs the aws label" if not "aws" in input.spacelift.stack.labels
"""


def spacelift_set(tmp_path: Path) -> Path:
    directory = tmp_path / "trusted"
    directory.mkdir()
    (directory / "trusted.rego").write_text(TRUSTED_AUTHORS, encoding="utf-8")
    return directory


def test_a_run_context_gives_the_policies_the_runs_tags_commit_and_drift_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a Spacelift-layout set (no configuration file) trusting alice's commits on
    # stacks labelled aws, and a clean plan
    directory = spacelift_set(tmp_path)
    plan = saved_plan(tmp_path, ["update"])
    context = tmp_path / "run.json"

    def judged(document: object) -> list[str]:
        context.write_text(json.dumps(document), encoding="utf-8")
        argv = ["policy", "test", str(directory), "--plan", str(plan), "--json"]
        main([*argv, "--run-context", str(context)])
        printed = json.loads(capsys.readouterr().out)
        return sorted(m for r in printed["results"] for m in r["messages"])

    vcs = {"repository": "acme/infra", "branch": "main", "commit_sha": "a" * 40}
    # When alice's commit runs on a stack labelled aws / Then nothing is denied
    assert judged({"tags": ["aws"], "vcs": vcs | {"sender": "alice"}}) == []
    # When mallory's does, by a drift schedule, on an unlabelled stack / Then all three
    assert judged({"drift_detection": True, "vcs": vcs | {"sender": "mallory"}}) == [
        "drift reconciliation needs a person",
        "mallory is not trusted",
        "the stack needs the aws label",
    ]
    # When the run came from no repository / Then the empty author is not trusted either
    assert judged({"tags": ["aws"]}) == [" is not trusted"]


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ([], "the run context is not a JSON object"),
        ({"labels": ["aws"]}, "unknown field(s) labels"),
        ({"tags": "aws"}, "tags must be a list of strings"),
        ({"drift_detection": "yes"}, "drift_detection must be true or false"),
        ({"vcs": {"branch": "main"}}, "lacks commit_sha, repository"),
        ({"vcs": {"repository": "a/b", "branch": "m", "commit_sha": "c", "pr": 1}}, "pr"),
        ({"kind": "destroy"}, "kind 'destroy' is not one of"),
    ],
)
def test_a_bad_run_context_is_a_clear_local_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: object, says: str
) -> None:
    # Given a run context that is not one
    context = tmp_path / "run.json"
    context.write_text(json.dumps(document), encoding="utf-8")
    plan = saved_plan(tmp_path, ["update"])
    # When a set is tested with it
    argv = ["policy", "test", str(spacelift_set(tmp_path)), "--plan", str(plan)]
    status = main([*argv, "--run-context", str(context)])
    # Then it is a local error saying what is wrong, on one line
    err = capsys.readouterr().err
    assert status == 3
    assert says in err
    assert len(err.strip().splitlines()) == 1
