"""Synthesizing the app for tests, and reading the resulting template."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Template

from infra.app import NO_BUNDLING, build_app
from infra.config import RunplaneConfig

BUILD_SHA = "0123456789abcdef0123456789abcdef01234567"


def synthesize(outdir: Path, context: Mapping[str, Any]) -> Synthesized:
    app, stack = build_app({**NO_BUNDLING, "buildSha": BUILD_SHA, **context}, str(outdir))
    assembly = app.synth()
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    path = Path(assembly.directory) / artifact.template_file
    template = json.loads(path.read_text(encoding="utf-8"))
    return Synthesized(
        outdir=Path(assembly.directory),
        template_path=path,
        template=template,
        assertions=Template.from_json(template),
        config=stack.config,
    )


def ref(value: Any) -> str | None:
    """The logical ID a ``Ref`` or ``Fn::GetAtt`` names, else None."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass
class Synthesized:
    outdir: Path
    template_path: Path
    template: dict[str, Any]
    assertions: Template
    config: RunplaneConfig

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return dict(self.template["Resources"])

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v.get("Properties", {}) for k, v in self.resources.items() if v["Type"] == kind}

    def one(self, kind: str) -> tuple[str, dict[str, Any]]:
        found = self.of_type(kind)
        assert len(found) == 1, f"expected one {kind}, found {sorted(found)}"
        return next(iter(found.items()))

    def data_key(self) -> tuple[str, dict[str, Any]]:
        """The envelope-encryption key (symmetric); the issuer's signing keys are RSA."""
        found = {k: p for k, p in self.of_type("AWS::KMS::Key").items() if "KeySpec" not in p}
        assert len(found) == 1, f"expected one data key, found {sorted(found)}"
        return next(iter(found.items()))

    def signing_keys(self) -> dict[str, dict[str, Any]]:
        """The OpenID Connect issuer's signing keys (RSA_2048, SIGN_VERIFY)."""
        return {k: p for k, p in self.of_type("AWS::KMS::Key").items() if "KeySpec" in p}

    # -- functions and roles ---------------------------------------------------------------

    def functions(self) -> dict[str, dict[str, Any]]:
        """Our entry-point functions by handler (``functions.…``)."""
        return {
            p["Handler"]: {**p, "LogicalId": k}
            for k, p in self.of_type("AWS::Lambda::Function").items()
            if str(p.get("Handler", "")).startswith("functions.")
        }

    def function(self, handler: str) -> dict[str, Any]:
        return self.functions()[handler]

    def statements(self, role: str) -> list[dict[str, Any]]:
        """Every policy statement that applies to role ``role`` (inline and attached)."""
        found: list[dict[str, Any]] = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if role in {ref(r) for r in policy.get("Roles", [])}:
                found += policy["PolicyDocument"]["Statement"]
        for policy in self.of_type("AWS::IAM::ManagedPolicy").values():
            if role in {ref(r) for r in policy.get("Roles", [])}:
                found += policy["PolicyDocument"]["Statement"]
        for inline in self.of_type("AWS::IAM::Role")[role].get("Policies", []):
            found += inline["PolicyDocument"]["Statement"]
        return found

    def actions(self, role: str) -> set[str]:
        return {
            action
            for statement in self.statements(role)
            if statement["Effect"] == "Allow"
            for action in as_list(statement["Action"])
        }

    def grants(self, role: str) -> Iterator[tuple[str, Any, dict[str, Any]]]:
        """(action, resource, condition) for every allowed action and resource."""
        for statement in self.statements(role):
            if statement["Effect"] != "Allow":
                continue
            for action in as_list(statement["Action"]):
                for resource in as_list(statement["Resource"]):
                    yield action, resource, statement.get("Condition", {})

    def role_of(self, handler: str) -> str:
        role = ref(self.function(handler)["Role"])
        assert role is not None
        return role

    def environment(self, handler: str) -> dict[str, Any]:
        return dict(self.function(handler)["Environment"]["Variables"])
