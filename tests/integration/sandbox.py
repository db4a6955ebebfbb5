"""What a sandbox does with its grants, over real HTTP transfer URLs (moto S3)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from datetime import timedelta

import requests

from runplane.adapters.envelope import Decryption, Encryption
from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.ids import IdKind
from runplane.domain.parts import AttemptBody, AttemptState
from runplane.services.artifacts import DownloadGrant, UploadGrant
from runplane.services.attempts import attempt_part
from runplane.services.capabilities import SessionGrant
from runplane.store import run_parts
from tests.integration.conftest import Stack


def new_binding(stack: Stack, phase: Phase = Phase.PLAN) -> Binding:
    """A binding whose attempt is open, as a workflow's start step leaves it (a session
    is created only for an open attempt)."""
    binding = Binding(
        run_id=stack.ids.new(IdKind.RUN),
        attempt_id=stack.ids.new(IdKind.ATTEMPT),
        phase=phase,
        sandbox_id=stack.ids.new(IdKind.SANDBOX),
    )
    now = stack.clock.now()
    body = AttemptBody(binding.attempt_id, binding.sandbox_id, phase.value, now.isoformat())
    run_parts.put(
        binding.run_id,
        attempt_part(phase),
        state=AttemptState.STARTED,
        body=body.to_body(),
        now=now,
    ).commit()
    return binding


def session_for(
    stack: Stack, organization_id: str, inputs: Iterable[str] = (), phase: Phase = Phase.PLAN
) -> SessionGrant:
    binding = new_binding(stack, phase)
    minted = stack.capabilities.mint(
        CapabilityKind.BOOTSTRAP,
        binding,
        lifetime=timedelta(minutes=15),
        organization_id=organization_id,
        inputs=list(inputs),
    )
    return stack.sessions.start(minted.handle, binding)


def fetch(grant: DownloadGrant) -> bytes:
    response = requests.get(grant.url, timeout=30)
    response.raise_for_status()
    stream = io.BytesIO(response.content)
    decryption = Decryption(
        grant.data_key, grant.artifact_id, expected_sha256=grant.sha256, expected_size=grant.size
    )
    return b"".join(decryption.stream(stream.read))


def put(grant: UploadGrant, plaintext: bytes) -> tuple[int, str]:
    encryption = Encryption(grant.data_key, grant.artifact_id, limit=grant.max_size)
    body = b"".join(encryption.stream([plaintext]))
    requests.put(grant.url, data=body, timeout=30).raise_for_status()
    assert encryption.sha256 is not None
    return encryption.size, encryption.sha256


def put_raw(url: str, body: bytes) -> None:
    requests.put(url, data=body, timeout=30).raise_for_status()
