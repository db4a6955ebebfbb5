"""The ``runplane`` command."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from runplane.client import ApiError, Client, Connection, render_review

DEFAULT_CREDENTIALS = Path(".runplane/credentials.json")


def _local_up(args: argparse.Namespace) -> int:
    from runplane.local.stack import EmbeddedStack

    engine = args.engine
    pinned = Path(".venv/engine/terraform")
    if engine is None and pinned.exists():
        # A clone's `make engine` binary; otherwise sandboxes look for tofu, then terraform.
        engine = str(pinned.resolve())
    stack = EmbeddedStack(Path(args.data_dir), host=args.host, port=args.port, engine=engine)
    credentials = stack.start()
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    rc = stack.data_dir / "terraform.rc"
    print(f"Runplane embedded stack is up at {credentials.url}")
    print(f"  organization: {credentials.organization}")
    print(f"  admin token:  {credentials.token}")
    print(f"  client files: {stack.data_dir / 'credentials.json'}, {rc}")
    print(f"  use it with:  TF_CLI_CONFIG_FILE={rc} terraform init")
    print("The stack keeps its data in memory: stopping it (Ctrl-C) discards everything.")
    sys.stdout.flush()
    try:
        stopped.wait()
    finally:
        stack.stop()
        print("stopped")
    return 0


def _client(args: argparse.Namespace) -> Client:
    if args.url and args.token:
        return Client(Connection(args.url.rstrip("/"), args.token, args.organization))
    path = Path(args.credentials)
    if not path.exists():
        raise SystemExit(
            f"no credentials: pass --url and --token, or run `runplane local up` ({path} missing)"
        )
    return Client(Connection.from_file(path))


def _show(review: dict[str, Any], as_json: bool) -> None:
    print(json.dumps(review, indent=2) if as_json else render_review(review))


def _workspace_create(args: argparse.Namespace) -> int:
    created = _client(args).create_workspace(args.name)
    print(f"{created['id']}  {created['name']}")
    return 0


def _run_create(args: argparse.Namespace) -> int:
    variables = dict(item.split("=", 1) for item in args.var)
    review = _client(args).create_run(
        args.workspace, Path(args.dir), kind=args.kind, variables=variables
    )
    print(review["id"])
    return 0


def _run_show(args: argparse.Namespace) -> int:
    _show(_client(args).review(args.run), args.json)
    return 0


def _run_decide(args: argparse.Namespace) -> int:
    _show(_client(args).decide(args.run, args.decision, args.comment), args.json)
    return 0


def _run_cancel(args: argparse.Namespace) -> int:
    _show(_client(args).cancel(args.run), args.json)
    return 0


def _run_watch(args: argparse.Namespace) -> int:
    def progress(review: dict[str, Any]) -> None:
        stages = "  ".join(f"{s['stage']}:{s['status']}" for s in review["stages"])
        print(f"{review['status']:<20} {stages}", flush=True)

    review = _client(args).watch(
        args.run, until=args.until, timeout=args.timeout, on_change=progress
    )
    print(render_review(review))
    return 0 if review["status"] in {"succeeded", *args.until} else 1


def _token_create(args: argparse.Namespace) -> int:
    created = _client(args).create_token(args.name, args.role)
    if args.json:
        print(json.dumps(created, indent=2))
    else:
        print(f"{created['id']}  {created['name']}  {created['role']}")
        print(created["token"])
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    _client(args).revoke_token(args.id)
    print(f"{args.id} revoked")
    return 0


CONTROL_FIELDS = (
    "launches_enabled",
    "suspended",
    "allowed_regions",
    "runner_releases",
    "policy_runtimes",
    "max_sandboxes",
)


def _print_controls(controls: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(controls, indent=2))
        return
    for name in (*CONTROL_FIELDS, "running_sandboxes"):
        value = controls.get(name)
        shown = ", ".join(value) or "any" if isinstance(value, list) else value
        print(f"{name:<18} {'no limit' if shown is None else shown}")


def _controls_show(args: argparse.Namespace) -> int:
    _print_controls(_client(args).launch_controls(args.scope), args.json)
    return 0


def _controls_set(args: argparse.Namespace) -> int:
    """Change only what is given: the rest stays as it is."""
    client = _client(args)
    current = client.launch_controls(args.scope)
    controls = {name: current[name] for name in CONTROL_FIELDS}
    if args.launches is not None:
        controls["launches_enabled"] = args.launches == "on"
    if args.suspended is not None:
        controls["suspended"] = args.suspended == "yes"
    for flag, name in (
        ("region", "allowed_regions"),
        ("runner_release", "runner_releases"),
        ("policy_runtime", "policy_runtimes"),
    ):
        if getattr(args, flag) is not None:
            controls[name] = [v for v in getattr(args, flag) if v]
    if args.max_sandboxes is not None:
        controls["max_sandboxes"] = None if args.max_sandboxes < 0 else args.max_sandboxes
    client.set_launch_controls(args.scope, **controls)
    _print_controls(client.launch_controls(args.scope), args.json)
    return 0


def _run_override(args: argparse.Namespace) -> int:
    _show(_client(args).override_policy(args.run, args.reason), args.json)
    return 0


def _policy_publish(args: argparse.Namespace) -> int:
    from runplane.domain.policy import load_policy_set_dir

    content = load_policy_set_dir(Path(args.dir))
    published = _client(args).publish_policy_set(content.to_document())
    print(f"{published['name']}  {published['digest']}  version {published['version']}")
    return 0


def _policy_list(args: argparse.Namespace) -> int:
    sets = _client(args).list_policy_sets()
    if args.json:
        print(json.dumps(sets, indent=2))
        return 0
    for entry in sets:
        where = (
            "all workspaces"
            if entry["all_workspaces"]
            else (", ".join(entry["attached_workspaces"]) or "not attached")
        )
        print(f"{entry['name']}  {entry['digest']}  version {entry['version']}  {where}")
        for policy in entry["policies"]:
            print(f"    {policy['name']} ({policy['enforcement']})")
    return 0


def _policy_attach(args: argparse.Namespace) -> int:
    client = _client(args)
    workspaces = [client.workspace_id(name) for name in args.workspace]
    attached = client.attach_policy_set(args.name, workspaces, args.all)
    where = "all workspaces" if attached["all_workspaces"] else ", ".join(workspaces) or "nothing"
    print(f"{attached['name']}  attached to {where}")
    return 0


def _policy_test(args: argparse.Namespace) -> int:
    """Evaluate a policy set directory against a saved plan, with the production evaluator."""
    from runplane.adapters.rego import RegoEvaluator
    from runplane.domain.policy import load_policy_set_dir, overall, sanitize_plan

    content = load_policy_set_dir(Path(args.dir))
    evaluator = RegoEvaluator()
    evaluator.validate(content)
    plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    policy_input = sanitize_plan(
        plan,
        workspace=args.workspace,
        run_kind=args.kind,
        engine_version=str(plan.get("terraform_version") or ""),
    )
    results = evaluator.evaluate([content], policy_input)
    outcome = overall(results)
    if args.json:
        print(json.dumps({"outcome": outcome, "results": [r.to_dict() for r in results]}, indent=2))
    else:
        for result in results:
            print(f"{result.outcome:<8} {result.policy} ({result.enforcement.value})")
            for message in result.messages:
                print(f"         - {message}")
        print(f"overall: {outcome}")
    return 0 if outcome == "passed" else 1


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="runplane", description="Runplane control plane")
    commands = root.add_subparsers(dest="command", required=True)

    local = commands.add_parser("local", help="the embedded stack on this machine")
    local_commands = local.add_subparsers(dest="local_command", required=True)
    up = local_commands.add_parser("up", help="start the embedded stack")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8700)
    up.add_argument("--data-dir", default=".runplane")
    up.add_argument("--engine", help="the engine binary sandboxes run (default: tofu, terraform)")
    up.set_defaults(run=_local_up)

    def connected(command: argparse.ArgumentParser) -> argparse.ArgumentParser:
        command.add_argument("--credentials", default=str(DEFAULT_CREDENTIALS))
        command.add_argument("--url")
        command.add_argument("--token")
        command.add_argument("--organization", default="default")
        command.add_argument("--json", action="store_true", help="print JSON")
        return command

    workspace = commands.add_parser("workspace", help="workspaces")
    workspace_commands = workspace.add_subparsers(dest="workspace_command", required=True)
    create_ws = connected(workspace_commands.add_parser("create", help="create a workspace"))
    create_ws.add_argument("name")
    create_ws.set_defaults(run=_workspace_create)

    run = commands.add_parser("run", help="runs")
    run_commands = run.add_subparsers(dest="run_command", required=True)
    create = connected(run_commands.add_parser("create", help="upload a directory and run it"))
    create.add_argument("--workspace", required=True, help="name or ws- ID")
    create.add_argument("--dir", required=True)
    create.add_argument(
        "--kind", default="plan_and_apply", choices=["plan_only", "speculative", "plan_and_apply"]
    )
    create.add_argument("--var", action="append", default=[], metavar="NAME=VALUE")
    create.set_defaults(run=_run_create)
    show = connected(run_commands.add_parser("show", help="the run review"))
    show.add_argument("run")
    show.set_defaults(run=_run_show)
    for decision in ("approve", "reject"):
        decide = connected(run_commands.add_parser(decision, help=f"{decision} the plan"))
        decide.add_argument("run")
        decide.add_argument("--comment")
        decide.set_defaults(run=_run_decide, decision=decision)
    cancel = connected(run_commands.add_parser("cancel", help="cancel a run that has not ended"))
    cancel.add_argument("run")
    cancel.set_defaults(run=_run_cancel)
    watch = connected(run_commands.add_parser("watch", help="follow a run until it ends"))
    watch.add_argument("run")
    watch.add_argument("--until", action="append", default=[], help="also stop at this status")
    watch.add_argument("--timeout", type=float, default=1800)
    watch.set_defaults(run=_run_watch)
    override = connected(
        run_commands.add_parser("override", help="override a soft-mandatory policy failure")
    )
    override.add_argument("run")
    override.add_argument("--reason", required=True)
    override.set_defaults(run=_run_override)

    controls = commands.add_parser("controls", help="launch controls")
    controls_commands = controls.add_subparsers(dest="controls_command", required=True)
    for name, action, what in (
        ("show", _controls_show, "show launch controls and running sandboxes"),
        ("set", _controls_set, "change launch controls (only what is given)"),
    ):
        command = connected(controls_commands.add_parser(name, help=what))
        command.add_argument(
            "--platform",
            dest="scope",
            action="store_const",
            const="platform",
            default="organization",
            help="the platform's controls (needs platform:operate)",
        )
        command.set_defaults(run=action)
        if name == "set":
            command.add_argument("--launches", choices=["on", "off"])
            command.add_argument("--suspended", choices=["yes", "no"])
            command.add_argument("--max-sandboxes", type=int, help="a negative value: no limit")
            for flag in ("region", "runner-release", "policy-runtime"):
                command.add_argument(
                    f"--{flag}",
                    action="append",
                    help="repeat for several; an empty value clears the list",
                )

    token = commands.add_parser("token", help="API tokens for automation")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create_token = connected(token_commands.add_parser("create", help="issue a token"))
    create_token.add_argument("name")
    create_token.add_argument(
        "--role", required=True, choices=["reader", "developer", "operator", "admin"]
    )
    create_token.set_defaults(run=_token_create)
    revoke = connected(token_commands.add_parser("revoke", help="revoke a token by its ID"))
    revoke.add_argument("id")
    revoke.set_defaults(run=_token_revoke)

    policy = commands.add_parser("policy", help="policy sets (Rego)")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    publish = connected(policy_commands.add_parser("publish", help="publish a policy set DIR"))
    publish.add_argument("dir")
    publish.set_defaults(run=_policy_publish)
    listing = connected(policy_commands.add_parser("list", help="the organization's policy sets"))
    listing.set_defaults(run=_policy_list)
    attach = connected(policy_commands.add_parser("attach", help="attach a policy set"))
    attach.add_argument("name")
    attach.add_argument("--workspace", action="append", default=[], help="name or ws- ID")
    attach.add_argument("--all", action="store_true", help="attach to every workspace")
    attach.set_defaults(run=_policy_attach)
    test = policy_commands.add_parser("test", help="evaluate DIR against a saved plan JSON")
    test.add_argument("dir")
    test.add_argument("--plan", required=True, help="`tofu show -json PLANFILE` output")
    test.add_argument("--workspace", default="local")
    test.add_argument(
        "--kind", default="plan_and_apply", choices=["plan_only", "speculative", "plan_and_apply"]
    )
    test.add_argument("--json", action="store_true", help="print JSON")
    test.set_defaults(run=_policy_test)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ApiError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
