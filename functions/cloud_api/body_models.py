"""The Cloud API's JSON:API request bodies, and where a refused one went wrong.

Apart from the documents (``jsonapi``): only a route that reads a body imports these,
so a read's first request does not create their model classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from runplane.domain.state import MAX_LINEAGE, MAX_SERIAL

# Bounds that keep a workspace record far below DynamoDB's 400 KB item limit.
MAX_TAGS = 50
Tag = Annotated[str, Field(min_length=1, max_length=255)]


class _Body(BaseModel):
    # Validators are built by the first request that reads such a body, not at import.
    model_config = ConfigDict(defer_build=True)


class _Attributes(_Body):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class WorkspaceAttributes(_Attributes):
    name: str | None = Field(default=None, min_length=1, max_length=90)
    terraform_version: str | None = Field(default=None, alias="terraform-version", max_length=40)
    description: str | None = Field(default=None, max_length=1000)
    tag_names: list[Tag] | None = Field(default=None, alias="tag-names", max_length=MAX_TAGS)
    execution_mode: str | None = Field(default=None, alias="execution-mode")
    # HCP Terraform's ephemeral workspace settings (docs/auto-destroy.md); null clears.
    auto_destroy_at: StrictStr | None = Field(default=None, alias="auto-destroy-at", max_length=64)
    auto_destroy_activity_duration: StrictStr | None = Field(
        default=None, alias="auto-destroy-activity-duration", max_length=16
    )


class WorkspaceData(_Body):
    type: str | None = None
    attributes: WorkspaceAttributes


class WorkspaceBody(_Body):
    data: WorkspaceData


class StateVersionAttributes(_Attributes):
    # Strict types: a float, string or boolean serial is refused, never coerced.
    serial: StrictInt = Field(ge=0, le=MAX_SERIAL)
    md5: StrictStr = Field(min_length=32, max_length=32)
    lineage: StrictStr = Field(min_length=1, max_length=MAX_LINEAGE)
    state: StrictStr | None = None
    force: StrictBool = False
    json_state: StrictStr | None = Field(default=None, alias="json-state")


class StateVersionData(_Body):
    type: str | None = None
    attributes: StateVersionAttributes


class StateVersionBody(_Body):
    data: StateVersionData


# Workspace and state attributes whose JSON names differ from their fields'.
ATTRIBUTE_ALIASES = {
    "terraform_version": "terraform-version",
    "tag_names": "tag-names",
    "json_state": "json-state",
    "execution_mode": "execution-mode",
    "auto_destroy_at": "auto-destroy-at",
    "auto_destroy_activity_duration": "auto-destroy-activity-duration",
}


def pointer_of(error: ValidationError, aliases: Mapping[str, str] = {}) -> tuple[str, str]:
    """The JSON pointer and message of the first problem, for a 422 body."""
    first = error.errors()[0]
    names = {**ATTRIBUTE_ALIASES, **aliases}
    pointer = "/" + "/".join(names.get(str(p), str(p)) for p in first["loc"])
    return pointer, str(first["msg"])
