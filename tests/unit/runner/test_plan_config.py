"""``runplane.runner.plan_config``: the configuration's resources and provisioners in a
plan's JSON, checked against the configuration snapshot in the saved plan.

Real plans from the pinned engine (tests/unit/real_plans.py): native and JSON files,
an override file replacing a resource's provisioners, a module with its own
provisioner. The forgeries edit copies of the engine's own JSON.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from runplane.runner.plan_config import check_configuration, configuration_blocks
from runplane.runner.plan_file import PlanMismatch, check_plan_json
from tests.unit.real_plans import PROVIDER, Engine, RealPlan

MAIN = """
resource "test_thing" "web" {
  name = "web"
  provisioner "local-exec" {
    command = "echo one # not a comment: a string"
  }
  provisioner "local-exec" {
    command = <<-EOT
      provisioner "remote-exec" { }
    EOT
  }
}

resource "test_thing" "replaced" {
  name = "replaced"
  provisioner "local-exec" {
    command = "echo original"
  }
}

module "box" {
  source = "./box"
}
"""

OVERRIDE = """
resource "test_thing" "replaced" {
  provisioner "remote-exec" {
    inline = ["true"]
    connection {
      type = "ssh"
      host = "example.com"
    }
  }
}
"""

JSON_FILE = """{
  "resource": {
    "test_thing": {
      "from_json": {
        "name": "from-json",
        "provisioner": [{"local-exec": {"command": "echo json"}}]
      }
    }
  }
}
"""

# Labels may be bare identifiers in HCL.
BOX = (
    PROVIDER
    + 'resource test_thing inner {\n  name = "inner"\n'
    + '  provisioner local-exec {\n    command = "echo inner"\n  }\n}\n'
)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RealPlan:
    engine = Engine(tmp_path_factory.mktemp("engine"))
    return engine.plan(
        {
            "main.tf": MAIN,
            "main_override.tf": OVERRIDE,
            "extra.tf.json": JSON_FILE,
            "box/main.tf": BOX,
        }
    )


def resources(document: dict[str, Any], module: str | None = None) -> list[dict[str, Any]]:
    root = document["configuration"]["root_module"]
    found: list[dict[str, Any]] = (
        root["module_calls"][module]["module"]["resources"] if module else root["resources"]
    )
    return found


def entry(document: dict[str, Any], address: str, module: str | None = None) -> dict[str, Any]:
    return next(r for r in resources(document, module) if r["address"] == address)


def test_the_snapshot_declares_what_the_engine_shows(real: RealPlan) -> None:
    # Given a plan of native, JSON and override files and a module
    # When its snapshot is read
    blocks = configuration_blocks(real.plan)
    # Then every resource and its provisioners are found, strings and heredocs that
    # look like blocks are not, and the override's provisioners replace the original's
    assert blocks == {
        "": {
            ("managed", "test_thing", "web"): Counter({"local-exec": 2}),
            ("managed", "test_thing", "replaced"): Counter({"remote-exec": 1}),
            ("managed", "test_thing", "from_json"): Counter({"local-exec": 1}),
        },
        "box": {("managed", "test_thing", "inner"): Counter({"local-exec": 1})},
    }
    # And the engine's own JSON says the same, so the whole check accepts it
    assert [p["type"] for p in entry(real.document, "test_thing.replaced")["provisioners"]] == [
        "remote-exec"
    ]
    check_plan_json(real.plan, real.document)


def forged(real: RealPlan) -> dict[str, Any]:
    return copy.deepcopy(real.document)


def test_a_provisioner_left_out_of_the_json_is_refused(real: RealPlan) -> None:
    # Given the JSON with the module's local-exec provisioner removed
    document = forged(real)
    del entry(document, "test_thing.inner", "box")["provisioners"]
    # When it is checked / Then it is refused, naming the resource and module only
    with pytest.raises(PlanMismatch) as refused:
        check_configuration(real.plan, document)
    assert str(refused.value) == (
        "configuration: the provisioners of test_thing.inner in module box differ from "
        "the plan file's configuration"
    )
    assert "echo" not in str(refused.value)


def test_a_provisioner_of_another_type_is_refused(real: RealPlan) -> None:
    document = forged(real)
    entry(document, "test_thing.web")["provisioners"][1]["type"] = "chef"
    with pytest.raises(PlanMismatch, match=r"provisioners of test_thing\.web in the root module"):
        check_plan_json(real.plan, document)


def test_a_resource_left_out_or_added_is_refused(real: RealPlan) -> None:
    document = forged(real)
    resources(document).remove(entry(document, "test_thing.from_json"))
    with pytest.raises(PlanMismatch, match=r"declares test_thing\.from_json, which the plan JSON"):
        check_configuration(real.plan, document)

    document = forged(real)
    extra = {**entry(document, "test_thing.web"), "address": "test_thing.ghost", "name": "ghost"}
    resources(document).append(extra)
    with pytest.raises(PlanMismatch, match=r"lists test_thing\.ghost in the root module"):
        check_configuration(real.plan, document)
