"""One organization's trickling webhook endpoints against another's delivery, across
concurrent invocations of the worker Lambda (issue: A's `errored` notification 50 s late).

    python -m benchmarks.notification_fairness [--pace 1.0] [--destinations 4]
        [--invocations 4] [--repeat 3]

moto's SQS, DynamoDB and KMS in process; the worker Lambda's real entry point invoked
on ``--invocations`` threads (the event source mapping's maximum concurrency), one
record per invocation, so the shares within a batch cannot help. Organization B's
errored event goes to ``--destinations`` endpoints that answer one byte every
``--pace`` seconds (at 1 s, each POST runs into its 15 s deadline); once two of them
are in flight, A's errored event is published, and A's latency is measured from
publishing to its endpoint receiving the POST.

Measured twice in the same run: with the in-flight slots in the table (the deployed
worker) and without them (only the per-batch shares, as before), reported as a
ratio. Prints a table, then one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import boto3
from moto import mock_aws

from runplane import wiring
from runplane.adapters.clock import SystemClock
from runplane.adapters.ids import RandomIds
from runplane.adapters.keys import DataKeys
from runplane.adapters.object_store import ObjectStore
from runplane.local import moto_serial
from runplane.store import models
from runplane.store.provision import create_table
from tests.composition import services_for
from tests.integration.conftest import SETTINGS
from tests.integration.notification_load import Endpoints, Invocations, admin_of, errored

TABLE = "runplane-bench"
BUCKET = "runplane-bench"
PATIENCE = 120.0


def measure(*, slots: bool, pace: float, destinations: int, invocations: int) -> dict[str, Any]:
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE)
        models.bind(TABLE, "us-east-1", None)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        kms = boto3.client("kms", region_name="us-east-1")
        key_id = kms.create_key(Description="bench")["KeyMetadata"]["KeyId"]
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="run-events", Attributes={"VisibilityTimeout": "720"})[
            "QueueUrl"
        ]
        clock = SystemClock()
        services = services_for(
            clock,
            RandomIds(),
            table=TABLE,
            objects=ObjectStore(s3, BUCKET),
            keys=DataKeys(kms, key_id),
            **{
                **SETTINGS,
                "event_queue_url": url,
                "notification_allow_http": True,
                "notification_allow_loopback": True,
            },
        )
        if not slots:
            # The worker as it was: only the shares within each batch.
            vars(services)["notifications"] = _without_slots(services)
        wiring.install(services)
        endpoints = Endpoints(pace)
        try:
            a = services.tenancy.create_organization("alpha")
            b = services.tenancy.create_organization("bravo")
            a_ws = services.tenancy.create_workspace(a.id, "alpha")
            b_ws = services.tenancy.create_workspace(b.id, "bravo")
            for n in range(destinations):
                services.notifications.create(
                    admin_of(b.id),
                    b_ws.id,
                    name=f"slow-{n}",
                    kind="webhook",
                    url=endpoints.url(f"/slow/{b.id}/{n}"),
                    events=["errored"],
                )
            services.notifications.create(
                admin_of(a.id),
                a_ws.id,
                name="ops",
                kind="webhook",
                url=endpoints.url(f"/{a.id}/ops"),
                events=["errored"],
            )
            fleet = Invocations(url, concurrency=invocations, batch=1)
            with fleet.running():
                services.notifications.on_event(errored(b.id, b_ws.id, "run-b", clock.now()))
                if not endpoints.wait_for(lambda e: e.in_flight(b.id) >= 2, PATIENCE):
                    raise RuntimeError("B's deliveries never started")
                sent = time.monotonic()
                services.notifications.on_event(errored(a.id, a_ws.id, "run-a", clock.now()))
                if not endpoints.wait_for(lambda e: bool(e.to(f"/{a.id}/")), PATIENCE):
                    raise RuntimeError("A's delivery never arrived")
                arrived = endpoints.to(f"/{a.id}/")[0].arrived
                b_in_flight = endpoints.most_in_flight[b.id]
            if fleet.errors:
                raise fleet.errors[0]
        finally:
            wiring._installed.clear()
            endpoints.close()
    models.TableItem.Meta.table_name = None  # type: ignore[assignment]
    return {"a_latency_s": arrived - sent, "b_most_in_flight": b_in_flight}


def _without_slots(services: Any) -> Any:
    from runplane.domain.notifications import AddressPolicy
    from runplane.services.notifications import Notifications
    from runplane.store.notification_store import DynamoNotificationStore

    settings = services.settings
    return Notifications(
        services.clock,
        services.ids,
        services.workspaces,
        services.keys,
        services.event_queue,
        allow_http=True,
        retry_base_seconds=settings.notification_retry_base_seconds,
        control_plane_url=settings.control_plane_url,
        address_policy=AddressPolicy(allow_loopback=True),
        destinations=DynamoNotificationStore(),
        directory=services.directory,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pace", type=float, default=1.0, help="seconds per byte of B's answers")
    parser.add_argument("--destinations", type=int, default=4)
    parser.add_argument("--invocations", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    moto_serial.serialize_requests("dynamodb")
    moto_serial.serialize_requests("sqs")
    results: dict[str, Any] = {}
    for label, slots in (("with slots", True), ("without slots", False)):
        runs = [
            measure(
                slots=slots,
                pace=args.pace,
                destinations=args.destinations,
                invocations=args.invocations,
            )
            for _ in range(args.repeat)
        ]
        results[label] = {
            "a_latency_median_s": round(statistics.median(r["a_latency_s"] for r in runs), 3),
            "a_latency_max_s": round(max(r["a_latency_s"] for r in runs), 3),
            "b_most_in_flight": max(r["b_most_in_flight"] for r in runs),
        }
    with_, without = results["with slots"], results["without slots"]
    ratio = without["a_latency_median_s"] / max(with_["a_latency_median_s"], 1e-6)
    print(
        f"B: {args.destinations} endpoints at {args.pace} s/byte; "
        f"{args.invocations} invocations at once, one record each; {args.repeat} runs"
    )
    print(f"{'':16}{'A latency (median)':>20}{'A latency (max)':>18}{'B in flight':>14}")
    for label, row in results.items():
        print(
            f"{label:16}{row['a_latency_median_s']:>19.3f}s{row['a_latency_max_s']:>17.3f}s"
            f"{row['b_most_in_flight']:>14}"
        )
    print(f"A's latency without the slots / with them: {ratio:.0f}x")
    print(
        json.dumps(
            {
                "notification_fairness": {
                    "pace_s": args.pace,
                    "destinations": args.destinations,
                    "invocations": args.invocations,
                    "runs": args.repeat,
                    **{label.replace(" ", "_"): row for label, row in results.items()},
                    "latency_ratio_without_over_with": round(ratio, 1),
                }
            }
        )
    )


if __name__ == "__main__":
    main()
