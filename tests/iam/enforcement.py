"""IAM enforcement for the embedded stack's moto, with a decision for every request.

moto checks a request's signature and its caller's policies once
``settings.INITIAL_NO_AUTH_ACTION_COUNT`` requests have been served, but it compares
each policy's ``Resource`` with the real resource only for S3, SQS, IAM and STS; for
DynamoDB, KMS, Step Functions, Lambda, Secrets Manager and Scheduler it compares with
"*", which no resource-scoped statement matches (every call would be denied), and it
evaluates no condition key but those of trust policies. So while ``Enforcement`` is
on, moto's authentication stays (the access key must exist and the signature must
match) and its authorization is replaced by ``allows`` below: each request's actions,
resource ARNs and condition keys (``dynamodb:LeadingKeys``) are worked out from the
request itself and evaluated against the caller's role's statements, as AWS would.
Every decision is recorded; a denial is moto's AccessDenied reply.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from runplane.local.stack import ACCOUNT, REGION
from runplane.store.table import PARTITION_KEY

Context = dict[str, list[str]]


@dataclass(frozen=True)
class Decision:
    principal: str  # the role's logical ID, or the harness's user
    action: str
    resource: str
    allowed: bool
    how: str = "request"  # or "presign": a URL signed here, used by a sandbox


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _like(pattern: str, value: str, *, case: bool = True) -> bool:
    if not case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _value_matches(test: str, wanted: list[str], value: str) -> bool:
    if test in ("StringEquals", "ArnEquals"):
        return value in wanted
    if test in ("StringLike", "ArnLike"):
        return any(_like(w, value) for w in wanted)
    raise NotImplementedError(f"condition operator {test}")


def _condition_holds(operator: str, expected: dict[str, Any], context: Context) -> bool:
    quantifier, _, test = operator.rpartition(":")
    for key, listed in expected.items():
        wanted = [str(item) for item in _as_list(listed)]
        values = context.get(key)
        if quantifier == "ForAllValues":
            # AWS: true for an absent key or an empty set, else every value must match.
            if values and not all(_value_matches(test, wanted, v) for v in values):
                return False
        elif quantifier in ("", "ForAnyValue"):
            if not values or not any(_value_matches(test, wanted, v) for v in values):
                return False
        else:
            raise NotImplementedError(f"condition operator {operator}")
    return True


def allows(
    documents: Iterable[dict[str, Any]], action: str, resource: str, context: Context
) -> bool:
    """Whether the identity policies ``documents`` allow ``action`` on ``resource``
    (an explicit Deny wins; no Allow is an implicit deny)."""
    allowed = False
    for document in documents:
        for statement in _as_list(document["Statement"]):
            if "Action" in statement:
                concerned = any(_like(a, action, case=False) for a in _as_list(statement["Action"]))
            else:
                concerned = not any(
                    _like(a, action, case=False) for a in _as_list(statement["NotAction"])
                )
            if "Resource" in statement:
                covered = any(_like(r, resource) for r in _as_list(statement["Resource"]))
            else:
                covered = not any(_like(r, resource) for r in _as_list(statement["NotResource"]))
            if not (concerned and covered):
                continue
            conditions = statement.get("Condition", {})
            if not all(_condition_holds(op, exp, context) for op, exp in conditions.items()):
                continue
            if statement["Effect"] == "Deny":
                return False
            allowed = True
    return allowed


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


def _leading_keys(item: dict[str, Any]) -> list[str]:
    key = item.get("Key") or item.get("Item") or {}
    value = key.get(PARTITION_KEY, {}).get("S")
    if value is not None:
        return [value]
    condition = item.get("KeyConditionExpression")
    if condition:
        names = {v: k for k, v in item.get("ExpressionAttributeNames", {}).items()}
        for name, placeholder in re.findall(r"([#\w]+)\s*=\s*(:\w+)", condition):
            if names.get(name, name) == PARTITION_KEY or name == PARTITION_KEY:
                return [item["ExpressionAttributeValues"][placeholder]["S"]]
    return []


def _table(name: str, index: str | None = None) -> str:
    arn = name if name.startswith("arn:") else _arn("dynamodb", f"table/{name}")
    return f"{arn}/index/{index}" if index else arn


_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}
_TRANSACT |= {"ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}


def _dynamodb(operation: str, body: dict[str, Any]) -> list[tuple[str, str, Context]]:
    if operation in ("TransactWriteItems", "TransactGetItems"):
        found = []
        for entry in body["TransactItems"]:
            ((kind, item),) = entry.items()
            keys: Context = {"dynamodb:LeadingKeys": _leading_keys(item)}
            found.append((f"dynamodb:{_TRANSACT[kind]}", _table(item["TableName"]), keys))
        return found
    if operation in ("BatchGetItem", "BatchWriteItem"):
        found = []
        for table, request in body["RequestItems"].items():
            items = request["Keys"] if operation == "BatchGetItem" else request
            leading = [
                k
                for entry in items
                for k in _leading_keys(
                    entry if operation == "BatchGetItem" else next(iter(entry.values()))
                )
            ]
            found.append(
                (f"dynamodb:{operation}", _table(table), {"dynamodb:LeadingKeys": leading})
            )
        return found
    if "StreamArn" in body:
        return [(f"dynamodb:{operation}", body["StreamArn"], {})]
    if "ShardIterator" in body:
        # moto's iterators name their stream: "<stream arn>|..." (AWS's are opaque).
        return [(f"dynamodb:{operation}", body["ShardIterator"].split("|")[0], {})]
    if operation == "ListStreams":
        return [("dynamodb:ListStreams", "*", {})]
    resource = _table(body["TableName"], body.get("IndexName"))
    return [(f"dynamodb:{operation}", resource, {"dynamodb:LeadingKeys": _leading_keys(body)})]


def _kms_key(key_id: str) -> str:
    from moto.kms.models import kms_backends

    backend = kms_backends[ACCOUNT][REGION]
    return str(
        backend.describe_key(
            backend.get_key_id(key_id) if key_id.startswith("alias/") else key_id
        ).arn
    )


def _secret(secret_id: str) -> str:
    from moto.secretsmanager.models import secretsmanager_backends

    backend = secretsmanager_backends[ACCOUNT][REGION]
    return str(backend.describe_secret(secret_id).arn)


# Operations whose IAM action has another name (moto names some by the operation:
# since 5.2.6, a HeadObject as s3:HeadObject, which AWS authorizes as s3:GetObject).
_IAM_ACTIONS = {
    "lambda:Invoke": "lambda:InvokeFunction",
    "s3:HeadObject": "s3:GetObject",
    "s3:HeadBucket": "s3:ListBucket",
}


def requested(response: Any, action: str, resource: str) -> list[tuple[str, str, Context]]:
    """The (action, resource ARN, condition keys) a request needs to be allowed."""
    action = _IAM_ACTIONS.get(action, action)
    service, operation = action.split(":", 1)
    if service == "s3":
        return [(action, resource, {})]
    path = unquote(urlparse(response.uri).path)
    if service == "lambda":
        name = path.split("/functions/", 1)[1].split("/", 1)[0]
        name = name.split(":function:")[-1]
        return [(action, _arn("lambda", f"function:{name}"), {})]
    if service == "scheduler":
        query = parse_qs(urlparse(response.uri).query)
        name = path.rsplit("/", 1)[-1]
        group = (
            (query.get("groupName") or [None])[0]
            or (json.loads(response.body or "{}").get("GroupName"))
            or "default"
        )
        if "/schedules" in path and path != "/schedules":
            return [(action, _arn("scheduler", f"schedule/{group}/{name}"), {})]
        return [(action, "*", {})]
    raw = response.body
    if isinstance(raw, bytes):
        raw = raw.decode()
    body = raw if isinstance(raw, dict) else json.loads(raw or "{}")
    if service == "dynamodb":
        return _dynamodb(operation, body)
    if service == "kms":
        return [(action, _kms_key(body["KeyId"]), {})] if "KeyId" in body else [(action, "*", {})]
    if service == "secretsmanager":
        return [(action, _secret(body["SecretId"]), {})]
    if service == "states":
        if "stateMachineArn" in body:
            return [(action, body["stateMachineArn"], {})]
        if "executionArn" in body:
            return [(action, body["executionArn"], {})]
        if "taskToken" in body:
            # A token answers a task of the run workflow (the only one that waits for one).
            return [(action, _arn("states", "stateMachine:runplane-run"), {})]
    return [(action, resource, {})]


class Enforcement:
    """moto's authentication with ``allows`` for authorization, on while ``active``."""

    def __init__(self, policies: dict[str, list[dict[str, Any]]]) -> None:
        self.policies = policies  # principal (role logical ID or user name) -> documents
        self.decisions: list[Decision] = []
        self._lock = threading.Lock()

    def record(self, decision: Decision) -> None:
        with self._lock:
            self.decisions.append(decision)

    def denied(self) -> list[Decision]:
        with self._lock:
            return [d for d in self.decisions if not d.allowed]

    @contextmanager
    def active(self) -> Iterator[None]:
        from moto import settings
        from moto.core.authorization import ActionAuthenticatorMixin

        original = ActionAuthenticatorMixin._authenticate_and_authorize_action
        enforcement = self

        def authorize(self: Any, iam_request_cls: type, resource: str = "*") -> None:
            if self.headers.get("X-Amz-Target") in ActionAuthenticatorMixin.PUBLIC_OPERATIONS:
                return
            if "Authorization" not in self.headers:
                if "X-Amz-Signature=" in self.uri:
                    # A presigned URL: moto authenticates none (nor checks its signature
                    # or expiry); its signer's role was evaluated as it was signed.
                    return
                from moto.core.exceptions import AccessDeniedError

                enforcement.record(Decision("(unsigned)", str(self._get_action()), resource, False))
                raise AccessDeniedError(user_arn="anonymous", action=str(self._get_action()))
            parsed = urlparse(self.uri)
            path = self.raw_path + (f"?{parsed.query}" if parsed.query else "")
            request = iam_request_cls(
                account_id=self.current_account,
                method=self.method,
                path=path,
                data=self.data,
                body=self.raw_body,
                headers=self.headers,
                action=self._get_action(),
            )
            # The caller is known by its access key and session token (the constructor
            # refuses unknown ones); moto's recomputed signature differs from botocore's
            # for some REST services served over HTTP, so it is not compared.
            key = request._access_key
            principal = str(
                getattr(key, "_owner_role_name", None) or getattr(key, "_owner_user_name", "?")
            )
            documents = enforcement.policies.get(principal, [])
            for action, arn, context in requested(self, request._action, resource):
                allowed = allows(documents, action, arn, context)
                enforcement.record(Decision(principal, action, arn, allowed))
                if not allowed:
                    request._raise_access_denied()

        previous = settings.INITIAL_NO_AUTH_ACTION_COUNT
        ActionAuthenticatorMixin._authenticate_and_authorize_action = authorize  # type: ignore[method-assign]
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        try:
            yield
        finally:
            settings.INITIAL_NO_AUTH_ACTION_COUNT = previous
            ActionAuthenticatorMixin._authenticate_and_authorize_action = original  # type: ignore[method-assign]
