"""A phase's cloud credentials: their bounds, their wire form, and how the engine gets them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runplane.domain.run_credentials import (
    MAX_SESSION,
    MIN_SESSION,
    AwsSession,
    IssuedCredentials,
    WorkloadToken,
    role_session_name,
    session_duration,
)
from runplane.runner.bounded_log import BoundedLog
from runplane.runner.cloud_credentials import credentials_environment
from runplane.runner.engine import Engine
from runplane.runner.sts_relay import relayed

SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLEsessiontokenvalue0123456789"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"


def issued(**overrides: object) -> IssuedCredentials:
    values: dict[str, object] = {
        "aws": AwsSession(
            role_arn="arn:aws:iam::123456789012:role/plan",
            region="eu-west-3",
            access_key_id="ASIAEXAMPLE",
            expiration=datetime(2026, 12, 3, 12, tzinfo=UTC),
            secret_access_key=SECRET_KEY,
            session_token=SESSION_TOKEN,
        ),
        "gcp": WorkloadToken(audience="//iam.googleapis.com/projects/1/x", token=JWT + "g"),
        "azure": WorkloadToken(
            audience="api://AzureADTokenExchange",
            token=JWT + "a",
            client_id="11111111-1111-1111-1111-111111111111",
            tenant_id="22222222-2222-2222-2222-222222222222",
        ),
        "aws_endpoint_url": None,
    }
    values.update(overrides)
    return IssuedCredentials(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("run_id", "phase", "expected"),
    [
        ("run-abc", "plan", "runplane-plan-run-abc"),
        ("run-" + "x" * 80, "apply", ("runplane-apply-run-" + "x" * 80)[:64]),
        ("run/with space", "plan", "runplane-plan-run-with-space"),
    ],
)
def test_a_role_session_is_named_for_its_run_and_phase_within_stss_rules(
    run_id: str, phase: str, expected: str
) -> None:
    name = role_session_name(run_id, phase)
    assert name == expected
    assert 2 <= len(name) <= 64


@pytest.mark.parametrize(
    ("wanted", "left", "expected"),
    [
        (timedelta(hours=1), timedelta(hours=3), timedelta(hours=1)),
        (timedelta(hours=2), timedelta(minutes=40), timedelta(minutes=40)),
        (timedelta(hours=1), timedelta(minutes=5), MIN_SESSION),
        (timedelta(hours=20), timedelta(hours=30), MAX_SESSION),
    ],
)
def test_a_session_lasts_no_longer_than_the_phase_within_stss_bounds(
    wanted: timedelta, left: timedelta, expected: timedelta
) -> None:
    assert session_duration(wanted, left) == expected


def test_issued_credentials_cross_the_wire_unchanged_and_never_show_in_a_repr() -> None:
    # Given credentials of all three clouds
    sent = issued(aws_endpoint_url="http://127.0.0.1:5000")

    # When they travel as JSON and are read back
    received = IssuedCredentials.from_wire(json.loads(json.dumps(sent.to_wire())))

    # Then nothing was lost, and no representation holds a secret
    assert received == sent
    for secret in sent.secrets():
        assert secret not in repr(received)
    assert set(sent.secrets()) == {SECRET_KEY, SESSION_TOKEN, JWT + "g", JWT + "a"}


@pytest.mark.parametrize(
    "wire",
    [
        {"aws": "keys"},
        {"aws": {"role_arn": "arn:aws:iam::123456789012:role/plan"}},
        {"gcp": {"audience": "x"}},
        {"azure": {"token": "", "audience": "x"}},
    ],
)
def test_malformed_credentials_are_refused_naming_the_field(wire: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="credentials: "):
        IssuedCredentials.from_wire(wire)


def test_the_engine_gets_each_clouds_credentials_the_way_its_providers_read_them(
    tmp_path: Path,
) -> None:
    # Given credentials of all three clouds, and the engine's directory
    given: dict[str, bytes] = {}

    def give(name: str, data: bytes) -> Path:
        given[name] = data
        (tmp_path / name).write_bytes(data)
        return tmp_path / name

    # When they become the engine's environment
    env = credentials_environment(issued(aws_endpoint_url="http://127.0.0.1:5000"), give)

    # Then AWS reads variables, GCP an external account file, Azure a token file
    assert env["AWS_SECRET_ACCESS_KEY"] == SECRET_KEY
    assert env["AWS_SESSION_TOKEN"] == SESSION_TOKEN
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-west-3"
    assert env["AWS_ENDPOINT_URL_STS"] == "http://127.0.0.1:5000"
    external = json.loads(Path(env["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
    assert external["type"] == "external_account"
    assert external["audience"] == "//iam.googleapis.com/projects/1/x"
    assert Path(external["credential_source"]["file"]).read_text() == JWT + "g"
    assert Path(env["ARM_OIDC_TOKEN_FILE_PATH"]).read_text() == JWT + "a"
    assert env["ARM_USE_OIDC"] == "true"
    assert env["ARM_CLIENT_ID"] == env["AZURE_CLIENT_ID"]
    assert env["ARM_TENANT_ID"] == "22222222-2222-2222-2222-222222222222"


def test_without_a_non_default_sts_the_engine_uses_the_clouds_own(tmp_path: Path) -> None:
    env = credentials_environment(issued(gcp=None, azure=None), lambda n, d: tmp_path / n)
    assert "AWS_ENDPOINT_URL_STS" not in env
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env


def test_a_log_redacts_credentials_issued_after_it_started() -> None:
    # Given a log already written to
    log = BoundedLog(secrets=["old-secret-value"])
    log.write("[runner] preparing\n")

    # When credentials are issued and then printed, split across writes
    log.also_redact([SESSION_TOKEN])
    log.write(f"token: {SESSION_TOKEN[:10]}")
    log.write(f"{SESSION_TOKEN[10:]} and old-secret-value\n")

    # Then neither secret is in the log
    text = log.text()
    assert SESSION_TOKEN not in text
    assert "old-secret-value" not in text
    assert "[runner] preparing" in text
    assert text.count("[redacted]") == 2


def test_the_engines_environment_takes_credentials_but_never_overrides_what_it_set(
    tmp_path: Path,
) -> None:
    # Given an engine with a fixed environment
    engine = Engine(tmp_path / "tofu", tmp_path, {"HOME": str(tmp_path)}, BoundedLog())

    # When credentials are added
    engine.add_environment({"AWS_ACCESS_KEY_ID": "ASIAEXAMPLE"})

    # Then they are there; and what the runner set cannot be replaced
    assert engine._env["AWS_ACCESS_KEY_ID"] == "ASIAEXAMPLE"
    with pytest.raises(ValueError, match="HOME"):
        engine.add_environment({"HOME": "/elsewhere"})
    with pytest.raises(ValueError, match="TF_STATE_PERSIST_INTERVAL"):
        engine.add_environment({"TF_STATE_PERSIST_INTERVAL": "1"})


def test_credentials_replace_a_runs_env_variable_of_the_same_name_only_when_told(
    tmp_path: Path,
) -> None:
    # Given an engine whose environment holds a run's static AWS key
    engine = Engine(
        tmp_path / "tofu",
        tmp_path,
        {"HOME": str(tmp_path), "AWS_ACCESS_KEY_ID": "AKIASTATIC"},
        BoundedLog(),
    )
    # Then credentials cannot silently replace it, but replace it when named
    with pytest.raises(ValueError, match="AWS_ACCESS_KEY_ID"):
        engine.add_environment({"AWS_ACCESS_KEY_ID": "ASIADYNAMIC"})
    engine.add_environment({"AWS_ACCESS_KEY_ID": "ASIADYNAMIC"}, replacing=["AWS_ACCESS_KEY_ID"])
    assert engine._env["AWS_ACCESS_KEY_ID"] == "ASIADYNAMIC"
    with pytest.raises(ValueError, match="HOME"):
        engine.add_environment({"HOME": "/x"}, replacing=["AWS_ACCESS_KEY_ID"])


STS_SCOPE = "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261203/us-east-1/{service}/aws4_request"


@pytest.mark.parametrize(
    ("service", "body", "relays"),
    [
        ("sts", b"Action=GetCallerIdentity&Version=2011-06-15", True),
        ("sts", b"Action=AssumeRole&Version=2011-06-15&RoleArn=x", False),
        ("sts", b"Action=GetCallerIdentity&Action=AssumeRole", False),
        ("dynamodb", b"Action=GetCallerIdentity", False),
        ("sts", b"", False),
        ("sts", b"\xff\xfe", False),
    ],
)
def test_the_sts_relay_forwards_only_who_am_i(service: str, body: bytes, relays: bool) -> None:
    headers = {"Authorization": STS_SCOPE.format(service=service)}
    assert relayed(headers, body) is relays


def test_the_sts_relay_refuses_an_unsigned_call() -> None:
    assert not relayed({}, b"Action=GetCallerIdentity")
