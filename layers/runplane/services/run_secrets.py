"""A run's sensitive values, read back from its sealed variables so that they can be
taken out of its plan before the plan is judged by policies or shown to anyone
(``runplane.domain.plan_secrets``): a configuration can unmark a sensitive variable
(``nonsensitive()``), and the engine then writes it into the plan in the clear."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from runplane.domain.plan_secrets import Secrets
from runplane.domain.variable_precedence import read_document

ReadArtifact = Callable[[str, str], bytes]


def sensitive_values(
    read: ReadArtifact, organization_id: str, run_input: Mapping[str, Any]
) -> Secrets:
    """The spellings of the run's sensitive Terraform and environment variables (none
    to look for when it has none: its variables are then not read). Raises what reading
    the artifact raises, and ``ValueError`` for a variables document that is not one."""
    entries = run_input.get("variables") or []
    if not any(isinstance(v, Mapping) and v.get("sensitive") for v in entries):
        return Secrets(())
    raw = read(organization_id, str(run_input.get("variables_artifact_id")))
    document = read_document(json.loads(raw))
    names = set(run_input.get("sensitive_variable_names") or [])
    return Secrets(
        [value for name, value in document.terraform.items() if name in names]
        + [value for name, value in document.env.items() if name in document.sensitive_env]
    )
