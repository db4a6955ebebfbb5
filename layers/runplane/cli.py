"""The ``runplane`` command."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path


def _local_up(args: argparse.Namespace) -> int:
    from runplane.local.stack import EmbeddedStack

    stack = EmbeddedStack(Path(args.data_dir), host=args.host, port=args.port)
    credentials = stack.start()
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    print(f"Runplane embedded stack is up at {credentials.url}")
    print(f"  organization: {credentials.organization}")
    print(f"  admin token:  {credentials.token}")
    print(
        f"  client files: {stack.data_dir / 'credentials.json'}, {stack.data_dir / 'terraform.rc'}"
    )
    print(f"  use it with:  TF_CLI_CONFIG_FILE={stack.data_dir / 'terraform.rc'} terraform init")
    print("The stack keeps its data in memory: stopping it (Ctrl-C) discards everything.")
    sys.stdout.flush()
    try:
        stopped.wait()
    finally:
        stack.stop()
        print("stopped")
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="runplane", description="Runplane control plane")
    commands = root.add_subparsers(dest="command", required=True)
    local = commands.add_parser("local", help="the embedded stack on this machine")
    local_commands = local.add_subparsers(dest="local_command", required=True)
    up = local_commands.add_parser("up", help="start the embedded stack")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8700)
    up.add_argument("--data-dir", default=".runplane")
    up.set_defaults(run=_local_up)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
