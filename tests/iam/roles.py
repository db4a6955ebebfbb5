"""The deployment's IAM roles, taken from the synthesized template and pointed at the
embedded stack's resources.

Every ``Ref``, ``Fn::GetAtt``, ``Fn::Join`` and ``Fn::Sub`` in a policy is resolved to
the ARN of the embedded stack's counterpart (its table, bucket, keys, secrets, state
machines and functions); a reference this module has no counterpart for raises
``Unresolvable``: it never becomes "*".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from runplane.local.stack import ACCOUNT, REGION

PARTITION = "aws"


class Unresolvable(LookupError):
    """A reference in a policy that the embedded stack has no counterpart for."""


@dataclass(frozen=True)
class EmbeddedResources:
    """What the embedded stack created, by the deployment resource it stands for."""

    table: str
    stream_arn: str
    artifact_bucket: str
    data_key_arn: str
    signing_key_arn: str
    secret_arns: dict[str, str]
    state_machines: dict[str, str]
    schedule_group: str
    # The deployment's resource names (prefix ``runplane-prod-``) and the embedded ones.
    names: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Role:
    logical_id: str
    service: str  # who may assume it (lambda.amazonaws.com, states..., ecs-tasks...)
    documents: list[dict[str, Any]]  # resolved policy documents (inline and attached)
    aws_managed: list[str]  # AWS-managed policy ARNs attached


def _arn(service: str, resource: str, region: str = REGION, account: str = ACCOUNT) -> str:
    return f"arn:{PARTITION}:{service}:{region}:{account}:{resource}"


class Resolver:
    def __init__(self, template: dict[str, Any], embedded: EmbeddedResources) -> None:
        self._resources: dict[str, dict[str, Any]] = template["Resources"]
        self._embedded = embedded

    def _type(self, logical_id: str) -> str:
        if logical_id not in self._resources:
            raise Unresolvable(f"no resource {logical_id} in the template")
        return str(self._resources[logical_id]["Type"])

    def _embedded_function(self, logical_id: str) -> str:
        """A function's embedded name: the workflow's tasks are runplane-<Task>; the
        others are not invoked by any role and keep a name of their own."""
        handler = str(self._resources[logical_id]["Properties"].get("Handler", ""))
        task = re.fullmatch(r"(?:Tasks|Sources)(\w+?)Function[0-9A-F]{8}", logical_id)
        if task and handler.startswith("functions.tasks."):
            return f"runplane-{task.group(1)}"
        return f"runplane-{logical_id}"

    def _secret(self, logical_id: str) -> str:
        for prefix, arn in self._embedded.secret_arns.items():
            if logical_id.startswith(prefix):
                return arn
        raise Unresolvable(f"no embedded secret stands for {logical_id}")

    def ref(self, name: str) -> str:
        pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": PARTITION}
        if name in pseudo:
            return pseudo[name]
        kind = self._type(name)
        if kind == "AWS::SecretsManager::Secret":
            return self._secret(name)
        if kind == "AWS::ECS::Cluster":
            return "runplane-sandboxes"  # the embedded stack has no cluster: never called
        if kind == "AWS::ECS::TaskDefinition":
            return _arn("ecs", "task-definition/runplane-runner:1")
        if kind == "AWS::DynamoDB::Table":
            return self._embedded.table
        raise Unresolvable(f"Ref {name} ({kind})")

    def get_att(self, name: str, attribute: str) -> str:
        kind = self._type(name)
        embedded = self._embedded
        found: dict[tuple[str, str], Any] = {
            ("AWS::DynamoDB::Table", "Arn"): lambda: _arn("dynamodb", f"table/{embedded.table}"),
            ("AWS::DynamoDB::Table", "StreamArn"): lambda: embedded.stream_arn,
            ("AWS::S3::Bucket", "Arn"): lambda: f"arn:{PARTITION}:s3:::{self._bucket(name)}",
            ("AWS::KMS::Key", "Arn"): lambda: self._key(name),
            ("AWS::Lambda::Function", "Arn"): lambda: _arn(
                "lambda", f"function:{self._embedded_function(name)}"
            ),
            ("AWS::IAM::Role", "Arn"): lambda: f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}",
            ("AWS::SQS::Queue", "Arn"): lambda: _arn("sqs", name),
            ("AWS::Logs::LogGroup", "Arn"): lambda: _arn("logs", f"log-group:{name}:*"),
            ("AWS::ECS::Cluster", "Arn"): lambda: _arn("ecs", "cluster/runplane-sandboxes"),
            ("AWS::Cognito::UserPool", "Arn"): lambda: _arn("cognito-idp", f"userpool/{name}"),
        }
        if (kind, attribute) not in found:
            raise Unresolvable(f"Fn::GetAtt {name}.{attribute} ({kind})")
        return str(found[(kind, attribute)]())

    def _bucket(self, logical_id: str) -> str:
        if logical_id.startswith("StorageArtifacts"):
            return self._embedded.artifact_bucket
        if logical_id.startswith("StorageAccessLogs"):
            return "runplane-access-logs"  # the embedded stack keeps no access logs
        raise Unresolvable(f"no embedded bucket stands for {logical_id}")

    def _key(self, logical_id: str) -> str:
        if logical_id.startswith("StorageKey"):
            return self._embedded.data_key_arn
        if logical_id.startswith("OidcIssuerSigningKey"):
            return self._embedded.signing_key_arn
        raise Unresolvable(f"no embedded key stands for {logical_id}")

    def _rename(self, text: str) -> str:
        names = self._embedded.names
        for deployed in sorted(names, key=len, reverse=True):
            text = re.sub(rf"{re.escape(deployed)}(?![\w-])", names[deployed], text)
        return text

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if isinstance(value, str):
            return self._rename(value)
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self.ref(argument)
            if key == "Fn::GetAtt":
                return self.get_att(*argument)
            if key == "Fn::Join":
                separator, parts = argument
                return self._rename(separator.join(str(self.resolve(p)) for p in parts))
            if key == "Fn::Sub":
                return self._sub(argument)
            if key.startswith("Fn::") or key == "Condition":
                raise Unresolvable(f"{key} is not resolved here")
        return {key: self.resolve(item) for key, item in value.items()}

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name:
                return self.get_att(*name.split(".", 1))
            return self.ref(name)

        return self._rename(re.sub(r"\$\{([^}!]+)\}", replace, text))


def deployment_roles(template: dict[str, Any], embedded: EmbeddedResources) -> dict[str, Role]:
    """Every role of the template with all its policies, resolved."""
    resolver = Resolver(template, embedded)
    resources: dict[str, dict[str, Any]] = template["Resources"]
    documents: dict[str, list[dict[str, Any]]] = {}
    managed: dict[str, list[str]] = {}
    services: dict[str, str] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        properties = resource["Properties"]
        [trust] = properties["AssumeRolePolicyDocument"]["Statement"]
        services[logical_id] = str(trust["Principal"].get("Service", trust["Principal"]))
        documents[logical_id] = [
            resolver.resolve(inline["PolicyDocument"]) for inline in properties.get("Policies", [])
        ]
        managed[logical_id] = [
            str(resolver.resolve(arn)) for arn in properties.get("ManagedPolicyArns", [])
        ]
    for resource in resources.values():
        if resource["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        properties = resource["Properties"]
        for role in properties.get("Roles", []):
            name = role["Ref"] if isinstance(role, dict) else role
            if name not in documents:
                raise Unresolvable(f"a policy is attached to {name}, not a role of the template")
            documents[name].append(resolver.resolve(properties["PolicyDocument"]))
    roles = {
        logical_id: Role(
            logical_id, services[logical_id], documents[logical_id], managed[logical_id]
        )
        for logical_id in documents
    }
    for role in roles.values():
        if "Fn::" in json.dumps(role.documents) or "Ref" in json.dumps(role.documents):
            raise Unresolvable(f"{role.logical_id} kept an unresolved reference")
    return roles


def function_roles(template: dict[str, Any]) -> dict[str, str]:
    """Each of our functions' handler (``functions.…``) and its role's logical ID."""
    found: dict[str, str] = {}
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function" and str(
            properties.get("Handler", "")
        ).startswith("functions."):
            found[properties["Handler"]] = properties["Role"]["Fn::GetAtt"][0]
    return found


def state_machine_roles(template: dict[str, Any], embedded: EmbeddedResources) -> dict[str, str]:
    """Each embedded state machine's ARN and the role the deployment gives it."""
    found: dict[str, str] = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        properties = resource["Properties"]
        name = embedded.names[properties["StateMachineName"]]
        found[embedded.state_machines[name]] = properties["RoleArn"]["Fn::GetAtt"][0]
    return found
