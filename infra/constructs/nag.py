"""Acknowledging an AWS Solutions (cdk-nag) finding: always with a written reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Accept finding ``rule`` (e.g. ``AwsSolutions-IAM5[Resource::*]``) on ``construct``
    and its children, for ``reason``."""
    if len(reason.split()) < 5:
        raise ValueError(f"acknowledging {rule} needs a real reason, not {reason!r}")
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def logical_id(construct: IConstruct) -> str:
    """The template logical ID of ``construct``'s CloudFormation resource, as cdk-nag
    names it in finding IDs."""
    element = construct.node.default_child
    if not isinstance(element, CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    stack = Stack.of(construct)
    return str(stack.resolve(stack.get_logical_id(element)))
