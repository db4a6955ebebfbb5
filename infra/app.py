"""The CDK app: ``python -m infra.app`` (what ``cdk.json`` runs, and ``make synth``).

Without the ``cdk`` CLI the app reads ``cdk.json``'s context itself and writes the
cloud assembly to ``cdk.out/``. ``--no-bundling`` skips building the Lambda layer
(which runs pip), so a synth needs neither Docker nor a network. AWS Solutions
checks (cdk-nag) run on every synth: an unacknowledged finding fails it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import RunplaneConfig
from infra.constructs.assets import REPO
from infra.stack import RunplaneStack

NO_BUNDLING: dict[str, Any] = {"aws:cdk:bundling-stacks": []}
# Behaviour the stack relies on, whatever cdk.json says: server access logs are
# granted by bucket policy (no ACLs on the log bucket).
FEATURE_FLAGS: dict[str, Any] = {"@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True}


def cdk_json_context() -> dict[str, Any]:
    context: dict[str, Any] = json.loads((REPO / "cdk.json").read_text(encoding="utf-8")).get(
        "context", {}
    )
    return context


def _commit() -> str:
    """The checkout's commit, recorded on runs as the build SHA."""
    try:
        found = subprocess.run(
            ["git", "rev-parse", "HEAD"],  # noqa: S607 - git from PATH, fixed arguments
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip() or "unknown"


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[App, RunplaneStack]:
    """The app with its one stack and the AWS Solutions checks registered."""
    defaults = {"buildSha": _commit(), **cdk_json_context(), **FEATURE_FLAGS, **(context or {})}
    app = App(context=defaults, outdir=outdir)
    config = RunplaneConfig.from_context(app.node.try_get_context)
    stack = RunplaneStack(
        app,
        config.prefix,
        config=config,
        stack_name=config.prefix,
        env=Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=config.region or os.environ.get("CDK_DEFAULT_REGION"),
        ),
    )
    # Acknowledged findings are written to the template metadata (an audit trail).
    Validations.of(app).add_plugins(
        AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True)
    )
    return app, stack


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m infra.app", description=__doc__)
    parser.add_argument(
        "--no-bundling", action="store_true", help="skip building the Lambda layer (no pip)"
    )
    parser.add_argument("--outdir", help="cloud assembly directory (default: cdk.out)")
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a context value, as with cdk -c",
    )
    args = parser.parse_args(argv)
    context: dict[str, Any] = dict(NO_BUNDLING) if args.no_bundling else {}
    for item in args.context:
        key, _, value = item.partition("=")
        context[key] = value
    # The cdk CLI says where to write (CDK_OUTDIR); on our own, cdk.out as it would.
    outdir = args.outdir or (None if "CDK_OUTDIR" in os.environ else str(REPO / "cdk.out"))
    app, _ = build_app(context, outdir)
    app.synth()


if __name__ == "__main__":
    main()
