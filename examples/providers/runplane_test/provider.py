"""``runplane/test``: a tiny Terraform/OpenTofu provider used as a test double.

It has one resource, ``test_thing``, whose state *is* the resource: create, update and
delete touch nothing outside the engine's state, make no network calls and are fully
deterministic. Two switches make applies fail on demand:

``fail_on_apply``
    create and update return an error and no change (a failed create leaves nothing in
    state; a failed update keeps the prior state).
``fail_after_partial``
    create and update "half succeed": the new state is returned *with* an error, so the
    engine records it (a create is recorded as tainted) and exits non-zero.

Run as a script by the engine (see ``examples/providers/install.py``); it needs only the
``tf`` package (PyPI ``tf>=1.2,<1.3``). Not for production.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

# tf ships no type information (no py.typed).
from tf import runner, schema, types  # type: ignore[import-untyped]
from tf.iface import (  # type: ignore[import-untyped]
    Config,
    CreateContext,
    DataSource,
    DeleteContext,
    PlanContext,
    Provider,
    ReadContext,
    ReadDataContext,
    Resource,
    State,
    UpdateContext,
)
from tf.utils import Diagnostics  # type: ignore[import-untyped]

NAMESPACE = "runplane"
TYPE = "test"
VERSION = "0.1.0"
FULL_NAME = f"registry.terraform.io/{NAMESPACE}/{TYPE}"


def thing_id(name: str) -> str:
    """The deterministic ``id`` of a ``test_thing`` called ``name``."""
    return "thing-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


class Thing(Resource):  # type: ignore[misc]
    """``test_thing``: a named piece of content that lives only in the state."""

    def __init__(self, provider: TestProvider) -> None:
        self.provider = provider

    @classmethod
    def get_name(cls) -> str:
        return "thing"

    @classmethod
    def get_schema(cls) -> schema.Schema:
        return schema.Schema(
            version=1,
            attributes=[
                schema.Attribute(
                    "name",
                    types.String(),
                    description="Name of the thing; changing it replaces the thing.",
                    required=True,
                    requires_replace=True,
                ),
                schema.Attribute(
                    "content", types.String(), description="Free text.", optional=True
                ),
                schema.Attribute(
                    "fail_on_apply",
                    types.Bool(),
                    description="Fail create/update with an error, changing nothing "
                    "(unset means false).",
                    optional=True,
                ),
                schema.Attribute(
                    "fail_after_partial",
                    types.Bool(),
                    description="Fail create/update with an error after recording the new "
                    "state (unset means false).",
                    optional=True,
                ),
                schema.Attribute(
                    "sleep_seconds",
                    types.Number(),
                    description="Take this long to create or update (a slow apply).",
                    optional=True,
                ),
                schema.Attribute(
                    "plan_sleep_seconds",
                    types.Number(),
                    description="Take this long to validate (a slow plan).",
                    optional=True,
                ),
                schema.Attribute(
                    "require_credentials",
                    types.Bool(),
                    description="Fail the plan the way a cloud provider does when it finds "
                    "no credentials, unless TEST_PROVIDER_CREDENTIALS is set.",
                    optional=True,
                ),
                schema.Attribute(
                    "id", types.String(), description="Derived from the name.", computed=True
                ),
                schema.Attribute(
                    "revision",
                    types.Number(),
                    description="1 after create, incremented by every update.",
                    computed=True,
                ),
            ],
        )

    def validate(self, diags: Diagnostics, type_name: str, config: Any) -> None:
        if config.get("plan_sleep_seconds"):
            time.sleep(float(config["plan_sleep_seconds"]))
        if config.get("require_credentials") and not os.environ.get("TEST_PROVIDER_CREDENTIALS"):
            # The wording of the AWS provider, which runners recognise as missing credentials.
            diags.add_error(
                "No valid credential sources found",
                "Please see the provider documentation for how to configure credentials.",
            )

    def plan(self, ctx: PlanContext, current: State | None, planned: State) -> State:
        # An update changes ``revision``: it must be planned as unknown, else the engine
        # reports "Provider produced inconsistent result after apply".
        if current is not None and ctx.changed_fields:
            planned["revision"] = types.Unknown
        return planned

    def create(self, ctx: CreateContext, planned: State) -> State | None:
        state = {**planned, "id": thing_id(planned["name"]), "revision": 1}
        return self._finish(ctx.diagnostics, state, fallback=None)

    def read(self, ctx: ReadContext, current: State) -> State:
        return current

    def update(self, ctx: UpdateContext, current: State, planned: State) -> State | None:
        state = {**planned, "id": current["id"], "revision": int(current["revision"] or 0) + 1}
        return self._finish(ctx.diagnostics, state, fallback=current)

    def delete(self, ctx: DeleteContext, current: State) -> None:
        return None

    @staticmethod
    def _finish(diags: Diagnostics, state: State, *, fallback: State | None) -> State | None:
        name = state["name"]
        if state.get("sleep_seconds"):
            time.sleep(float(state["sleep_seconds"]))
        if state.get("fail_on_apply"):
            diags.add_error(f"test_thing {name}: failing on demand", "fail_on_apply is true")
            return fallback
        if state.get("fail_after_partial"):
            diags.add_error(
                f"test_thing {name}: failing after a partial apply",
                "fail_after_partial is true; the new state was recorded",
            )
        return state


class CallerIdentity(DataSource):  # type: ignore[misc]
    """``test_caller_identity``: who the engine's AWS credentials say it is.

    It asks AWS STS ``GetCallerIdentity`` with the credentials the engine's environment
    holds (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
    ``AWS_REGION``; ``AWS_ENDPOINT_URL`` points it at a local STS), exactly as a cloud
    provider would, and reports the ARN: a plan can show which role it ran as."""

    def __init__(self, provider: TestProvider) -> None:
        self.provider = provider

    @classmethod
    def get_name(cls) -> str:
        return "caller_identity"

    @classmethod
    def get_schema(cls) -> schema.Schema:
        return schema.Schema(
            version=1,
            attributes=[
                schema.Attribute(
                    "arn", types.String(), description="The caller's ARN.", computed=True
                ),
                schema.Attribute(
                    "account", types.String(), description="The caller's account.", computed=True
                ),
                schema.Attribute(
                    "user_id", types.String(), description="The caller's user id.", computed=True
                ),
            ],
        )

    def read(self, ctx: ReadDataContext, config: Config) -> State | None:
        if not os.environ.get("AWS_ACCESS_KEY_ID"):
            # The AWS provider's wording, which runners recognise as missing credentials.
            ctx.diagnostics.add_error(
                "No valid credential sources found",
                "Please see the provider documentation for how to configure credentials.",
            )
            return None
        import boto3  # only a data source asking for it pays for the SDK

        try:
            # Either region variable, as the AWS provider reads them.
            region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            found = boto3.client("sts", region_name=region).get_caller_identity()
        except Exception as error:
            ctx.diagnostics.add_error("test_caller_identity: STS refused", str(error)[:300])
            return None
        return {"arn": found["Arn"], "account": found["Account"], "user_id": found["UserId"]}


class TestProvider(Provider):  # type: ignore[misc]
    """The ``runplane/test`` provider: no configuration, one resource."""

    __test__ = False  # not a pytest test class

    def get_model_prefix(self) -> str:
        return f"{TYPE}_"

    def full_name(self) -> str:
        return FULL_NAME

    def get_provider_schema(self, diags: Diagnostics) -> schema.Schema:
        return schema.Schema(version=1)

    def validate_config(self, diags: Diagnostics, config: Config) -> None:
        pass

    def configure_provider(self, diags: Diagnostics, config: Config) -> None:
        pass

    def get_data_sources(self) -> list[Any]:
        return [CallerIdentity]

    def get_resources(self) -> list[type[Resource]]:
        return [Thing]


def main() -> None:
    runner.run_provider(TestProvider())


if __name__ == "__main__":
    main()
