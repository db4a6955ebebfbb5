"""AWS role sessions for a run's phase, from STS (moto's): both ways in, and refusals."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from runplane.adapters import aws
from runplane.adapters.role_sessions import RoleSessions
from runplane.domain.errors import CloudCredentialsRefused, CloudCredentialsUnavailable

ROLE = "arn:aws:iam::123456789012:role/deploy-plan"
EXPLAIN = "The role must trust https://issuer.test with aud sts.amazonaws.com."


@pytest.fixture
def sessions() -> Iterator[RoleSessions]:
    with mock_aws():
        yield RoleSessions(lambda region, signed: aws.sts(None, region, signed))


def _whoami(session: Any) -> str:
    sts = boto3.client(
        "sts",
        region_name=session.region,
        aws_access_key_id=session.access_key_id,
        aws_secret_access_key=session.secret_access_key,
        aws_session_token=session.session_token,
    )
    return str(sts.get_caller_identity()["Arn"])


def test_a_web_identity_session_is_the_roles_named_for_the_run(sessions: RoleSessions) -> None:
    # When the control plane exchanges a token for the plan role
    session = sessions.with_web_identity(
        ROLE, "eu-west-3", "runplane-plan-run-1", "a.b.c", timedelta(hours=1), explain=EXPLAIN
    )

    # Then the credentials act as that role, in a session named for the run
    assert (
        _whoami(session) == "arn:aws:sts::123456789012:assumed-role/deploy-plan/runplane-plan-run-1"
    )
    assert (session.role_arn, session.region) == (ROLE, "eu-west-3")


def test_an_external_id_session_carries_the_runs_tags(sessions: RoleSessions) -> None:
    session = sessions.with_external_id(
        ROLE,
        "us-east-1",
        "runplane-apply-run-1",
        "ext-1234",
        timedelta(minutes=30),
        tags={"runplane:run": "run-1", "runplane:workspace": "ws-1"},
        source_identity="run-1",
        explain=EXPLAIN,
    )
    assert _whoami(session).endswith("/deploy-plan/runplane-apply-run-1")


class _Refusing:
    """An STS that refuses as AWS does (moto checks no trust policy)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def assume_role_with_web_identity(self, **_: Any) -> Any:
        raise self.error

    assume_role = assume_role_with_web_identity


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        ("AccessDenied", "trust policy"),
        ("InvalidIdentityToken", "IAM OIDC provider"),
        ("IDPRejectedClaim", "aud or sub"),
        ("ValidationError", "maximum session duration"),
        ("SomethingNew", "STS refused the request"),
    ],
)
def test_a_refusal_says_what_to_fix_and_never_echoes_sts_or_the_token(code: str, hint: str) -> None:
    # Given an STS that refuses, quoting a policy in its message
    refusing = _Refusing(
        ClientError({"Error": {"Code": code, "Message": "policy {secret-ish}"}}, "AssumeRole")
    )
    sessions = RoleSessions(lambda region, signed: refusing)

    # When the run's session is asked for
    with pytest.raises(CloudCredentialsRefused) as refused:
        sessions.with_web_identity(
            ROLE,
            "eu-west-3",
            "runplane-plan-run-1",
            "tok.en.value",
            timedelta(hours=1),
            explain=EXPLAIN,
        )

    # Then the message names the role, the code, the fix, and nothing STS or we sent
    message = refused.value.message
    assert ROLE in message
    assert code in message
    assert hint in message
    assert EXPLAIN in message
    assert "secret-ish" not in message
    assert "tok.en.value" not in message
    assert refused.value.http_status == 422


def test_an_unreachable_sts_is_unavailable_not_refused() -> None:
    refusing = _Refusing(EndpointConnectionError(endpoint_url="https://sts.example"))
    sessions = RoleSessions(lambda region, signed: refusing)
    with pytest.raises(CloudCredentialsUnavailable) as unavailable:
        sessions.with_web_identity(
            ROLE, "eu-west-3", "n1", "t", timedelta(hours=1), explain=EXPLAIN
        )
    assert unavailable.value.http_status == 503
