"""Context options: parsed from strings, validated before anything is built."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

import pytest

from infra.config import ENGINE_SHA256, ENGINE_VERSION, ConfigError, RunplaneConfig, _context_key
from infra.constructs.assets import REPO


def _config(**context: Any) -> RunplaneConfig:
    return RunplaneConfig.from_context(context.get)


def test_defaults_deploy_a_working_control_plane() -> None:
    config = _config()
    assert config.prefix == "runplane-prod"
    assert config.approval_window_seconds == 7 * 24 * 3600
    assert config.engine_version == ENGINE_VERSION
    assert config.engine_checksum == ENGINE_SHA256["amd64"]
    assert config.uses_cognito


def test_command_line_strings_are_parsed() -> None:
    config = _config(
        sandboxCpu="2048",
        sandboxMemoryMiB="4096",
        tableDeletionProtection="false",
        logRetentionDays="365",
        sandboxArchitecture="arm64",
    )
    assert (config.sandbox_cpu, config.sandbox_memory_mib) == (2048, 4096)
    assert config.table_deletion_protection is False
    assert config.log_retention_days == 365
    assert config.engine_checksum == ENGINE_SHA256["arm64"]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"environmentName": "Prod"}, "environmentName"),
        ({"approvalWindowSeconds": str(31 * 24 * 3600)}, "approvalWindowSeconds"),
        ({"runnerPhaseSeconds": str(5 * 3600)}, "runnerPhaseSeconds"),
        ({"runnerHeartbeatSeconds": "14400"}, "runnerHeartbeatSeconds"),
        ({"sandboxCpu": "1024", "sandboxMemoryMiB": "512"}, "sandboxMemoryMiB"),
        ({"sandboxCpu": "3000"}, "sandboxCpu"),
        ({"sandboxArchitecture": "riscv"}, "sandboxArchitecture"),
        ({"engineVersion": "1.9.0"}, "engineSha256"),
        ({"engineSha256": "abc"}, "engineSha256"),
        ({"logRetentionDays": "10"}, "logRetentionDays"),
        ({"natGateways": "0"}, "natGateways"),
        ({"auditRetentionDays": "-1"}, "auditRetentionDays"),
        ({"auditRetentionDays": "36501"}, "auditRetentionDays"),
        ({"auditRetentionDays": "a year"}, "auditRetentionDays"),
        ({"domainName": "runplane.example.com"}, "certificateArn"),
        ({"hostedZoneId": "Z1", "hostedZoneName": "example.com"}, "domainName"),
        ({"jwtIssuer": "https://issuer.example.com"}, "jwtAudience"),
        ({"tableDeletionProtection": "maybe"}, "tableDeletionProtection"),
        ({"apiThrottleRate": "fast"}, "apiThrottleRate"),
        ({"buildSha": "main"}, "buildSha"),
    ],
)
def test_invalid_values_fail_the_synth(context: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**context)


def test_another_engine_needs_its_checksum() -> None:
    checksum = "a" * 64
    config = _config(engineVersion="1.9.0", engineSha256=checksum)
    assert (config.engine_version, config.engine_checksum) == ("1.9.0", checksum)


def test_the_deploy_guide_documents_every_option() -> None:
    # Given the operator's guide
    guide = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    table = [line for line in guide.splitlines() if line.startswith("| `")]
    documented = {key for line in table for key in re.findall(r"`(\w+)`", line.split("|")[1])}
    # Then its options table names exactly the context keys the app reads
    keys = {_context_key(f.name) for f in fields(RunplaneConfig)}
    assert documented == keys
