"""Artifacts: the encrypted inputs and outputs of runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

# The seed's launch artifact limit: 100 MB of plaintext.
MAX_LAUNCH_ARTIFACT_BYTES = 100_000_000


class ArtifactKind(StrEnum):
    CONFIGURATION = "configuration"
    LOCK_FILE = "lock_file"
    PREDECESSOR_STATE = "predecessor_state"
    PLAN = "plan"
    PLAN_JSON = "plan_json"
    LOGS = "logs"
    STATE = "state"
    STATE_JSON = "state_json"
    VARIABLES = "variables"
    POLICY_SET = "policy_set"


class ArtifactStatus(StrEnum):
    PENDING = "pending"  # a sandbox was granted an upload; nothing verified yet
    REGISTERED = "registered"  # verified and readable


@dataclass(frozen=True)
class Artifact:
    id: str
    organization_id: str
    kind: ArtifactKind
    status: ArtifactStatus
    size: int | None
    sha256: str | None
    created_at: datetime


@dataclass(frozen=True)
class Produced:
    """An artifact as the control plane holds it, with the runner attempt that uploaded
    it (None: the control plane stored it, or it was registered before records noted
    their attempt): what a runner's report is checked against
    (``domain.report_evidence``)."""

    artifact: Artifact
    attempt_id: str | None


@dataclass(frozen=True)
class ArtifactRecord:
    """An artifact's record: where its ciphertext is, its wrapped data key, and what it
    must decrypt to."""

    artifact: Artifact
    object_key: str
    wrapped_key: bytes
    chunk_size: int
    etag: str | None
    session_id: str | None
    # The runner attempt whose session registered it (None: the control plane stored
    # it, or it was registered before records noted their attempt).
    attempt_id: str | None = None

    @property
    def produced(self) -> Produced:
        """What a runner's report is checked against (``domain.report_evidence``)."""
        return Produced(self.artifact, self.attempt_id)
