"""The run API's OpenAPI document is accurate: schemathesis generates requests for every
operation from it and every response conforms (status, content type, body schema),
with no server error.

Runner endpoints are fuzzed too: without a sandbox's session every request is a
documented refusal (401/403/404/422), which is what is checked for them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.result import Err
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.e2e.conftest import Local, unique

EXAMPLES_PER_OPERATION = {GenerationMode.POSITIVE: 12, GenerationMode.NEGATIVE: 6}
UNCONSTRAINED = frozenset({"/webhooks/github", "/webhooks/gitlab", "/api/v1/sign-in/config"})
"""Routes whose document constrains nothing a request could break: the webhook checks
its signature before its headers, so it declares them without constraints (no
request breaks its document; its refusals are fuzzed with valid-shaped requests); the
CLI's sign-in configuration takes no input at all."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def platform_controls(local: Local) -> Iterator[dict[str, Any]]:
    """The fuzzer may change the platform's launch controls: put them back afterwards."""
    before = local.client.launch_controls("platform")
    yield before
    restored = {k: v for k, v in before.items() if k not in {"scope", "running_sandboxes"}}
    local.client.set_launch_controls("platform", **restored)


def test_the_document_declares_models_errors_and_security(local: Local) -> None:
    # When the document is read
    document = requests.get(f"{local.url}/api/v1/openapi.json", timeout=30).json()
    # Then every success answer has a model, every route its errors, and callers a scheme
    schemes = document["components"]["securitySchemes"]
    assert {"jwt", "apiToken", "runnerSession"} <= set(schemes)
    assert all(s["type"] == "http" and s["scheme"] == "bearer" for s in schemes.values())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            statuses = set(operation["responses"])
            successes = statuses & {"200", "201"}
            assert successes, where
            for status in successes:
                content = operation["responses"][status]["content"]
                if path.endswith("/logs/{phase}"):
                    # A log is plain text, read by offset (docs/runs.md).
                    assert content == {"text/plain": {"schema": {"type": "string"}}}, where
                    continue
                schema = content["application/json"]["schema"]
                assert "$ref" in schema, (where, schema)
            assert {"400", "422"} <= statuses, where
            error = operation["responses"]["422"]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/ErrorBody"}, where
            # Public routes carry their own proof (a bootstrap handle, a standby's
            # ticket, a signature). The CLI's sign-in configuration is read before any
            # credential exists.
            if path not in {
                "/api/v1/runner/sessions",
                "/api/v1/runner/standby/claim",
                "/webhooks/github",
                "/webhooks/gitlab",
                "/api/v1/sign-in/config",
            }:
                assert {"401", "403"} <= statuses, where
                assert operation["security"], where
    creates = document["paths"]["/api/v1/workspaces"]["post"]["responses"]
    assert "201" in creates
    assert {"404", "409", "413", "503"} <= set(creates)


def _fuzz(
    operation: Any,
    mode: GenerationMode,
    examples: int,
    send: Callable[[Any], requests.Response],
    failures: list[str],
) -> None:
    """Send ``examples`` generated requests to ``operation``; note each violation."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case: Any) -> None:
        response = send(case)
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as violations:
            found = list(violations.exceptions)
        except Failure as violation:
            found = [violation]
        else:
            found = []
        failures.extend(
            f"{operation.label} ({mode}): {response.status_code} {f.title}" for f in found
        )

    exercise()


# The operations are fuzzed in this many tests, so that workers share them.
FUZZ_CHUNKS = 4


@pytest.mark.parametrize("chunk", range(FUZZ_CHUNKS))
def test_fuzzed_requests_get_only_documented_answers(
    local: Local, platform_controls: Any, chunk: int
) -> None:
    # Given an organization of its own and its admin token, and every FUZZ_CHUNKS-th
    # operation of the document from the chunk's
    _, token = local.other_organization(unique("fuzzed"))
    auth = {"Authorization": f"Bearer {token}"}
    schema = schemathesis.openapi.from_url(f"{local.url}/api/v1/openapi.json")
    session = requests.Session()
    failures: list[str] = []
    seen: Counter[int] = Counter()

    def send(case: Any) -> requests.Response:
        response: requests.Response = case.call(base_url=local.url, session=session, headers=auth)
        seen[response.status_code] += 1
        return response

    # When schemathesis sends generated requests to every operation: valid ones, and
    # ones that break the document (which must be refused with a documented 4xx)
    for index, result in enumerate(schema.get_all_operations()):
        if isinstance(result, Err):
            raise result.err()
        if index % FUZZ_CHUNKS != chunk:
            continue
        for mode, examples in EXAMPLES_PER_OPERATION.items():
            if mode is GenerationMode.NEGATIVE and result.ok().path in UNCONSTRAINED:
                continue
            _fuzz(result.ok(), mode, examples, send, failures)

    # Then no response was a server error or disagreed with the document
    assert failures == [], "\n".join(sorted(set(failures)))
    assert not any(status >= 500 for status in seen)
    print(f"\nfuzzed {sum(seen.values())} requests: {json.dumps(dict(sorted(seen.items())))}")
