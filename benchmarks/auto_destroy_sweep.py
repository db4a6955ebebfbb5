"""The auto-destroy sweep: DynamoDB requests and time per armed workspace.

    python -m benchmarks.auto_destroy_sweep [--armed 50 200] [--repeat 3]

For each count N: N workspaces with an uploaded configuration are armed (moto's
DynamoDB, S3 and KMS in process, the real services and store). Three sweeps are
measured: one with nothing due (each workspace waits), one 23 hours before (each gets
its 24 h notice) and one once due (each gets its destroy run). Reported: DynamoDB
requests per workspace (a count that does not depend on the machine) and the median
seconds per workspace (moto's, not DynamoDB's). Requests per workspace should stay
flat as N grows: a sweep's cost is linear in the armed workspaces and nothing else.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import boto3
from moto import mock_aws

from runplane.adapters.ids import RandomIds
from runplane.adapters.keys import DataKeys
from runplane.adapters.object_store import ObjectStore
from runplane.domain.auto_destroy import AutoDestroySettings
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.local import moto_serial
from runplane.store import models
from runplane.store.provision import create_table
from tests.composition import services_for
from tests.fakes import FakeClock
from tests.integration.arena import FakeLauncher, FakeWorkflow

TABLE, BUCKET = "runplane-bench", "runplane-bench-artifacts"


def _requests() -> int:
    return sum(moto_serial.REQUEST_COUNTS.get("dynamodb", Counter()).values())


def measure(armed: int, repeat: int) -> dict[str, Any]:
    moto_serial.serialize_requests("dynamodb")
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE)
        models.bind(TABLE, "us-east-1")
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        kms = boto3.client("kms", region_name="us-east-1")
        key = kms.create_key(Description="bench")["KeyMetadata"]["KeyId"]
        clock = FakeClock()
        services = services_for(
            clock,
            RandomIds(),
            table=TABLE,
            objects=ObjectStore(s3, BUCKET),
            keys=DataKeys(kms, key),
            launcher=FakeLauncher(),
            workflow=FakeWorkflow(),
            policy_runtime="none",
            definition_version="bench",
            build_sha="bench",
            runner_release="runner@bench",
        )
        org = services.tenancy.create_organization("bench")
        admin = Principal(
            kind=PrincipalKind.USER,
            id="ada",
            organization_id=org.id,
            permissions=frozenset(Permission),
            display="ada",
        )
        due = clock.now() + timedelta(days=2)
        for index in range(armed):
            workspace = services.tenancy.create_workspace(org.id, f"preview-{index}")
            upload = services.runs.new_configuration_upload(admin, workspace.id)
            version = services.runs.configuration_version(admin, upload.id)
            services.runs.store_configuration(version, b"archive")
            services.auto_destroys.set(
                admin, workspace.id, AutoDestroySettings(destroy_at=due.replace(microsecond=0))
            )
        sweeps: dict[str, Any] = {}
        for label, at in (
            ("waiting", None),
            ("24h notice", due - timedelta(hours=23)),
            ("destroy run", due + timedelta(minutes=1)),
        ):
            if at is not None:
                clock.current = at
            seconds, requests, steps = [], [], {}
            for _ in range(repeat if label == "waiting" else 1):
                before, started = _requests(), time.perf_counter()
                steps = services.auto_destroys.sweep()
                seconds.append(time.perf_counter() - started)
                requests.append(_requests() - before)
            sweeps[label] = {
                "steps": steps,
                "requests_per_workspace": round(statistics.median(requests) / armed, 1),
                "ms_per_workspace": round(1000 * statistics.median(seconds) / armed, 1),
            }
        return {"armed": armed, "sweeps": sweeps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--armed", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for armed in args.armed:
        print(json.dumps(measure(armed, args.repeat)))


if __name__ == "__main__":
    main()
