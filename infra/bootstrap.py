"""Create the first organization of a deployed stack and its first admin API token.

    python -m infra.bootstrap --stack runplane-prod --organization acme

Runs with the caller's AWS credentials (an operator of the account), against the
stack's table. Prints the organization ID, which Cognito users of that organization
carry as ``custom:organization``, and an admin API token, shown only this once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3

from runplane.domain.identity import ROLES
from runplane.settings import Settings
from runplane.wiring import build_services

# The stack outputs this needs (infra.stack.RunplaneStack).
OUTPUTS = ("TableName", "ArtifactBucket", "KeyArn", "StateMachineArn", "ControlPlaneUrl")


@dataclass(frozen=True)
class Bootstrapped:
    organization_id: str
    organization: str
    token: str


def stack_outputs(stack: str, region: str | None) -> dict[str, str]:
    cloudformation: Any = boto3.session.Session(region_name=region).client("cloudformation")
    (described,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    missing = [name for name in OUTPUTS if name not in outputs]
    if missing:
        raise SystemExit(f"stack {stack} has no outputs {missing}: is it a Runplane stack?")
    return outputs


def bootstrap(
    outputs: Mapping[str, str], region: str, organization: str, label: str = "admin"
) -> Bootstrapped:
    settings = Settings(
        table_name=outputs["TableName"],
        artifact_bucket=outputs["ArtifactBucket"],
        kms_key_id=outputs["KeyArn"],
        state_machine_arn=outputs["StateMachineArn"],
        control_plane_url=outputs["ControlPlaneUrl"],
        region=region,
    )
    services = build_services(settings)
    org = services.tenancy.create_organization(organization)
    issued = services.identity.issue_token(
        org.id, label, ROLES["admin"], created_by="python -m infra.bootstrap"
    )
    return Bootstrapped(organization_id=org.id, organization=org.name, token=issued.token)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.bootstrap", description=__doc__)
    parser.add_argument("--stack", default="runplane-prod", help="the stack name")
    parser.add_argument("--region", help="the stack's region (default: your AWS config)")
    parser.add_argument("--organization", required=True, help="the organization's name")
    parser.add_argument("--label", default="admin", help="a name for the admin token")
    args = parser.parse_args(argv)
    region = args.region or boto3.session.Session().region_name
    if not region:
        raise SystemExit("no region: pass --region or set AWS_REGION")
    outputs = stack_outputs(args.stack, region)
    done = bootstrap(outputs, region, args.organization, args.label)
    print(f"organization:     {done.organization}")
    print(f"organization ID:  {done.organization_id}")
    print(f"control plane:    {outputs['ControlPlaneUrl']}")
    print(f"admin API token:  {done.token}")
    print("The token is shown only now; store it in your secret manager.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
