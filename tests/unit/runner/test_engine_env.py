"""The engine's environment: the run's env variables under the runner's own names,
and a variable the runner owns refused rather than trusted."""

from __future__ import annotations

import pytest

from runplane.domain.env_variables import env_name_problem
from runplane.runner.engine import _ENGINE_ENV_DEFAULTS, _ENGINE_ENV_PLATFORM
from runplane.runner.engine_env import engine_environment
from runplane.runner.refusal import Refused

OWN = {"PATH": "/usr/bin", "HOME": "/work/engine", "TF_CLI_CONFIG_FILE": "/work/cli.tfrc"}


def test_env_variables_join_the_runners_own_names() -> None:
    composed = engine_environment(OWN, {"TF_VAR_region": "eu", "AWS_REGION": "eu-west-1"})
    assert composed.env == {**OWN, "TF_VAR_region": "eu", "AWS_REGION": "eu-west-1"}
    # (the environment's values stay out of its repr)
    assert "eu-west-1" not in repr(composed)


@pytest.mark.parametrize("name", ["PATH", "LD_PRELOAD", "TF_CLI_ARGS_plan", "RUNPLANE_X", "A-B"])
def test_a_variable_the_runner_would_not_accept_refuses_the_phase(name: str) -> None:
    with pytest.raises(Refused) as refused:
        engine_environment(OWN, {name: "/evil/lib.so"})
    assert name in refused.value.message
    assert "/evil/lib.so" not in refused.value.message


def test_a_name_the_runner_sets_itself_is_refused_even_if_not_reserved_elsewhere() -> None:
    with pytest.raises(Refused):
        engine_environment({**OWN, "EXTRA_OWN": "x"}, {"EXTRA_OWN": "y"})


def test_every_name_the_runner_or_the_engine_wrapper_sets_is_reserved() -> None:
    # The runner's own names (runner/main.py) and the engine's defaults and platform
    # settings (runner/engine.py): a variable can set none of them
    runner_sets = {"PATH", "HOME", "TMPDIR", "TF_CLI_CONFIG_FILE", "TFE_RUN_ID"}
    for name in runner_sets | set(_ENGINE_ENV_DEFAULTS) | set(_ENGINE_ENV_PLATFORM):
        problem = env_name_problem(name)
        assert problem is not None, name
        assert problem.reserved, name
