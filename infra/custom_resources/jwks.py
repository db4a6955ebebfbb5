"""CloudFormation custom resource: fetch a user pool's JWKS at deploy time.

The authorizer verifies Cognito tokens against a fixed key set
(``RUNPLANE_JWT_JWKS``); Cognito publishes the set only at an HTTPS URL, so this
function reads it once per deployment and returns it as the ``Jwks`` attribute.
The source is inlined into the template: standard library only, under 4 KB.
"""

import json
import urllib.request
from typing import Any

PREFIX = "https://cognito-idp."
LIMIT = 3000  # a CloudFormation response (all attributes) is capped at 4096 bytes


def fetch(url: str) -> str:
    if not url.startswith(PREFIX) or not url.endswith("/.well-known/jwks.json"):
        raise ValueError("not a Cognito JWKS URL")
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - checked above
        keys = json.loads(response.read())["keys"]
    compact = json.dumps({"keys": keys}, separators=(",", ":"), sort_keys=True)
    if len(compact) > LIMIT:
        raise ValueError("the key set is too large to return")
    return compact


def respond(event: dict[str, Any], status: str, data: dict[str, str], reason: str) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason,
            "PhysicalResourceId": event["ResourceProperties"]["JwksUrl"],
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": data,
        }
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - the presigned URL CloudFormation gave
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": ""}
    )
    urllib.request.urlopen(request, timeout=10).close()  # noqa: S310


def handler(event: dict[str, Any], context: Any) -> None:
    try:
        data: dict[str, str] = {}
        if event["RequestType"] != "Delete":
            data["Jwks"] = fetch(event["ResourceProperties"]["JwksUrl"])
        respond(event, "SUCCESS", data, "ok")
    except Exception as error:  # report every failure, or the stack waits for an hour
        respond(event, "FAILED", {}, f"{type(error).__name__}: {error}"[:200])
