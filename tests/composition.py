"""The production composition root (``runplane.wiring.Services``) as the tests build it,
so no test wires services by hand: whatever the process would build, a test gets the same
way, with only its edges replaced."""

from __future__ import annotations

from typing import Any

from runplane.adapters.jwt import JwtVerifier
from runplane.adapters.keys import DataKeys
from runplane.adapters.launchers import Launcher
from runplane.adapters.object_store import ObjectStore
from runplane.domain.clock import Clock
from runplane.domain.ids import IdGenerator
from runplane.settings import Settings
from runplane.wiring import Services, run_lifecycle


def services_for(
    clock: Clock,
    ids: IdGenerator,
    *,
    table: str,
    objects: ObjectStore,
    keys: DataKeys,
    verifier: JwtVerifier | None = None,
    launcher: Launcher | None = None,
    workflow: Any = None,
    **settings: Any,
) -> Services:
    """``Services`` on the caller's table, object store and keys, with ``settings`` over
    the defaults and, when given, a fake ``workflow`` and ``launcher``.

    Runs publish no run events here (the lifecycle has none): tests of triggers,
    notifications and commit statuses drive the event worker themselves."""
    services = Services(
        Settings(table_name=table, **settings),
        clock=clock,
        ids=ids,
        verifier=verifier,
        launcher=launcher,
    )
    # Set as if already built: each is a cached property of Services.
    built: dict[str, Any] = {
        "objects": objects,
        "keys": keys,
        "lifecycle": run_lifecycle(clock, ids),
    }
    if workflow is not None:
        built["workflow"] = workflow
    vars(services).update(built)
    return services
