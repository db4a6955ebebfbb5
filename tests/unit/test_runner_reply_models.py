"""A runner reply that strays from its model fails in the handler, and the error it
raises (which the platform logs) never quotes the secrets the reply carries."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from functions.api.routers.runner import DownloadGrantView, SessionStarted

SECRET_URL = "https://s3/a?sig=hush"
SECRET_KEY = "a2V5LWhdXNo"


def grant(**changes: Any) -> dict[str, Any]:
    granted = {
        "url": SECRET_URL,
        "data_key": SECRET_KEY,
        "artifact_id": "art_1",
        "size": 12,
        "sha256": "0" * 64,
    }
    return {**granted, **changes}


def test_a_download_grant_validates_as_the_service_returns_it() -> None:
    # Given a download grant as the service returns it
    # When it is the reply, then it goes out unchanged
    reply = DownloadGrantView.model_validate(grant())
    assert reply.model_dump(mode="json", exclude_unset=True) == grant()


@pytest.mark.parametrize(
    "strayed",
    [grant(next_url=SECRET_URL), {"url": SECRET_URL}, grant(size=SECRET_KEY)],
    ids=["an unnamed field", "missing fields", "a mistyped field"],
)
def test_a_strayed_reply_is_refused_without_quoting_its_secrets(strayed: dict[str, Any]) -> None:
    # Given a grant with a field its model does not name, without those it requires, or
    # with one of another type (each error quoting a secret, were it quoted)
    # When it is validated as the reply
    with pytest.raises(ValidationError) as refused:
        DownloadGrantView.model_validate(strayed)
    # Then it is refused, and the error names the field but not the grant's secrets
    message = str(refused.value)
    assert SECRET_URL not in message
    assert SECRET_KEY not in message


def test_a_session_start_missing_its_manifest_does_not_quote_its_token() -> None:
    # Given a session start reply without its manifest
    started = {"token": "rps_secret-session-token", "grants": {}}
    # When it is validated, then the refusal names what is missing, not the token
    with pytest.raises(ValidationError) as refused:
        SessionStarted.model_validate(started)
    assert "manifest" in str(refused.value)
    assert "rps_secret" not in str(refused.value)
