"""A deployed function names the resources it uses; the embedded stack's defaults are
never used outside it."""

from __future__ import annotations

import pytest

from runplane.domain.errors import NotConfigured
from runplane.settings import Settings

DEPLOYED = {"RUNPLANE_TABLE_NAME": "prod-runplane", "AWS_REGION": "eu-west-1"}


def test_a_deployed_function_without_a_resource_name_refuses_to_use_it() -> None:
    # Given a deployed function's environment that names its table but no state machine
    settings = Settings.from_env(DEPLOYED)

    # When it asks for the table, then for the state machine
    table = settings.resource("table_name")
    with pytest.raises(NotConfigured) as refused:
        settings.resource("state_machine_arn")

    # Then it gets the table it was given, and a typed error naming the missing setting
    assert table == "prod-runplane"
    assert refused.value.http_status == 503
    assert refused.value.to_body()["code"] == "NOT_CONFIGURED"
    assert "RUNPLANE_STATE_MACHINE_ARN" in refused.value.message


def test_a_deployed_function_without_a_table_name_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a deployed function's environment without a table name
    from runplane import settings as module

    for name in ("RUNPLANE_TABLE_NAME", "RUNPLANE_AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    module.get_settings.cache_clear()

    # When it reads its settings, then it refuses with the setting it lacks
    try:
        with pytest.raises(NotConfigured, match="RUNPLANE_TABLE_NAME"):
            module.get_settings()
    finally:
        module.get_settings.cache_clear()


def test_the_embedded_stack_and_direct_construction_keep_the_defaults() -> None:
    # Given the embedded stack's environment (a local endpoint) and settings built in code
    embedded = Settings.from_env({"RUNPLANE_AWS_ENDPOINT_URL": "http://127.0.0.1:5000"})
    built = Settings()

    # Then both address the default names
    for settings in (embedded, built):
        assert settings.resource("artifact_bucket") == "runplane-artifacts"
        assert settings.resource("table_name") == "runplane"


def test_a_deployed_function_without_the_event_queue_refuses_to_send_run_events() -> None:
    # Given a deployed function that was not given the event queue (only the relay and
    # the worker are)
    from runplane.wiring import Services

    services = Services(Settings.from_env(DEPLOYED))

    # When it reaches for the queue, then it is refused instead of queueing in memory
    with pytest.raises(NotConfigured, match="RUNPLANE_EVENT_QUEUE_URL"):
        services.event_queue.send({"kind": "run_event"}, 0)
