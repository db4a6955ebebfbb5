"""Artifact streaming: throughput and peak memory of encrypt+upload and download+decrypt.

    python -m benchmarks.artifacts [--size-mb 100] [--repeat 3]

S3, KMS and DynamoDB are served by a moto server in a separate process, so
this process's memory is only our pipeline's. Each size runs in a fresh child
process that reports its peak RSS growth over its own warmed-up baseline.

Two comparisons, each measured in the same child:
- crypto: our encrypt+decrypt of the bytes in memory vs a plain in-process
  copy of the same bytes, chunk by chunk;
- end to end: encrypted put+open through S3 vs the same bytes uploaded and
  streamed back through the same S3 path without encryption.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

BLOCK = 1024 * 1024


def _lazy(total: int, block: bytes) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        piece = block[: total - sent]
        sent += len(piece)
        yield piece


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _best(seconds: list[float]) -> float:
    return min(seconds)


def child(size_mb: int, endpoint: str, repeat: int) -> dict[str, float]:  # noqa: C901 - its steps
    import boto3

    from runplane.adapters.clock import SystemClock
    from runplane.adapters.envelope import CHUNK_SIZE, Decryption, Encryption
    from runplane.adapters.ids import RandomIds
    from runplane.adapters.keys import DataKeys
    from runplane.adapters.object_store import ObjectStore
    from runplane.domain.artifacts import ArtifactKind
    from runplane.services.artifacts import ArtifactStore
    from runplane.store import models
    from runplane.store.artifact_records import DynamoArtifactRecords
    from runplane.store.provision import create_table

    region = "us-east-1"
    session = boto3.session.Session(region_name=region)
    s3 = session.client("s3", endpoint_url=endpoint)
    kms = session.client("kms", endpoint_url=endpoint)
    dynamodb = session.client("dynamodb", endpoint_url=endpoint)
    table, bucket = f"bench-{os.getpid()}", f"bench-{os.getpid()}"
    create_table(dynamodb, table)
    models.bind(table, region, endpoint)
    s3.create_bucket(Bucket=bucket)
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    objects = ObjectStore(s3, bucket)
    store = ArtifactStore(
        SystemClock(), RandomIds(), objects, DataKeys(kms, key_id), records=DynamoArtifactRecords()
    )
    org = "org-" + "b" * 26
    block = os.urandom(BLOCK)
    size = size_mb * 1_000_000

    # Warm every code path on a small artifact, then take the baseline.
    warm = store.put(org, ArtifactKind.CONFIGURATION, _lazy(3 * CHUNK_SIZE, block))
    with store.open(org, warm.id) as stream:
        for _ in stream:
            pass
    baseline_rss = _peak_rss_mb()

    def copy_plain() -> None:
        sink = 0
        for piece in _lazy(size, block):
            sink += len(bytes(bytearray(piece)))

    crypto_key, crypto_id = os.urandom(32), "art-" + "c" * 26

    def encrypt_only() -> None:
        for _ in Encryption(crypto_key, crypto_id).stream(_lazy(size, block)):
            pass

    sealed = io.BytesIO()

    def decrypt_only() -> None:
        if not sealed.getbuffer().nbytes:
            for piece in Encryption(crypto_key, crypto_id).stream(_lazy(size, block)):
                sealed.write(piece)
        sealed.seek(0)
        for _ in Decryption(crypto_key, crypto_id).stream(sealed.read):
            pass

    def ours() -> tuple[float, float]:
        start = time.perf_counter()
        artifact = store.put(org, ArtifactKind.CONFIGURATION, _lazy(size, block))
        mid = time.perf_counter()
        with store.open(org, artifact.id) as stream:
            for _ in stream:
                pass
        return mid - start, time.perf_counter() - mid

    def plain_s3() -> float:
        start = time.perf_counter()
        stored = objects.upload_stream(f"plain/{time.time_ns()}", _lazy(size, block))
        with objects.open(stored.key) as read:
            while read(CHUNK_SIZE):
                pass
        return time.perf_counter() - start

    ours_runs = [ours() for _ in range(repeat)]
    ours_rss = _peak_rss_mb() - baseline_rss  # before the in-memory crypto buffers below
    plain_runs = [plain_s3() for _ in range(repeat)]
    copy_runs = []
    crypto_runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        copy_plain()
        copy_runs.append(time.perf_counter() - start)
    decrypt_only()  # builds the ciphertext once, untimed
    for _ in range(repeat):
        start = time.perf_counter()
        encrypt_only()
        middle = time.perf_counter()
        decrypt_only()
        crypto_runs.append(time.perf_counter() - middle + (middle - start))
    put_s = _best([r[0] for r in ours_runs])
    get_s = _best([r[1] for r in ours_runs])
    mb = size / 1_000_000
    return {
        "size_mb": size_mb,
        "encrypt_upload_mb_s": round(mb / put_s, 1),
        "download_decrypt_mb_s": round(mb / get_s, 1),
        "peak_rss_growth_mb": round(ours_rss, 1),
        "plain_s3_round_trip_mb_s": round(mb / _best(plain_runs), 1),
        "encrypted_s3_round_trip_mb_s": round(mb / (put_s + get_s), 1),
        "s3_cost_ratio": round((put_s + get_s) / _best(plain_runs), 2),
        "plain_copy_mb_s": round(mb / _best(copy_runs), 1),
        "encrypt_decrypt_mb_s": round(mb / _best(crypto_runs), 1),
        "crypto_cost_ratio": round(_best(crypto_runs) / _best(copy_runs), 2),
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1)  # noqa: S310 - loopback
            return server, url
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("moto server did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "benchmark")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "benchmark")
    if args.child:
        print(json.dumps(child(args.size_mb, args.endpoint, args.repeat)))
        return

    server, endpoint = _start_moto()
    try:
        rows = []
        for size_mb in sorted({10, args.size_mb}):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.artifacts",
                    "--child",
                    "--size-mb",
                    str(size_mb),
                    "--endpoint",
                    endpoint,
                    "--repeat",
                    str(args.repeat),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        server.terminate()
        server.wait(timeout=30)
    columns = [
        ("size_mb", "MB"),
        ("encrypt_upload_mb_s", "put MB/s"),
        ("download_decrypt_mb_s", "open MB/s"),
        ("peak_rss_growth_mb", "peak RSS +MB"),
        ("s3_cost_ratio", "vs plain S3"),
        ("crypto_cost_ratio", "crypto vs copy"),
    ]
    print("  ".join(f"{title:>14}" for _, title in columns))
    for row in rows:
        print("  ".join(f"{row[name]:>14}" for name, _ in columns))
    print(json.dumps({"repeat": args.repeat, "results": rows}))


if __name__ == "__main__":
    main()
