"""The CDK app is synthesized once per session (per configuration) and shared.

Synthesis skips asset bundling (no pip, no Docker) and writes only to a
temporary directory. The AWS Solutions checks run as part of it: a synth that
returns at all had no unacknowledged finding.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.synth import Synthesized, synthesize

# A deployment with every optional feature on: custom domain with a hosted zone, an
# existing issuer instead of Cognito, a WAF web ACL and an alarm e-mail.
CUSTOM_CONTEXT: dict[str, Any] = {
    "environmentName": "staging",
    "domainName": "runplane.example.com",
    "certificateArn": "arn:aws:acm:eu-west-1:111122223333:certificate/0f1e2d3c-aaaa-bbbb",
    "hostedZoneId": "Z0123456789ABCDEFGHIJ",
    "hostedZoneName": "example.com",
    "jwtIssuer": "https://login.example.com/realms/platform",
    "jwtAudience": "runplane",
    "jwtJwks": '{"keys":[]}',
    "webAclArn": "arn:aws:wafv2:eu-west-1:111122223333:regional/webacl/platform/abcd",
    "alarmEmail": "platform-oncall@example.com",
    "approvalWindowSeconds": "86400",
    "runnerPhaseSeconds": "7200",
    "runnerHeartbeatSeconds": "300",
    # A standby pool of two runners (docs/standby.md).
    "runnerStandby": "2",
    "sandboxCpu": "2048",
    "sandboxMemoryMiB": "8192",
    "sandboxArchitecture": "arm64",
    "logRetentionDays": "30",
    "auditRetentionDays": "2555",
    "tableDeletionProtection": "false",
    "retainData": "false",
    # A rotation under way: the second signing key signs, the first is still published.
    "oidcSigningKeyGeneration": "2",
    "oidcPublishedKeyArns": (
        "arn:aws:kms:eu-west-1:111122223333:key/0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
    ),
}


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default deployment (context from cdk.json only)."""
    return synthesize(tmp_path_factory.mktemp("cdk-default"), {})


@pytest.fixture(scope="session")
def custom_stack(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk-custom"), CUSTOM_CONTEXT)
