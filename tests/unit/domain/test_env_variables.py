"""Environment variable names: POSIX names, bounded, and the runner's and platform's own
names refused with the reason, whatever their letter case."""

from __future__ import annotations

import pytest

from runplane.domain.env_variables import (
    MAX_ENV_NAME,
    RESERVED_NAMES,
    RESERVED_PREFIXES,
    env_name_problem,
    tf_var_name,
)
from runplane.domain.errors import InvalidInput, ReservedVariableName
from runplane.domain.variables import (
    VariableCategory,
    category_of,
    check_workspace_variable,
)

ENV = VariableCategory.ENV


@pytest.mark.parametrize(
    "name",
    [
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "GOOGLE_CREDENTIALS",
        "ARM_CLIENT_ID",
        "TF_VAR_region",
        "TF_VAR_Mixed_Case",
        "TFE_TOKEN",
        "TF_REGISTRY_CLIENT_TIMEOUT",
        "_private",
        "x",
        "a" * MAX_ENV_NAME,
        "PATHS",  # a reserved name's prefix is not the name
        "MY_PATH",
        "HOMEDIR",
    ],
)
def test_posix_names_the_runner_does_not_own_are_accepted(name: str) -> None:
    assert env_name_problem(name) is None
    assert check_workspace_variable(name, "value", None, ENV) == len("value")


@pytest.mark.parametrize(
    "name",
    [
        "",
        "1ABC",
        "A-B",
        "A.B",
        "A B",
        "É",
        "A=B",
        "A\nB",
        "TF_VAR_my-var",
        "a" * (MAX_ENV_NAME + 1),
    ],
)
def test_a_name_that_is_no_posix_name_is_invalid_input_but_not_reserved(name: str) -> None:
    problem = env_name_problem(name)
    assert problem is not None
    assert not problem.reserved
    with pytest.raises(InvalidInput) as refused:
        check_workspace_variable(name, "v", None, ENV)
    assert not isinstance(refused.value, ReservedVariableName)
    assert refused.value.pointer == "/name"


EXAMPLES_OF_PREFIXES = {
    "TF_CLI_ARGS_": ["TF_CLI_ARGS_plan", "TF_CLI_ARGS_apply"],
    "TF_LOG_": ["TF_LOG_CORE", "TF_LOG_PROVIDER"],
    "TF_TOKEN_": ["TF_TOKEN_app_terraform_io", "TF_TOKEN_runplane_example_com"],
    "LD_": ["LD_PRELOAD", "LD_LIBRARY_PATH"],
    "DYLD_": ["DYLD_INSERT_LIBRARIES"],
    "PYTHON": ["PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME"],
    "RUNPLANE_": ["RUNPLANE_BOOTSTRAP", "RUNPLANE_CONTROL_PLANE_URL"],
}


@pytest.mark.parametrize(
    ("name", "owner"),
    [
        *((name, reason) for name, reason in RESERVED_NAMES.items()),
        *(
            (example, reason)
            for prefix, reason in RESERVED_PREFIXES
            for example in EXAMPLES_OF_PREFIXES[prefix]
        ),
    ],
)
def test_every_reserved_name_is_refused_with_who_owns_it_in_any_case(name: str, owner: str) -> None:
    for spelling in (name, name.lower(), name[:1] + name[1:].lower()):
        problem = env_name_problem(spelling)
        assert problem is not None, spelling
        assert problem.reserved, spelling
        assert problem.message == f"environment variable {spelling} is reserved: {owner}"
        with pytest.raises(ReservedVariableName) as refused:
            check_workspace_variable(spelling, "v", None, ENV)
        assert (refused.value.code, refused.value.http_status) == ("VARIABLE_NAME_RESERVED", 422)
        assert refused.value.pointer == "/name"


def test_the_brief_classes_of_reserved_names_are_all_covered() -> None:
    # The names the runner sets or that steer how it drives the engine
    for name in (
        "PATH", "HOME", "USER", "SHELL", "TMPDIR", "TF_CLI_CONFIG_FILE", "TF_CLI_ARGS",
        "TF_DATA_DIR", "TF_PLUGIN_CACHE_DIR", "TF_LOG", "TF_LOG_PATH", "TF_IN_AUTOMATION",
        "TF_INPUT", "TF_WORKSPACE", "TF_STATE_PERSIST_INTERVAL", "TF_REATTACH_PROVIDERS",
        "TF_APPEND_USER_AGENT", "CHECKPOINT_DISABLE", "TFE_RUN_ID",
    ):  # fmt: skip
        assert name in RESERVED_NAMES
    assert {prefix for prefix, _ in RESERVED_PREFIXES} == set(EXAMPLES_OF_PREFIXES)


def test_a_terraform_variable_keeps_the_engines_rule_and_may_share_an_env_name() -> None:
    # A Terraform variable named PATH is the configuration's business, not the runner's
    assert check_workspace_variable("PATH", "v", None) == 1
    # And a hyphen is fine in a Terraform name, not in an environment name
    check_workspace_variable("my-var", "v", None, VariableCategory.TERRAFORM)
    with pytest.raises(InvalidInput):
        check_workspace_variable("my-var", "v", None, ENV)


def test_control_characters_are_refused_in_env_values_as_in_terraform_ones() -> None:
    with pytest.raises(InvalidInput) as refused:
        check_workspace_variable("TOKEN", "a\x00b", None, ENV)
    assert "U+0000" in refused.value.message
    assert "a\x00b" not in refused.value.message


def test_a_category_is_terraform_or_env() -> None:
    assert category_of("env") is ENV
    assert category_of("terraform") is VariableCategory.TERRAFORM
    with pytest.raises(InvalidInput) as refused:
        category_of("secrets")
    assert refused.value.pointer == "/category"


def test_tf_var_names_name_the_variable_they_set() -> None:
    assert tf_var_name("TF_VAR_region") == "region"
    assert tf_var_name("TF_VAR_") is None
    assert tf_var_name("tf_var_region") is None  # the engine reads the prefix as written
    assert tf_var_name("AWS_REGION") is None
