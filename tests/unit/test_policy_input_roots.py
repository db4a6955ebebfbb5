"""No silent passes: a module reading an input root its set's shape lacks is caught at
publication (refused, or a warning when the set asks for it), and sets of every shape
evaluate against their own document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runplane.adapters.rego import RegoEvaluator
from runplane.cli import main
from runplane.domain.errors import PolicyInputPathRefused, PolicyInputRootRefused
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
    inferred_shape,
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


def test_policy_test_warns_of_unknown_roots_and_values_read_without_a_map(
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
    assert "read as marking nothing sensitive: module.child.test_thing.c[0] (after)" in (
        captured.err
    )
    assert "overall: passed" in captured.out


def test_policy_test_reads_a_mock_without_maps_as_written_and_denies_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a conftest directory denying a secret-looking password in plain text, and a
    # hand-written mock of a violating plan with no sensitivity maps at all
    directory = tmp_path / "set"
    directory.mkdir()
    (directory / "main.rego").write_text(
        "package main\n\nimport rego.v1\n\n"
        "deny contains rc.address if {\n\tsome rc in input.resource_changes\n"
        '\tstartswith(rc.change.after.password, "s3cr3t")\n}\n',
        encoding="utf-8",
    )
    plan = show_json()
    for entry in plan["resource_changes"]:
        entry["change"].pop("before_sensitive")
        entry["change"].pop("after_sensitive")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")

    # When it is tested / Then the policy sees the mock's values and denies it
    assert main(["policy", "test", str(directory), "--plan", str(plan_file)]) == 1
    captured = capsys.readouterr()
    assert "- module.child.test_thing.c[0]" in captured.out
    assert "read as marking nothing sensitive" in captured.err
    # While a run, given the same plan, hides those values whole (the engine always
    # writes the maps; a plan without them is not believed)
    after = PolicyInputs(plan, META).document("bare")["resource_changes"][0]["change"]["after"]
    assert after == "(sensitive)"


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


# -- below the roots ----------------------------------------------------------------------------


def module(body: str) -> str:
    return f"package roots\n\nimport rego.v1\n\n{body}"


@pytest.mark.parametrize(
    ("shape", "body", "line", "path", "says"),
    [
        (  # a conftest rule in the runplane shape: the silent pass
            "runplane",
            "deny contains rc.address if {\n"
            "\trc := input.resource_changes[_]\n"
            '\trc.change.actions[_] == "delete"\n}\n',
            7,
            "input.resource_changes[_].change",
            "input.resource_changes[_] has action_reason, actions, address, after, before",
        ),
        (
            "runplane",
            'deny contains "x" if input["resource_changes"][0]["change"]\n',
            5,
            "input.resource_changes[0].change",
            "the bare shape provides it",
        ),
        (
            "plan",
            "deny contains rc.address if {\n"
            "\tsome rc in input.plan.resource_changes\n"
            '\t"delete" in rc.actions\n}\n',
            7,
            "input.plan.resource_changes[_].actions",
            "no input shape provides it",
        ),
        (
            "bare",
            'deny contains "x" if {\n\tevery rc in input.resource_changes {\n'
            "\t\trc.after.bucket\n\t}\n}\n",
            7,
            "input.resource_changes[_].after",
            "the runplane shape provides it",
        ),
        (  # chained names
            "tfplan",
            "deny contains rc.address if {\n"
            "\trc := input.tfplan.resource_changes[_]\n"
            "\tchange := rc.change\n"
            "\tchange.after_values.acl\n}\n",
            8,
            "input.tfplan.resource_changes[_].change.after_values",
            "input.tfplan.resource_changes[_].change has actions, after, after_sensitive",
        ),
        (  # an import alias, and a field the engine does not write
            "tfplan",
            "import input.tfplan as tfplan\n\n"
            "deny contains d.address if {\n\tsome d in tfplan.resource_drift\n}\n",
            7,
            "input.tfplan.resource_drift",
            "the engine (Terraform 1.0) does not write it",
        ),
        (  # a rule that is a path, read in another rule
            "runplane",
            "changes := input.resource_changes\n\n"
            "deny contains c.address if {\n\tsome c in changes\n\tc.change\n}\n",
            9,
            "input.resource_changes[_].change",
            "the bare shape provides it",
        ),
        (  # a fact Runplane does not have
            "tfplan",
            'deny contains "too dear" if input.tfrun.cost_estimate.proposed_monthly_cost > 9\n',
            5,
            "input.tfrun.cost_estimate",
            "Runplane does not have it",
        ),
        (
            "runplane",
            'deny contains "x" if input.run.workspace.name == "prod"\n',
            5,
            "input.run.workspace.name",
            "input.run.workspace is a single value with nothing below it",
        ),
        (
            "bare",
            'deny contains "x" if input.resource_changes.address\n',
            5,
            "input.resource_changes.address",
            "input.resource_changes is an array: its elements are read with [_]",
        ),
        (  # a comprehension's head, bound in its body
            "runplane",
            "deny := [rc.change.actions | some rc in input.resource_changes]\n",
            5,
            "input.resource_changes[_].change",
            "the bare shape provides it",
        ),
    ],
)
def test_a_path_the_shape_lacks_is_refused_with_its_line_and_why(
    shape: str, body: str, line: int, path: str, says: str
) -> None:
    # Given a module reading, directly or through a name, a path the shape never has
    content = policy_set(module(body), shape)
    # When publication checks it / Then it is refused at that line, saying why
    with pytest.raises(PolicyInputRootRefused) as refused:
        check_input_roots(content)
    error = refused.value
    assert error.http_status == 422
    assert error.line == line
    assert f"check.rego line {line} reads {path}, which the {shape} input shape" in error.message
    assert says in error.message
    assert "pass silently" in error.message
    if path.count(".") + path.count("[") > 1:
        assert isinstance(error, PolicyInputPathRefused)
        assert error.code == "policy_input_path_unknown"
        assert error.path == path


@pytest.mark.parametrize(
    ("shape", "body"),
    [
        # values of the plan are open: anything below them may be read
        (
            "bare",
            "deny contains rc.address if {\n\tsome rc in input.resource_changes\n"
            "\trc.change.after.anything.deep[_].x\n}\n",
        ),
        (
            "plan",
            "deny contains k if {\n\tsome k, p in input.plan.configuration.provider_config\n"
            '\tp.expressions.region.constant_value == "us-east-1"\n}\n',
        ),
        ("bare", "deny contains k if {\n\tsome k, o in input.output_changes\n\to.after\n}\n"),
        (
            "tfplan",
            "deny contains r.address if {\n\tsome r in input.tfplan.prior_state.values"
            ".root_module.resources\n\tr.values.tags\n}\n",
        ),
        # what the scan does not follow: parameters, walk, names bound twice, mocks
        ("runplane", "f(rc) := rc.change.actions\n"),
        (
            "bare",
            "deny contains p if {\n\twalk(input.configuration.root_module, [p, v])\n"
            "\tv.resources[_].bogus\n}\n",
        ),
        (
            "runplane",
            "deny contains x if {\n\trc := input.resource_changes[_]\n"
            "\tx := [rc.change | some rc in data.other]\n}\n",
        ),
        ("runplane", 'test_x if {\n\tdata.roots.deny with input as {"plan": 1}\n}\n'),
        ("runplane", 'deny contains "x" if object.get(input, ["plan", "y"], false)\n'),
    ],
)
def test_what_the_shape_provides_or_the_scan_cannot_follow_is_not_refused(
    shape: str, body: str
) -> None:
    assert check_input_roots(policy_set(module(body), shape)) == []


def test_the_setting_has_a_better_name_and_keeps_its_first_one() -> None:
    from runplane.domain.errors import InvalidPolicySet
    from runplane.domain.policy import policy_set_from_document

    # Given the same set warned through the new name and the old one
    document = policy_set(HCP_STYLE).to_document()
    new = policy_set_from_document({**document, "unknown_input_paths": "warn"})
    old = policy_set_from_document({**document, "unknown_input_roots": "warn"})
    # Then both warn, and are the same content with the same digest
    assert new == old
    assert new.digest() == old.digest()
    [warning] = check_input_roots(new)
    assert warning.startswith("check.rego line 7 reads input.plan")
    # And giving both, differently, is refused
    with pytest.raises(InvalidPolicySet, match="name the same setting"):
        policy_set_from_document(
            {**document, "unknown_input_paths": "warn", "unknown_input_roots": "refuse"}
        )


@pytest.mark.parametrize(
    ("sources", "shape"),
    [
        (["package spacelift\n\ndeny[m] { input.spacelift.run.type == m }\n"], "terraform"),
        (["package a\n\nx := input.terraform.resource_changes\n", "package b\n"], "terraform"),
        (["package t\n\nimport input.tfplan as tfplan\n"], "tfplan"),
        (["package t\n\nx := input.plan.resource_changes\n"], "plan"),
        (["package main\n\ndeny[m] { input.resource_changes[_].address == m }\n"], "bare"),
        (["package main\n\ndeny[m] { m := 1 }\n"], "bare"),
    ],
)
def test_a_directory_without_configuration_reads_the_input_its_modules_read(
    sources: list[str], shape: str
) -> None:
    assert inferred_shape(sources) == shape


def test_policy_test_names_the_rules_undefined_on_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a conftest directory whose complete deny rule has no value unless something
    # is deleted, and a plan that deletes nothing the rule looks for
    directory = tmp_path / "set"
    directory.mkdir()
    (directory / "main.rego").write_text(
        module(
            "deny := msgs if {\n\tsome rc in input.resource_changes\n"
            '\trc.type == "aws_s3_bucket"\n\tmsgs := [rc.address]\n}\n\n'
            "helper := true\n"
        ).replace("package roots", "package main"),
        encoding="utf-8",
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(show_json()), encoding="utf-8")

    # When it is tested against the plan
    status = main(["policy", "test", str(directory), "--plan", str(plan_file)])

    # Then it passes, and says that its policy passed only because the rule had no value
    captured = capsys.readouterr()
    assert status == 0
    assert "undefined on this plan: main.deny\n" in captured.out
    assert "warning: policy main.deny passed because data.main.deny had no value" in captured.err
    # And the JSON form lists it too
    assert main(["policy", "test", str(directory), "--plan", str(plan_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["undefined_rules"] == ["main.deny"]
