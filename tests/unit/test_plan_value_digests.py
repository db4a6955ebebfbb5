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


# The plan-shaped digests moved when those documents gained the plan's variables, planned
# values, prior state and the configuration's resources, and again when their run documents
# gained the workspace's tags, the run's message, its commit and Spacelift's changes;
# runplane's did not.
PINNED: dict[str, dict[str, str]] = {
    "edge_plan": {
        "bare": "sha256:1533a7cb90205892b2c2369f3fe2cb712f39b2ab683172deb6fed20fcd4c0916",
        "plan": "sha256:ce7cfd28b78326da84f3a223318591fbe9203648bc0c530250292ebf78fce0bc",
        "runplane": "sha256:ef8a5a8bd797f04201a7c29ca8df94c61134732ee3071292b77ed7ccab044174",
        "terraform": "sha256:3dc3974bdac0025ef9a3c7e99608dfcc14e9a85920c2a5cbd08ec4c1caa92a73",
        "tfplan": "sha256:e3b33beec4f17491eb39e3a4b5444de177ede859c17d3b411e3bcf66f212ded2",
    },
    "show_json": {
        "bare": "sha256:0475f179cbef7f2367c542615cacbdb7a240661e9ab1b2462562578653045171",
        "plan": "sha256:b4e27c26ceb29bf51cbd8ba97fa39386eb114a9bf4418b2c0bbab0d11387b9f1",
        "runplane": "sha256:3589e25db3de8f5a5a7d40bfcf2b8d20e03c8f74093a0a98dcc21a203947d616",
        "terraform": "sha256:db48a17df8c9e38fa6edb6669772eded88bc8959d8f7734de3d779686bb33fa4",
        "tfplan": "sha256:64483fb8bcf54de010699eb98dbcdd21c4022b07839e9238432a840371eb6de2",
    },
}


@pytest.mark.parametrize("plan_name", sorted(PINNED))
@pytest.mark.parametrize("shape", SHAPES)
def test_the_digest_of_each_fixed_plan_is_pinned(plan_name: str, shape: str) -> None:
    # Given a fixed plan / When each shape's document is built
    plan = {"show_json": show_json, "edge_plan": edge_plan}[plan_name]()
    # Then its digest is the pinned one
    assert PolicyInputs(plan, META).digest(shape) == PINNED[plan_name][shape]
