"""The policy input digests of fixed plans, pinned: how plan values are walked (sensitive
and unknown marks, malformed structures hidden whole) must not change what a policy
result's digest covers."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.domain.policy_input import SHAPES, PolicyInputs, RunMetadata
from tests.unit.test_policy_input_shapes import show_json

META = RunMetadata(workspace="prod", kind="plan_and_apply", engine_version="1.0.3")


def _resource(name: str, **change: Any) -> dict[str, Any]:
    return {
        "address": f"x_thing.{name}",
        "mode": "managed",
        "type": "x_thing",
        "name": name,
        "provider_name": "registry.terraform.io/acme/x",
        "change": {"actions": ["update"], **change},
    }


def edge_plan() -> dict[str, Any]:
    """Every corner of the value walk: unknown and sensitive together, unknown keys absent
    from the value, malformed and mismatched structures, lists whose unknown structure
    has another length, floats, nesting."""
    value = {"a": 1, "b": [1, 2.5, {"c": "x"}], "d": {"e": None, "f": True}, "g": "p"}
    return {
        "format_version": "0.2",
        "terraform_version": "1.0.3",
        "resource_changes": [
            _resource(
                "both",
                before=value,
                before_sensitive={"g": True},
                after=value,
                after_sensitive={"a": True, "b": [False, True, {"c": True}], "z": True},
                after_unknown={"a": True, "d": {"f": True}, "z": True, "y": True},
            ),
            _resource(
                "malformed_under_unknown",
                before=None,
                before_sensitive=False,
                after={"a": 1, "b": [1]},
                after_sensitive={"a": "yes", "b": [False]},
                after_unknown={"a": True, "b": [True, True]},
            ),
            _resource(
                "mismatched",
                before=[1, 2],
                before_sensitive=[False],
                after={"a": [1, 2]},
                after_sensitive={"a": {"0": True}},
                after_unknown=False,
            ),
            _resource("no_map", before={"k": "v"}, after={"k": "w"}, after_unknown={}),
            _resource(
                "whole_unknown",
                before={"k": "v"},
                before_sensitive={},
                after=None,
                after_sensitive={"k": True},
                after_unknown=True,
            ),
            _resource(
                "unknown_sensitive_root",
                before=None,
                before_sensitive=False,
                after={"k": 1},
                after_sensitive=True,
                after_unknown=True,
            ),
        ],
        "output_changes": {
            "plain": {
                "actions": ["create"],
                "before": None,
                "after": [1, {"x": 2}],
                "after_unknown": [False, {"x": True}],
                "before_sensitive": False,
                "after_sensitive": False,
            },
            "secret": {
                "actions": ["create"],
                "before": None,
                "after": "s",
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": True,
            },
        },
    }


PINNED: dict[str, dict[str, str]] = {
    "edge_plan": {
        "bare": "sha256:b62c30b8b42dfb4d1864d0d78abef4bbedf15fd62aa406b76b9e8f9525433fca",
        "plan": "sha256:b7091e76b9fa42d49b5aafd443174e5af3df7b588af343d016db6c98558b32dc",
        "runplane": "sha256:ef8a5a8bd797f04201a7c29ca8df94c61134732ee3071292b77ed7ccab044174",
        "terraform": "sha256:1172eea959603e3dd8340bdebb81e4a6a72174a9fefa762c8a7cc9820e1c4d34",
        "tfplan": "sha256:a1167aeb39312bdaf51be2d5f48f5dc7e0bd9adb8789b1753501db65f8be93de",
    },
    "show_json": {
        "bare": "sha256:bf6ffa1feea1773dba748921e01d323998286952f3896ae6a5886206094bdcff",
        "plan": "sha256:9f2c9c648c10c7e9872a321b8b71ddcd71916d8ac0fa0a55c0707ca168c4c206",
        "runplane": "sha256:3589e25db3de8f5a5a7d40bfcf2b8d20e03c8f74093a0a98dcc21a203947d616",
        "terraform": "sha256:71d72d9642b240ed73010dc0de1278ba6da5b9147f4e93a5d72fa0ecdd620a4e",
        "tfplan": "sha256:62a88d76acb8924170afd7120dff457f18abb340b0f41f99c8ebda2274a909b0",
    },
}


@pytest.mark.parametrize("plan_name", sorted(PINNED))
@pytest.mark.parametrize("shape", SHAPES)
def test_the_digest_of_each_fixed_plan_is_pinned(plan_name: str, shape: str) -> None:
    # Given a fixed plan / When each shape's document is built
    plan = {"show_json": show_json, "edge_plan": edge_plan}[plan_name]()
    # Then its digest is the pinned one
    assert PolicyInputs(plan, META).digest(shape) == PINNED[plan_name][shape]
