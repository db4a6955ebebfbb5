"""What each policy input shape says about a run's options (docs/runs.md, "Run options")."""

from __future__ import annotations

from runplane.domain.policy_input import PolicyInputs, RunMetadata
from runplane.domain.run_options import RunOptions
from tests.unit.test_policy_input_shapes import show_json

DESTROY = RunOptions(destroy=True, targets=("module.app",))


def inputs(options: RunOptions) -> PolicyInputs:
    meta = RunMetadata(
        workspace="prod", kind="plan_and_apply", engine_version="1.0.3", options=options
    )
    return PolicyInputs(show_json(), meta)


def test_a_destroy_run_says_so_in_every_shape_that_names_the_run() -> None:
    # Given a targeted destroy run's policy inputs
    given = inputs(DESTROY)

    # When each shape is derived
    runplane = given.document("runplane")["run"]
    hcp = given.document("plan")["run"]
    scalr = given.document("tfplan")["tfrun"]

    # Then each says destroy, and the targets where the tool has a field for them
    assert runplane["destroy"] is True
    assert runplane["targets"] == ["module.app"]
    assert runplane["replacements"] == []
    assert (hcp["is_destroy"], hcp["target_addrs"], hcp["replace_addrs"]) == (
        True,
        ["module.app"],
        None,
    )
    assert scalr["is_destroy"] is True


def test_a_plain_run_keeps_the_documents_and_digests_it_always_had() -> None:
    # Given a plain run's inputs, with and without options given
    plain, defaulted = (
        inputs(RunOptions()),
        PolicyInputs(
            show_json(),
            RunMetadata(workspace="prod", kind="plan_and_apply", engine_version="1.0.3"),
        ),
    )

    # Then no option key appears, and every shape's digest is the same
    assert "destroy" not in plain.document("runplane")["run"]
    assert "target_addrs" not in plain.document("plan")["run"]
    assert plain.document("plan")["run"]["is_destroy"] is False
    for shape in ("runplane", "plan", "tfplan", "terraform", "bare"):
        assert plain.digest(shape) == defaulted.digest(shape)


def test_options_change_the_digest_the_check_binds() -> None:
    # A destroy's policy input is another document than the same plan's without it.
    assert inputs(DESTROY).digest("runplane") != inputs(RunOptions()).digest("runplane")
