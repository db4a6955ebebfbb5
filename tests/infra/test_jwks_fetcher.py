"""The deploy-time JWKS fetch: what it returns to CloudFormation, and what it refuses."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from infra.custom_resources import jwks

URL = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc/.well-known/jwks.json"
KEYS = {"keys": [{"kid": "k1", "kty": "RSA", "alg": "RS256", "n": "AQAB", "e": "AQAB"}]}


class _Web:
    """Serves the JWKS URL and records what is PUT to the response URL."""

    def __init__(self, document: Any = KEYS) -> None:
        self.document = document
        self.responses: list[dict[str, Any]] = []
        self.fetched: list[str] = []

    def urlopen(self, request: Any, timeout: float) -> io.BytesIO:
        if isinstance(request, str):
            self.fetched.append(request)
            return io.BytesIO(json.dumps(self.document).encode())
        assert request.get_method() == "PUT"
        self.responses.append(json.loads(request.data))
        return io.BytesIO(b"")


def _event(kind: str, url: str = URL) -> dict[str, Any]:
    return {
        "RequestType": kind,
        "ResponseURL": "https://cloudformation-custom-resource-response.example/presigned",
        "StackId": "stack",
        "RequestId": "request",
        "LogicalResourceId": "Jwks",
        "ResourceProperties": {"JwksUrl": url},
    }


@pytest.fixture
def web(monkeypatch: pytest.MonkeyPatch) -> _Web:
    fake = _Web()
    monkeypatch.setattr("infra.custom_resources.jwks.urllib.request.urlopen", fake.urlopen)
    return fake


@pytest.mark.parametrize("kind", ["Create", "Update"])
def test_the_key_set_is_returned_compact(web: _Web, kind: str) -> None:
    jwks.handler(_event(kind), None)
    (response,) = web.responses
    assert response["Status"] == "SUCCESS"
    assert json.loads(response["Data"]["Jwks"]) == KEYS
    assert " " not in response["Data"]["Jwks"]
    assert web.fetched == [URL]


def test_delete_fetches_nothing(web: _Web) -> None:
    jwks.handler(_event("Delete"), None)
    (response,) = web.responses
    assert response["Status"] == "SUCCESS"
    assert response["Data"] == {}
    assert web.fetched == []


def test_only_cognito_key_sets_are_fetched(web: _Web) -> None:
    jwks.handler(_event("Create", "https://attacker.example/.well-known/jwks.json"), None)
    (response,) = web.responses
    assert response["Status"] == "FAILED"
    assert web.fetched == []


def test_a_failure_is_reported_rather_than_left_hanging(web: _Web) -> None:
    web.document = {"no": "keys"}
    jwks.handler(_event("Create"), None)
    (response,) = web.responses
    assert response["Status"] == "FAILED"
    assert "KeyError" in response["Reason"]


def test_the_source_fits_inline_in_a_template() -> None:
    assert len(Path(jwks.__file__).read_text(encoding="utf-8")) < 4096
