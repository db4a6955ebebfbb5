from __future__ import annotations

from runplane.adapters.ids import RandomIds
from runplane.domain.ids import PUBLIC_ID_PATTERN, IdKind, kind_of
from runplane.domain.run import RunKind, RunStatus, dashboard_label


def test_success_is_labelled_by_what_actually_ran() -> None:
    assert dashboard_label(RunStatus.SUCCEEDED, applied=True) == "Applied"
    assert dashboard_label(RunStatus.SUCCEEDED, applied=False) == "Plan completed"
    assert dashboard_label(RunStatus.AWAITING_APPROVAL, applied=False) == "Awaiting approval"


def test_only_plan_and_apply_runs_take_the_writer_reservation() -> None:
    assert [k for k in RunKind if k.needs_writer_reservation] == [RunKind.PLAN_AND_APPLY]


def test_public_ids_are_prefixed_and_carry_128_random_bits() -> None:
    ids = RandomIds()
    generated = {ids.new(IdKind.RUN) for _ in range(1000)}
    assert len(generated) == 1000
    for public_id in generated:
        assert PUBLIC_ID_PATTERN.match(public_id)
        assert kind_of(public_id) is IdKind.RUN


def test_malformed_or_unknown_ids_have_no_kind() -> None:
    assert kind_of("run-short") is None
    assert kind_of("xyz-" + "a" * 26) is None
    assert kind_of("ws-" + "a" * 26) is IdKind.WORKSPACE
