"""The first organization and admin token of a deployed stack, against moto."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from infra.bootstrap import bootstrap
from runplane.adapters import aws
from runplane.domain.errors import RunplaneError
from runplane.domain.identity import ROLES, Permission
from runplane.settings import Settings
from runplane.store.provision import create_table
from runplane.wiring import build_services

REGION = "us-east-1"
OUTPUTS = {
    "TableName": "runplane-prod-table",
    "ArtifactBucket": "runplane-prod-artifacts",
    "KeyArn": "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000",
    "StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:runplane-prod-run",
    "ControlPlaneUrl": "https://runplane.example.com",
}


@pytest.fixture
def deployed_table() -> Iterator[None]:
    with mock_aws():
        aws.forget_clients()
        create_table(boto3.client("dynamodb", region_name=REGION), OUTPUTS["TableName"])
        yield
    aws.forget_clients()


@pytest.mark.usefixtures("deployed_table")
def test_the_token_authenticates_as_an_admin_of_the_new_organization() -> None:
    # When the operator bootstraps the stack's first organization
    done = bootstrap(OUTPUTS, REGION, "acme")
    # Then the printed token is an admin of exactly that organization
    services = build_services(Settings(table_name=OUTPUTS["TableName"], region=REGION))
    principal = services.identity.authenticate(f"Bearer {done.token}")
    assert principal.organization_id == done.organization_id
    assert principal.permissions == ROLES["admin"]
    assert Permission.PLATFORM_OPERATE not in principal.permissions
    assert done.organization == "acme"


@pytest.mark.usefixtures("deployed_table")
def test_an_organization_name_is_bootstrapped_only_once() -> None:
    bootstrap(OUTPUTS, REGION, "acme")
    with pytest.raises(RunplaneError):
        bootstrap(OUTPUTS, REGION, "acme")
