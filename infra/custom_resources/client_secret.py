"""CloudFormation custom resource: copy a Cognito app client's secret into Secrets Manager.

Cognito generates the dashboard app client's secret. This function reads it at
deploy time and writes it into the stack's secret, so the value never appears in
the template, in a CloudFormation response or in a log. The source is inlined
into the template: boto3 (in the Lambda runtime) and the standard library only.
"""

import json
import urllib.request
from typing import Any

import boto3


def copy(properties: dict[str, str]) -> None:
    described = boto3.client("cognito-idp").describe_user_pool_client(
        UserPoolId=properties["UserPoolId"], ClientId=properties["ClientId"]
    )
    secret = described["UserPoolClient"].get("ClientSecret")
    if not secret:
        raise ValueError("the app client has no secret")
    boto3.client("secretsmanager").put_secret_value(
        SecretId=properties["SecretArn"], SecretString=secret
    )


def respond(event: dict[str, Any], status: str, reason: str) -> None:
    properties = event["ResourceProperties"]
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason,
            "PhysicalResourceId": f"{properties['UserPoolId']}/{properties['ClientId']}",
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": {},
        }
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - the presigned URL CloudFormation gave
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": ""}
    )
    urllib.request.urlopen(request, timeout=10).close()  # noqa: S310


def handler(event: dict[str, Any], context: Any) -> None:
    try:
        if event["RequestType"] != "Delete":
            copy(event["ResourceProperties"])
        respond(event, "SUCCESS", "ok")
    except Exception as error:  # report every failure, or the stack waits for an hour
        # The error's type only: an SDK message is safe, but nothing here needs it.
        respond(event, "FAILED", f"copying the client secret failed: {type(error).__name__}")
