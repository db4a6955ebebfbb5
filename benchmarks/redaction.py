"""Log redaction: the runner's BoundedLog over a large engine-like log with many secrets.

    python -m benchmarks.redaction [--mib 50] [--secrets 100] [--piece 16384]
        [--before PATH] [--repeat 3]

Writes ``--mib`` MiB of plan and debug-log lines (resource addresses, hex ids, base64
blobs), in ``--piece``-byte writes, to a log redacting ``--secrets`` random secrets of
12 to 40 characters, two of which the log holds verbatim. ``--before`` names another
``bounded_log.py`` to time on the same stream, e.g. the one before transformed
spellings were redacted::

    git show 94f8a45:layers/runplane/runner/bounded_log.py > /tmp/bounded_log_before.py
    python -m benchmarks.redaction --before /tmp/bounded_log_before.py

Each figure is the fastest of ``--repeat`` runs (the machine is shared).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import string
import time
from pathlib import Path
from typing import Any

from runplane.domain.redaction import secret_needles
from runplane.runner.bounded_log import BoundedLog

_SECRET_CHARS = string.ascii_letters + string.digits + "-_!$/+"
_BASE64 = string.ascii_letters + string.digits + "+/"


def secrets_of(count: int, rng: random.Random) -> list[str]:
    return [
        "".join(rng.choice(_SECRET_CHARS) for _ in range(rng.randint(12, 40))) for _ in range(count)
    ]


def engine_like_log(mib: int, secrets: list[str], rng: random.Random) -> bytes:
    """``mib`` MiB of repeated plan and debug lines, two secrets among them."""
    lines = []
    for n in range(2000):
        kind = n % 4
        if kind == 0:
            lines.append(
                f"aws_instance.web[{n}]: Refreshing state... [id=i-{rng.getrandbits(64):016x}]"
            )
        elif kind == 1:
            lines.append(
                '  + user_data = "' + "".join(rng.choice(_BASE64) for _ in range(76)) + '"'
            )
        elif kind == 2:
            lines.append(
                f"2024-01-01T00:00:{n % 60:02d}.000Z [DEBUG] provider.terraform-provider-aws: "
                f"HTTP Request Sent: tf_req_id={rng.getrandbits(128):032x}"
            )
        else:
            lines.append("Plan: 3 to add, 1 to change, 0 to destroy.")
    lines.append(f"leaked: {secrets[0]} and {secrets[-1]}")
    block = ("\n".join(lines) + "\n").encode()
    size = mib * 1024 * 1024
    return (block * (size // len(block) + 1))[:size]


def timed(log_class: Any, secrets: list[str], data: bytes, piece: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        log = log_class(secrets=secrets)
        for at in range(0, len(data), piece):
            log.write(data[at : at + piece])
        log.close()
        best = min(best, time.perf_counter() - started)
        assert not secrets[0] or secrets[0].encode() not in log.bytes()
    return best


def load_log_class(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("bounded_log_before", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BoundedLog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--secrets", type=int, default=100)
    parser.add_argument("--piece", type=int, default=16 * 1024)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)  # noqa: S311 - a reproducible stream, not a secret
    secrets = secrets_of(args.secrets, rng)
    data = engine_like_log(args.mib, secrets, rng)
    spellings = set().union(*(n.exact | n.folded for n in map(secret_needles, secrets)))
    figures: dict[str, float | int] = {
        "mib": args.mib,
        "secrets": len(secrets),
        "spellings": len(spellings),
        "no_secrets_s": timed(BoundedLog, [""], data, args.piece, args.repeat),
        "now_s": timed(BoundedLog, secrets, data, args.piece, args.repeat),
    }
    if args.before is not None:
        before = load_log_class(args.before)
        figures["before_s"] = timed(before, secrets, data, args.piece, args.repeat)
        figures["ratio"] = figures["now_s"] / figures["before_s"]
    print(f"{'log':<34} {'seconds':>8}")
    print(f"{'no secrets':<34} {figures['no_secrets_s']:>8.2f}")
    if "before_s" in figures:
        print(f"{'before (verbatim spellings only)':<34} {figures['before_s']:>8.2f}")
    print(f"{'now (' + str(len(spellings)) + ' spellings)':<34} {figures['now_s']:>8.2f}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
