"""`make demo`: the whole lifecycle on this machine, no AWS account.

Starts the embedded stack, creates a workspace, publishes the baseline policy
set and attaches it, runs examples/hello as plan_and_apply, shows the plan and
its policy results, approves it, waits for it to apply, prints the review, then
plans again and finds no changes ("Plan completed"). Last, with the deny-delete
policy attached, a plan that would delete the resource fails its policy check.
Exits 0 only if every step happened as described.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from runplane.client import Client, Connection, render_review
from runplane.domain.policy import load_policy_set_dir
from runplane.local.stack import EmbeddedStack

REPO = Path(__file__).resolve().parents[3]
POLICIES = REPO / "examples" / "policies"
WITHOUT_THE_RESOURCE = """terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
"""


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"demo failed: {what}")


def _progress(review: dict[str, Any]) -> None:
    stages = "  ".join(f"{s['stage']}:{s['status']}" for s in review["stages"])
    print(f"  {review['status']:<20} {stages}", flush=True)


def run_demo(engine: Path, example: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="runplane-demo-") as data:
        stack = EmbeddedStack(Path(data), port=0, engine=str(engine))
        credentials = stack.start()
        try:
            client = Client(
                Connection(credentials.url, credentials.token, credentials.organization)
            )
            print(f"Embedded stack up at {credentials.url}\n")
            workspace = client.create_workspace("hello")
            print(f"Workspace {workspace['name']} ({workspace['id']})")
            baseline = load_policy_set_dir(POLICIES / "baseline")
            published = client.publish_policy_set(baseline.to_document())
            client.attach_policy_set(published["name"], [workspace["id"]])
            print(
                f"Policy set {published['name']} ({len(baseline.policies)} policies, "
                f"{published['digest'][:19]}) attached\n"
            )

            print("1. plan_and_apply run of examples/hello")
            run = client.create_run(workspace["id"], example)
            review = client.watch(run["id"], until=["awaiting_approval"], on_change=_progress)
            _expect(review["status"] == "awaiting_approval", f"plan ended {review['status']}")
            _expect(review["policy"]["status"] == "passed", "the baseline policies did not pass")
            print("\nThe plan, awaiting approval:\n" + render_review(review) + "\n")

            print("2. approve")
            client.decide(run["id"], "approve", "demo approval")
            review = client.watch(run["id"], on_change=_progress)
            _expect(review["status"] == "succeeded", f"apply ended {review['status']}")
            _expect(review["label"] == "Applied", f"label {review['label']}")
            state = review["apply"]["resulting_state_version"]
            _expect(state["status"] == "recorded", "no resulting state version recorded")
            print("\nThe run review:\n" + render_review(review) + "\n")

            print("3. plan again: nothing changed")
            again = client.create_run(workspace["id"], example)
            review = client.watch(again["id"], on_change=_progress)
            _expect(review["status"] == "succeeded", f"second run ended {review['status']}")
            _expect(review["label"] == "Plan completed", f"label {review['label']}")
            _expect(review["plan"]["has_changes"] is False, "the second plan found changes")
            stages = {s["stage"]: s["status"] for s in review["stages"]}
            _expect(
                stages["approval"] == stages["apply"] == "skipped", "approval/apply not skipped"
            )
            print("\n" + render_review(review) + "\n")

            print("4. a plan that deletes the resource, with deny-delete attached")
            deny = load_policy_set_dir(POLICIES / "deny-delete")
            client.publish_policy_set(deny.to_document())
            client.attach_policy_set(deny.name, [workspace["id"]])
            with tempfile.TemporaryDirectory(prefix="runplane-destroy-") as empty:
                (Path(empty) / "main.tf").write_text(WITHOUT_THE_RESOURCE, encoding="utf-8")
                destroy = client.create_run(workspace["id"], Path(empty))
            review = client.watch(destroy["id"], on_change=_progress)
            _expect(review["status"] == "policy_failed", f"destroy ended {review['status']}")
            print("\n" + render_review(review) + "\n")
            print(
                "Demo complete: applied once under policy, planned with no changes, "
                "and a destroy was stopped by policy."
            )
        finally:
            stack.stop()
    return 0


def main() -> int:
    from runplane.runner.engine import resolve_engine
    from runplane.runner.engine_errors import EngineNotFound

    pinned = REPO / ".venv" / "engine" / "terraform"
    try:
        engine = resolve_engine(str(pinned) if pinned.exists() else None, {"PATH": ""})
    except EngineNotFound:
        print("demo needs the engine: run `make engine` first", file=sys.stderr)
        return 1
    return run_demo(engine, REPO / "examples" / "hello")


if __name__ == "__main__":
    sys.exit(main())
