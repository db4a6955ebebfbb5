"""Input shapes: every document a policy set can declare, built from one sanitized plan."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import load_policy_set_dir, policy_set_from_document
from runplane.domain.policy_configuration import sanitized_configuration
from runplane.domain.policy_input import SHAPE_ROOTS, SHAPES, PolicyInputs
from runplane.domain.policy_run import RunMetadata, RunOrigin, VcsOrigin
from runplane.domain.policy_sanitize import canonical_json, input_digest, sanitize_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
SECRET = "s3cr3t-7f1c"
META = RunMetadata(workspace="prod", kind="plan_and_apply", engine_version="1.0.3")

# The configuration block as Terraform 1.0.3's `show -json` writes it for a root module
# with two configurations of one provider (one aliased), a sensitive variable with a
# default, and a local module call passing a constant.
CONFIGURATION: dict[str, Any] = {
    "provider_config": {
        "module.child:test": {
            "name": "test",
            "version_constraint": ">= 0.1.0",
            "module_address": "module.child",
        },
        "test": {
            "name": "test",
            "version_constraint": "0.1.0",
            "expressions": {"api_key": {"constant_value": SECRET}},
        },
        "test.second": {"name": "test", "alias": "second", "version_constraint": "0.1.0"},
    },
    "root_module": {
        "resources": [
            {
                "address": "test_thing.a",
                "mode": "managed",
                "type": "test_thing",
                "name": "a",
                "provider_config_key": "test",
                "expressions": {"name": {"constant_value": SECRET}},
                "schema_version": 1,
            }
        ],
        "module_calls": {
            "child": {
                "source": "./mod",
                "expressions": {"label": {"constant_value": SECRET}},
                "module": {
                    "resources": [
                        {
                            "address": "test_thing.c",
                            "mode": "managed",
                            "type": "test_thing",
                            "name": "c",
                            "provider_config_key": "child:test",
                            "provisioners": [
                                {
                                    "type": "local-exec",
                                    "expressions": {
                                        "command": {"constant_value": "make deploy"},
                                        "connection": [{"password": {"constant_value": SECRET}}],
                                    },
                                }
                            ],
                            "expressions": {
                                "name": {"constant_value": "c"},
                                "password": {"constant_value": SECRET},
                                "rules": [
                                    {"port": {"constant_value": 443}},
                                    {"port": {"references": ["var.port"]}},
                                ],
                            },
                            "schema_version": 1,
                            "count_expression": {"constant_value": 1},
                        }
                    ],
                    "module_calls": {
                        "grandchild": {
                            "source": "app.terraform.io/acme/net/aws",
                            "version_constraint": "~> 2.0",
                            "expressions": {"token": {"constant_value": SECRET}},
                        }
                    },
                    "variables": {"label": {}},
                },
            }
        },
        "outputs": {
            "token": {"sensitive": True, "expression": {"constant_value": SECRET}},
            "name": {"expression": {"references": ["module.child.name"]}},
        },
        "variables": {"token": {"default": SECRET, "sensitive": True}},
    },
}


def show_json() -> dict[str, Any]:
    """A `show -json` plan: a create with unknown and sensitive attributes, a delete,
    and a sensitive and a plain output."""
    return {
        "format_version": "0.2",
        "terraform_version": "1.0.3",
        "variables": {"token": {"value": SECRET}},
        "planned_values": {"root_module": {}},
        "prior_state": {"values": {"root_module": {}}},
        "resource_changes": [
            {
                "address": "module.child.test_thing.c[0]",
                "module_address": "module.child",
                "mode": "managed",
                "type": "test_thing",
                "name": "c",
                "index": 0,
                "provider_name": "registry.terraform.io/runplane/test",
                "change": {
                    "actions": ["create"],
                    "before": None,
                    "after": {
                        "name": "c",
                        "password": SECRET,
                        "tags": {"owner": "platform"},
                        "rules": [{"port": 443}, {"port": 80}],
                    },
                    "after_unknown": {"id": True, "rules": [{"cidr": True}, {}], "tags": {}},
                    "before_sensitive": False,
                    "after_sensitive": {"password": True, "rules": [{}, {}], "tags": {}},
                },
            },
            {
                "address": "test_thing.old",
                "mode": "managed",
                "type": "test_thing",
                "name": "old",
                "provider_name": "registry.terraform.io/runplane/test",
                "change": {
                    "actions": ["delete"],
                    "before": {"name": "old", "password": SECRET},
                    "after": None,
                    "after_unknown": {},
                    "before_sensitive": {"password": True},
                    "after_sensitive": False,
                },
            },
        ],
        "output_changes": {
            "token": {
                "actions": ["create"],
                "before": None,
                "after": SECRET,
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": True,
            },
            "name": {
                "actions": ["create"],
                "before": None,
                "after": "c",
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": False,
            },
        },
        "configuration": CONFIGURATION,
    }


def test_the_plan_shape_keeps_terraforms_change_structure() -> None:
    # Given a plan creating a resource with unknown and sensitive attributes
    inputs = PolicyInputs(show_json(), META)

    # When the HCP-style document is built
    document = inputs.document("plan")

    # Then input.plan is shaped like `show -json`, with run metadata and configuration
    assert set(document) == {"plan", "run", "configuration"}
    plan = document["plan"]
    assert plan["format_version"] == "0.2"
    assert plan["terraform_version"] == "1.0.3"
    created, deleted = plan["resource_changes"]
    assert {k: created[k] for k in created if k != "change"} == {
        "address": "module.child.test_thing.c[0]",
        "module_address": "module.child",
        "mode": "managed",
        "type": "test_thing",
        "name": "c",
        "index": 0,
        "provider_name": "registry.terraform.io/runplane/test",
    }
    # unknown values are left out of `after` and marked true in `after_unknown`
    assert created["change"] == {
        "actions": ["create"],
        "before": None,
        "after": {
            "name": "c",
            "password": "(sensitive)",
            "tags": {"owner": "platform"},
            "rules": [{"port": 443}, {"port": 80}],
        },
        "after_unknown": {"id": True, "rules": [{"cidr": True}, False]},
        "before_sensitive": False,
        "after_sensitive": {"password": True},
    }
    assert deleted["change"]["before"] == {"name": "old", "password": "(sensitive)"}
    assert deleted["change"]["after"] is None
    assert deleted["change"]["after_unknown"] is False
    assert plan["output_changes"]["token"]["after"] == "(sensitive)"
    assert plan["output_changes"]["name"]["after"] == "c"
    assert document["run"] == {
        "kind": "plan_and_apply",
        "message": "",
        "commit_sha": None,
        "speculative": False,
        "is_destroy": False,
        "workspace": {"id": "prod", "name": "prod", "tags": []},
    }
    assert document["configuration"] == plan["configuration"]
    # and a variable the configuration declares sensitive has its value masked
    assert plan["variables"] == {"token": {"value": "(sensitive)"}}


def test_an_unknown_value_under_a_sensitive_one_reveals_nothing_below_it() -> None:
    # Given a sensitive map holding an unknown key
    plan = show_json()
    change = plan["resource_changes"][0]["change"]
    change["after"]["secret_map"] = {"visible_key_name": "x"}
    change["after_sensitive"]["secret_map"] = True
    change["after_unknown"]["secret_map"] = {"hidden_key_name": True}

    # When the plan is shaped
    document = PolicyInputs(plan, META).document("bare")

    # Then the map is hidden whole and neither of its keys shows anywhere
    after_change = document["resource_changes"][0]["change"]
    assert after_change["after"]["secret_map"] == "(sensitive)"
    assert "secret_map" not in after_change["after_unknown"]
    text = canonical_json(document).decode()
    assert "visible_key_name" not in text
    assert "hidden_key_name" not in text


def test_values_without_a_sensitivity_map_are_hidden_whole_and_reported() -> None:
    # Given a plan whose create has no after_sensitive (an older or hand-made plan)
    plan = show_json()
    del plan["resource_changes"][0]["change"]["after_sensitive"]
    inputs = PolicyInputs(plan, META)

    # When it is shaped
    after = inputs.document("tfplan")["tfplan"]["resource_changes"][0]["change"]

    # Then the whole value is hidden, marked sensitive, and reported
    assert after["after"] == "(sensitive)"
    assert after["after_sensitive"] is True
    assert inputs.hidden_whole == ["module.child.test_thing.c[0] (after)"]
    assert PolicyInputs(show_json(), META).hidden_whole == []


@pytest.mark.parametrize("shape", SHAPES)
def test_no_shape_shows_a_sensitive_value_or_a_configuration_constant(shape: str) -> None:
    # Given a plan whose secret is a sensitive attribute, a sensitive output, a variable,
    # a provider argument, a resource argument and a module input
    inputs = PolicyInputs(show_json(), META)
    # When the shape's document is built / Then the secret appears nowhere in it
    assert SECRET not in canonical_json(inputs.document(shape)).decode()


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_provides_exactly_its_declared_roots(shape: str) -> None:
    document = PolicyInputs(show_json(), META).document(shape)
    assert set(document) == SHAPE_ROOTS[shape]


@pytest.mark.parametrize("shape", SHAPES)
def test_documents_and_digests_are_deterministic(shape: str) -> None:
    # Given the same plan twice, once with every object's keys in reverse order
    def reversed_keys(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reversed_keys(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [reversed_keys(v) for v in value]
        return value

    first = PolicyInputs(show_json(), META)
    second = PolicyInputs(reversed_keys(show_json()), META)
    # When each builds the shape / Then the documents and digests are the same
    assert canonical_json(first.document(shape)) == canonical_json(second.document(shape))
    assert first.digest(shape) == second.digest(shape) == input_digest(first.document(shape))
    # And the text the evaluator loads is the very text the digest covers
    assert first.canonical(shape) == canonical_json(first.document(shape))
    assert first.digest(shape) == "sha256:" + hashlib.sha256(first.canonical(shape)).hexdigest()


def test_the_runplane_shape_is_the_unchanged_sanitized_document() -> None:
    plan = show_json()
    expected = sanitize_plan(
        plan, workspace="prod", run_kind="plan_and_apply", engine_version="1.0.3"
    )
    assert PolicyInputs(copy.deepcopy(plan), META).document("runplane") == expected


def test_shapes_differ_and_so_do_their_digests() -> None:
    inputs = PolicyInputs(show_json(), META)
    digests = {shape: inputs.digest(shape) for shape in SHAPES}
    assert len(set(digests.values())) == len(SHAPES)


def test_run_metadata_in_each_tools_field_names() -> None:
    # Given a speculative run of a tagged workspace, from a pull request's commit
    vcs = VcsOrigin(
        repository="acme/infra",
        branch="main",
        commit_sha="a" * 40,
        working_directory="envs/prod",
        event="pull_request",
        sender="alice",
        pull_request=7,
        pull_request_title="Bigger disks",
        pull_request_author="bob",
    )
    origin = RunOrigin(message="from GitHub", vcs=vcs)
    meta = RunMetadata(
        workspace="prod",
        kind="speculative",
        engine_version="1.0.3",
        run_id="run-1",
        created_at="2026-12-01T09:00:00+00:00",
        workspace_id="ws-1",
        tags=("aws", "team:platform"),
        origin=lambda: origin,
    )
    inputs = PolicyInputs(show_json(), meta)
    # Then HCP, Scalr and Spacelift see it in their own terms
    assert inputs.document("plan")["run"] == {
        "id": "run-1",
        "created_at": "2026-12-01T09:00:00+00:00",
        "kind": "speculative",
        "message": "from GitHub",
        "commit_sha": "a" * 40,
        "speculative": True,
        "is_destroy": False,
        "workspace": {"id": "ws-1", "name": "prod", "tags": ["aws", "team:platform"]},
    }
    assert inputs.document("tfplan")["tfrun"] == {
        "id": "run-1",
        "created_at": "2026-12-01T09:00:00+00:00",
        "message": "from GitHub",
        "is_destroy": False,
        "is_dry": True,
        "workspace": {"id": "ws-1", "name": "prod", "tags": {"aws": "", "team:platform": ""}},
        "vcs": {
            "repository_id": "acme/infra",
            "path": "envs/prod",
            "branch": "main",
            "commit": {"sha": "a" * 40, "author": {"username": "alice"}},
            "pull_request": {"id": 7, "title": "Bigger disks", "author": "bob"},
        },
    }
    spacelift = inputs.document("terraform")["spacelift"]
    commit = {"author": "alice", "branch": "main", "hash": "a" * 40, "message": ""}
    assert spacelift["commit"] == commit
    assert {k: v for k, v in spacelift["run"].items() if k != "changes"} == {
        "id": "run-1",
        "created_at": "2026-12-01T09:00:00+00:00",
        "type": "PROPOSED",
        "state": "PLANNING",
        "commit": commit,
        "drift_detection": False,
    }
    assert spacelift["stack"] == {
        "id": "ws-1",
        "name": "prod",
        "labels": ["aws", "team:platform"],
        "repository": "acme/infra",
        "branch": "main",
        "project_root": "envs/prod",
    }
    tracked = PolicyInputs(show_json(), META).document("terraform")["spacelift"]["run"]
    assert tracked["type"] == "TRACKED"


def test_a_run_from_no_repository_says_so_as_each_tool_does() -> None:
    # Given a run uploaded from a laptop (no commit), which a drift schedule did not start
    inputs = PolicyInputs(show_json(), META)
    # Then HCP's commit is null, Scalr's vcs is null, and Spacelift's commit is there but
    # empty, so an allow list of authors denies rather than passes
    assert inputs.document("plan")["run"]["commit_sha"] is None
    assert inputs.document("tfplan")["tfrun"]["vcs"] is None
    spacelift = inputs.document("terraform")["spacelift"]
    assert spacelift["commit"] == {"author": "", "branch": "", "hash": "", "message": ""}
    assert spacelift["run"]["drift_detection"] is False
    assert spacelift["stack"] == {"id": "prod", "name": "prod", "labels": []}


def test_spacelift_changes_list_what_the_plan_changes_with_masked_values() -> None:
    # Given a plan creating a resource with a sensitive attribute and deleting another
    changes = PolicyInputs(show_json(), META).document("terraform")["spacelift"]["run"]["changes"]
    # Then each change is Spacelift's entry: action, entity (values already masked), phase
    by_address = {c["entity"]["address"]: c for c in changes}
    created = by_address["module.child.test_thing.c[0]"]
    assert created["action"] == "added"
    assert created["phase"] == "plan"
    assert created["entity"]["type"] == "test_thing"
    assert created["entity"]["entity_type"] == "resource"
    assert created["entity"]["data"]["values"]["password"] == "(sensitive)"
    deleted = next(c for c in changes if c["action"] == "deleted")
    assert deleted["entity"]["data"]["values"]["password"] == "(sensitive)"
    # and outputs are entities too, masked like the plan's
    outputs = {c["entity"]["name"]: c for c in changes if c["entity"]["entity_type"] == "output"}
    assert outputs["token"]["entity"]["data"]["value"] == "(sensitive)"


def test_the_origin_is_read_only_for_a_shape_that_shows_it() -> None:
    # Given run metadata whose origin is counted when read
    reads: list[int] = []

    def origin() -> RunOrigin:
        reads.append(1)
        return RunOrigin(drift_detection=True)

    inputs = PolicyInputs(show_json(), replace(META, origin=origin))
    # When the runplane and bare documents are built / Then the origin is not read
    inputs.documents(["runplane", "bare"])
    assert reads == []
    # When the tools' shapes are built / Then it is read once, and shown
    assert inputs.document("terraform")["spacelift"]["run"]["drift_detection"] is True
    inputs.documents(["plan", "tfplan"])
    assert reads == [1]


def test_the_configuration_keeps_its_layout_and_masks_what_may_be_secret() -> None:
    # Given the configuration block of a plan: provider configurations, a resource with
    # no instance in the plan, a module's resource whose instance marks `password`
    # sensitive, with a provisioner and nested blocks, module calls, outputs, variables
    # When it is sanitized
    configuration = sanitized_configuration(show_json())
    masked = {"constant_value": "(sensitive)"}
    # Then provider configurations keep their fields; constants other than region are
    # masked
    assert configuration["provider_config"] == {
        "module.child:test": {
            "name": "test",
            "version_constraint": ">= 0.1.0",
            "module_address": "module.child",
        },
        "test": {"name": "test", "version_constraint": "0.1.0", "expressions": {"api_key": masked}},
        "test.second": {"name": "test", "alias": "second", "version_constraint": "0.1.0"},
    }
    root = configuration["root_module"]
    # A resource the plan has no instance of gets every constant masked
    assert root["resources"] == [
        {
            "address": "test_thing.a",
            "mode": "managed",
            "type": "test_thing",
            "name": "a",
            "provider_config_key": "test",
            "expressions": {"name": masked},
            "schema_version": 1,
        }
    ]
    # A module call keeps source and constraint, its arguments' constants are masked
    child = root["module_calls"]["child"]
    assert child["source"] == "./mod"
    assert child["expressions"] == {"label": masked}
    grandchild = child["module"]["module_calls"]["grandchild"]
    assert grandchild["version_constraint"] == "~> 2.0"
    assert grandchild["expressions"] == {"token": masked}
    # The module's resource shows the constants its planned value shows, masks the one
    # its instance marks sensitive, and keeps references, provisioners and count
    [resource] = child["module"]["resources"]
    assert resource == {
        "address": "test_thing.c",
        "mode": "managed",
        "type": "test_thing",
        "name": "c",
        "provider_config_key": "child:test",
        "provisioners": [
            {
                "type": "local-exec",
                "expressions": {
                    "command": {"constant_value": "make deploy"},
                    "connection": [{"password": masked}],
                },
            }
        ],
        "expressions": {
            "name": {"constant_value": "c"},
            "password": masked,
            "rules": [{"port": {"constant_value": 443}}, {"port": {"references": ["var.port"]}}],
        },
        "schema_version": 1,
        "count_expression": {"constant_value": 1},
    }
    # Outputs and variables declared sensitive have their constants masked
    assert root["outputs"] == {
        "name": {"expression": {"references": ["module.child.name"]}},
        "token": {"sensitive": True, "expression": masked},
    }
    assert root["variables"] == {"token": {"sensitive": True, "default": "(sensitive)"}}


def test_a_constant_is_masked_when_any_instance_lacks_a_sensitivity_map() -> None:
    # Given the module's resource, whose one instance has no after_sensitive
    plan = show_json()
    del plan["resource_changes"][0]["change"]["after_sensitive"]
    # When the configuration is sanitized / Then even its plain name is masked
    [resource] = sanitized_configuration(plan)["root_module"]["module_calls"]["child"]["module"][
        "resources"
    ]
    assert resource["expressions"]["name"] == {"constant_value": "(sensitive)"}


def test_a_plan_without_configuration_gives_an_empty_one() -> None:
    assert sanitized_configuration({}) == {
        "provider_config": {},
        "root_module": {"outputs": {}, "resources": [], "module_calls": {}, "variables": {}},
    }


# -- the set's declaration ----------------------------------------------------------------------


def test_a_set_declaring_no_shape_keeps_its_document_and_digest() -> None:
    # Given the deny-delete example, which declares no shape
    content = load_policy_set_dir(EXAMPLES / "deny-delete")
    # Then it is a runplane set and its document carries no shape fields
    assert content.input_shape == "runplane"
    document = content.to_document()
    assert set(document) == {"name", "modules", "policies"}
    assert policy_set_from_document(document).digest() == content.digest()


def test_a_declared_shape_is_part_of_the_content_and_its_digest() -> None:
    content = load_policy_set_dir(EXAMPLES / "hcp-plan")
    assert content.input_shape == "plan"
    document = content.to_document()
    assert document["input_shape"] == "plan"
    assert policy_set_from_document(document) == content
    runplane = policy_set_from_document({k: v for k, v in document.items() if k != "input_shape"})
    assert runplane.digest() != content.digest()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_shape", "sentinel"),
        ("unknown_input_roots", "ignore"),
        ("input_shape", ["plan"]),
        ("unknown_input_roots", {"warn": True}),
    ],
)
def test_an_unknown_shape_option_is_refused(field: str, value: object) -> None:
    document = load_policy_set_dir(EXAMPLES / "deny-delete").to_document()
    with pytest.raises(InvalidPolicySet) as refused:
        policy_set_from_document({**document, field: value})
    assert field in refused.value.message
    assert repr(value) in refused.value.message


def test_each_example_set_declares_a_shape_and_reads_only_its_roots() -> None:
    from runplane.domain.policy_input import unknown_input_roots

    shapes = {}
    for directory in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
        content = load_policy_set_dir(directory)
        shapes[content.input_shape] = directory.name
        assert unknown_input_roots(content) == [], directory.name
    assert set(shapes) == set(SHAPES)
