"""Input shapes on real plans: a set packaged for a tool reads that tool's input, a
violating plan fails in the shape its packaging gives it, the same modules never pass
silently in another shape, the configuration section carries provisioners, and no
secret of the configuration reaches any shape.

Real plans come from the pinned engine (tests/real_plans.py); policies run on the real
evaluator (regorus, in a thread).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runplane.adapters.rego import RegoEvaluator
from runplane.domain.errors import PolicyInputRootRefused
from runplane.domain.policy import PolicySetContent, load_policy_set_dir
from runplane.domain.policy_input import SHAPES, PolicyInputs, RunMetadata, check_input_paths
from runplane.domain.policy_results import PolicyResult
from runplane.domain.policy_sanitize import canonical_json
from runplane.runner.plan_file import check_plan_json
from tests.unit.real_plans import PROVIDER, Engine, RealPlan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
SECRET = "hunter2-9c41e"
META = RunMetadata(workspace="prod", kind="plan_and_apply", engine_version="1.0.3")

ROOT = f"""
variable "secret" {{
  type      = string
  default   = "{SECRET}-default"
  sensitive = true
}}

resource "test_thing" "deploy" {{
  name    = "deploy"
  content = var.secret

  provisioner "local-exec" {{
    command = "make deploy"
  }}
  provisioner "remote-exec" {{
    inline = ["true"]
    connection {{
      type     = "ssh"
      host     = "deploy.example.com"
      password = "{SECRET}-connection"
    }}
  }}
}}

resource "test_thing" "plain" {{
  count   = 2
  name    = "plain-${{count.index}}"
  content = "hello"
}}

module "box" {{
  source = "./box"
  token  = "{SECRET}-module-input"
}}

output "password" {{
  value     = "{SECRET}-output"
  sensitive = true
}}
"""

BOX = (
    PROVIDER
    + """
variable "token" {
  type      = string
  sensitive = true
}

resource "test_thing" "inner" {
  name    = "inner"
  content = var.token
}
"""
)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RealPlan:
    """Creates with a local-exec provisioner, a sensitive variable, a module given a
    constant for a sensitive variable, and a sensitive output holding a constant."""
    engine = Engine(tmp_path_factory.mktemp("engine"))
    return engine.plan({"main.tf": ROOT, "box/main.tf": BOX})


def evaluate(content: PolicySetContent, plan: RealPlan) -> list[PolicyResult]:
    return RegoEvaluator(isolation="thread").evaluate([content], PolicyInputs(plan.document, META))


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


# Each tool's packaging, and a module written the way that tool's policies are: it
# denies a local-exec provisioner (configuration) and a created resource (changes).
PACKAGED = {
    "hcp": (
        "plan",
        {
            "policies.hcl": 'policy "guard" {\n  query = "data.guard.deny"\n'
            '  enforcement_level = "mandatory"\n}\n',
            "guard.rego": """package guard

import rego.v1

deny contains msg if {
\tsome resource in input.plan.configuration.root_module.resources
\tsome provisioner in resource.provisioners
\tprovisioner.type == "local-exec"
\tmsg := sprintf("%s runs local-exec", [resource.address])
}

deny contains msg if {
\tsome rc in input.plan.resource_changes
\t"create" in rc.change.actions
\tinput.run.workspace.name == "prod"
\tmsg := sprintf("%s is created in prod", [rc.address])
}
""",
        },
    ),
    "scalr": (
        "tfplan",
        {
            "scalr-policy.hcl": 'version = "v1"\n\npolicy "guard" {\n  enabled = true\n'
            '  enforcement_level = "hard-mandatory"\n}\n',
            "guard.rego": """package terraform

import input.tfplan as tfplan

deny[reason] {
\tresource := tfplan.configuration.root_module.resources[_]
\tresource.provisioners[_].type == "local-exec"
\treason := sprintf("%s runs local-exec", [resource.address])
}

deny[reason] {
\trc := tfplan.resource_changes[_]
\trc.change.actions[_] == "create"
\tnot input.tfrun.is_dry
\treason := sprintf("%s is created in prod", [rc.address])
}
""",
        },
    ),
    "spacelift": (
        "terraform",
        {
            "plan.rego": """package spacelift

import rego.v1

deny contains sprintf("%s runs local-exec", [resource.address]) if {
\tsome resource in input.terraform.configuration.root_module.resources
\tresource.provisioners[_].type == "local-exec"
}

deny contains sprintf("%s is created in prod", [rc.address]) if {
\tinput.spacelift.run.type == "TRACKED"
\tsome rc in input.terraform.resource_changes
\t"create" in rc.change.actions
}
""",
        },
    ),
    "conftest": (
        "bare",
        {
            "main.rego": """package main

deny[msg] {
\tresource := input.configuration.root_module.resources[_]
\tresource.provisioners[_].type == "local-exec"
\tmsg := sprintf("%s runs local-exec", [resource.address])
}

deny[msg] {
\trc := input.resource_changes[_]
\trc.change.actions[_] == "create"
\tmsg := sprintf("%s is created in prod", [rc.address])
}
""",
        },
    ),
}

# Reading resource changes only: every root it reads is also a root of the runplane
# shape, where only the path-level check tells that `change` is not there.
CHANGES_ONLY = {
    "main.rego": """package main

import rego.v1

deny contains msg if {
\tsome rc in input.resource_changes
\tsome action in rc.change.actions
\taction == "create"
\tmsg := sprintf("%s is created in prod", [rc.address])
}
"""
}

EXPECTED = {
    "test_thing.deploy runs local-exec",
    "test_thing.deploy is created in prod",
    "test_thing.plain[0] is created in prod",
    "module.box.test_thing.inner is created in prod",
}


@pytest.mark.parametrize("tool", sorted(PACKAGED))
def test_a_packaged_set_reads_its_tools_input_and_denies_a_violating_plan(
    tool: str, real: RealPlan, tmp_path: Path
) -> None:
    # Given a directory packaged for the tool, with no policy-set.json
    shape, files = PACKAGED[tool]
    content = load_policy_set_dir(write(tmp_path / tool, files))
    # Then it reads the tool's input, and publication finds nothing it lacks
    assert content.input_shape == shape
    assert check_input_paths(content) == []
    # When a real plan with a local-exec provisioner and creates is evaluated
    [result] = evaluate(content, real)
    # Then the policy fails with every finding, from the configuration and the changes
    assert result.outcome == "failed"
    assert set(result.messages) >= EXPECTED


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tool", [*sorted(PACKAGED), "changes-only"])
def test_the_same_modules_never_pass_silently_in_another_shape(
    tool: str, shape: str, real: RealPlan, tmp_path: Path
) -> None:
    # Given the tool's modules, declared (or mis-declared) with any shape
    files = PACKAGED[tool][1] if tool in PACKAGED else CHANGES_ONLY
    content = dataclasses.replace(
        load_policy_set_dir(write(tmp_path / tool, files)), input_shape=shape
    )
    # When publication checks them / Then they are refused, or they deny the plan
    refused: PolicyInputRootRefused | None = None
    try:
        check_input_paths(content)
    except PolicyInputRootRefused as error:
        refused = error
    if refused is not None:
        assert refused.module in {name for name in files if name.endswith(".rego")}
        return
    [result] = evaluate(content, real)
    assert result.outcome == "failed", f"{tool} modules passed silently in the {shape} shape"


def test_the_scalr_example_denies_a_real_local_exec_provisioner(real: RealPlan) -> None:
    # Given the Scalr-style example directory (scalr-policy.hcl)
    content = load_policy_set_dir(EXAMPLES / "scalr-style")
    assert content.input_shape == "tfplan"
    # When it judges a real plan whose resource has a local-exec provisioner
    by_name = {r.policy: r for r in evaluate(content, real)}
    # Then no_local_exec denies it, naming the resource
    assert by_name["no_local_exec"].outcome == "failed"
    assert by_name["no_local_exec"].messages == (
        "test_thing.deploy runs a local-exec provisioner on the runner",
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_no_constant_that_may_be_secret_reaches_any_shape(real: RealPlan, shape: str) -> None:
    # Given a real plan whose configuration holds the secret as a sensitive variable's
    # default, a provisioner's connection password, a module input for a sensitive
    # variable and a sensitive output's value; and whose planned values hold it too
    text = canonical_json(real.document).decode()
    assert text.count(SECRET) >= 4
    # When the shape's document is built / Then the secret appears nowhere in it
    document = PolicyInputs(real.document, META).document(shape)
    assert SECRET not in canonical_json(document).decode()


def test_the_configuration_keeps_what_the_plan_shows(real: RealPlan) -> None:
    # Given the plan JSON's configuration, as the engine wrote it
    configuration = PolicyInputs(real.document, META).document("bare")["configuration"]
    resources = {r["address"]: r for r in configuration["root_module"]["resources"]}
    # Then a constant the planned value shows unmasked is kept, references are kept,
    # and provisioners keep their types and constant commands
    plain = resources["test_thing.plain"]
    assert plain["expressions"]["content"] == {"constant_value": "hello"}
    assert plain["count_expression"] == {"constant_value": 2}
    deploy = resources["test_thing.deploy"]
    assert deploy["expressions"]["content"] == {"references": ["var.secret"]}
    assert [p["type"] for p in deploy["provisioners"]] == ["local-exec", "remote-exec"]
    assert deploy["provisioners"][0]["expressions"]["command"] == {"constant_value": "make deploy"}
    # And the module call keeps its source, with its input's constant masked
    box = configuration["root_module"]["module_calls"]["box"]
    assert box["source"] == "./box"
    assert box["expressions"]["token"] == {"constant_value": "(sensitive)"}
    assert box["module"]["variables"]["token"] == {"sensitive": True}


def test_the_real_plans_json_passes_the_runners_check(real: RealPlan) -> None:
    # The configuration the policies read was checked against the plan file's
    # snapshot before the runner believed it (runner/plan_config.py)
    check_plan_json(real.plan, real.document)
