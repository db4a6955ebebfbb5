"""No silent passes: a module reading an input root its set's shape lacks is caught at
publication (refused, or a warning when the set asks for it), and sets of every shape
evaluate against their own document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runplane.adapters.rego import RegoEvaluator
from runplane.cli import main
from runplane.domain.errors import PolicyInputRootRefused
from runplane.domain.policy import (
    PolicyDefinition,
    PolicyModule,
    PolicySetContent,
    load_policy_set_dir,
)
from runplane.domain.policy_input import (
    PolicyInputs,
    RunMetadata,
    check_input_roots,
    input_roots,
)
from tests.unit.test_policy_input_shapes import META, show_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def policy_set(source: str, shape: str = "runplane", mode: str = "refuse") -> PolicySetContent:
    return PolicySetContent(
        name="roots",
        modules=(PolicyModule("check.rego", source),),
        policies=(PolicyDefinition("check", "hard_mandatory", "data.roots.deny"),),  # type: ignore[arg-type]
        input_shape=shape,
        unknown_input_roots=mode,
    )


HCP_STYLE = """package roots

import rego.v1

# input.tfplan in a comment is not a read
deny contains msg if {
\tsome rc in input.plan.resource_changes
\t"delete" in rc.change.actions
\tmsg := sprintf("%s: input.terraform in a string is not a read", [rc.address])
}
"""


def test_input_roots_are_found_lexically_with_their_lines() -> None:
    source = (
        "package p\nimport input.tfplan as tfplan\n"
        'x := input["tfrun"].workspace\n'
        "y := input.plan\n"
        "z := [1 | input[k]]\n"  # a variable key names no root
        "w := data.input.plan\n"  # not the input document
        "v := 1 with input as {}\n"
    )
    assert input_roots(source) == [("tfplan", 2), ("tfrun", 3), ("plan", 4)]
    assert input_roots(HCP_STYLE) == [("plan", 7)]


@pytest.mark.parametrize(
    ("shape", "root", "providers"),
    [
        ("runplane", "plan", ("plan",)),
        ("plan", "tfplan", ("tfplan",)),
        ("plan", "resource_changes", ("runplane", "bare")),
        ("bare", "spacelift", ("terraform",)),
        ("terraform", "nonsense", ()),
    ],
)
def test_a_root_the_shape_lacks_is_refused_naming_module_line_root_and_provider(
    shape: str, root: str, providers: tuple[str, ...]
) -> None:
    # Given a module reading input.<root> in a set of a shape that lacks it
    content = policy_set(f"package roots\n\ndeny := [x | x := input.{root}.y]\n", shape)
    # When publication checks its roots / Then it is refused, saying where and why
    with pytest.raises(PolicyInputRootRefused) as refused:
        check_input_roots(content)
    error = refused.value
    assert (error.module, error.line, error.root, error.providers) == (
        "check.rego",
        3,
        root,
        providers,
    )
    assert error.http_status == 422
    assert error.code == "policy_input_root_unknown"
    assert f"check.rego line 3 reads input.{root}" in error.message
    assert f"the {shape} input shape does not provide" in error.message
    for provider in providers:
        assert provider in error.message


def test_with_warn_the_same_set_passes_with_a_warning() -> None:
    content = policy_set(HCP_STYLE, "runplane", "warn")
    [warning] = check_input_roots(content)
    assert warning.startswith("check.rego line 7 reads input.plan")


def test_a_set_reading_its_own_shapes_roots_passes_silently() -> None:
    assert check_input_roots(policy_set(HCP_STYLE, "plan")) == []


@pytest.mark.parametrize(
    ("directory", "policy", "message"),
    [
        ("hcp-plan", "no_deletes", "test_thing.old would be deleted (workspace prod)"),
        ("spacelift-terraform", "tracked_deletes", "tracked run would delete test_thing.old"),
        (
            "scalr-tfplan",
            "known_names",
            "module.child.test_thing.c[0] gets its name only at apply time",
        ),
        (
            "conftest-bare",
            "allowed_providers",
            "test_thing.old comes from registry.terraform.io/evil/x, which is not approved",
        ),
    ],
)
def test_each_shapes_example_set_judges_its_own_document(
    directory: str, policy: str, message: str
) -> None:
    # Given a plan that deletes, names a resource at apply time, and uses an unknown
    # provider, and the example set written for one tool
    plan = show_json()
    plan["resource_changes"][0]["change"]["after_unknown"]["name"] = True
    del plan["resource_changes"][0]["change"]["after"]["name"]
    plan["resource_changes"][1]["provider_name"] = "registry.terraform.io/evil/x"
    content = load_policy_set_dir(EXAMPLES / directory)
    deny_delete = load_policy_set_dir(EXAMPLES / "deny-delete")

    # When it is evaluated beside a runplane set, each against its own shape
    results = RegoEvaluator(isolation="thread").evaluate(
        [content, deny_delete], PolicyInputs(plan, META)
    )

    # Then both judge the plan: the example's policy fails with its message
    by_name = {r.policy: r for r in results}
    assert by_name[policy].outcome == "failed"
    assert message in by_name[policy].messages
    assert by_name["deny_delete"].messages == ("test_thing.old would be deleted",)


def test_policy_test_warns_of_unknown_roots_and_values_hidden_for_want_of_a_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a set reading input.plan that asks for warnings, and a plan whose create
    # has no after_sensitive
    directory = tmp_path / "set"
    directory.mkdir()
    (directory / "check.rego").write_text(HCP_STYLE, encoding="utf-8")
    (directory / "policy-set.json").write_text(
        json.dumps(
            {
                "name": "roots",
                "unknown_input_roots": "warn",
                "policies": [
                    {"name": "check", "enforcement": "advisory", "query": "data.roots.deny"}
                ],
            }
        ),
        encoding="utf-8",
    )
    plan = show_json()
    del plan["resource_changes"][0]["change"]["after_sensitive"]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")

    # When it is tested
    status = main(["policy", "test", str(directory), "--plan", str(plan_file)])

    # Then it runs, and warns of both on stderr
    captured = capsys.readouterr()
    assert status == 0
    assert "warning: check.rego line 7 reads input.plan" in captured.err
    assert "no sensitivity map" in captured.err
    assert "module.child.test_thing.c[0] (after)" in captured.err
    assert "overall: passed" in captured.out


def test_policy_test_refuses_a_set_reading_a_root_its_shape_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "set"
    directory.mkdir()
    (directory / "check.rego").write_text(HCP_STYLE, encoding="utf-8")
    (directory / "policy-set.json").write_text(
        json.dumps(
            {
                "name": "roots",
                "policies": [
                    {"name": "check", "enforcement": "advisory", "query": "data.roots.deny"}
                ],
            }
        ),
        encoding="utf-8",
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(show_json()), encoding="utf-8")

    status = main(["policy", "test", str(directory), "--plan", str(plan_file)])

    captured = capsys.readouterr()
    assert status != 0
    assert "check.rego line 7 reads input.plan" in captured.err
    assert captured.out == ""


def test_run_metadata_defaults_say_nothing_unknown() -> None:
    inputs = PolicyInputs(show_json(), RunMetadata("w", "plan_only", "1.0.3"))
    assert "id" not in inputs.document("tfplan")["tfrun"]
    assert inputs.document("tfplan")["tfrun"]["is_dry"] is True
