"""The ``runplane`` command.

Exit codes: 0 success; 1 the run (or policy test) did not succeed; 2 the API refused
the request, a policy set was refused, or the command line is malformed; 3 a local
error (bad input, missing credentials, an unreachable control plane, a wait that timed
out); 130 interrupted (Ctrl-C). Errors are one ``error: ...`` line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.parse
from pathlib import Path
from typing import Any

from runplane import (
    cli_attention,
    cli_audit,
    cli_auto_destroy,
    cli_cloud,
    cli_credentials,
    cli_delete,
    cli_github,
    cli_gitlab,
    cli_login,
    cli_plan,
    cli_schedules,
    cli_teams,
    cli_variable_sets,
    cli_variables,
)
from runplane.cli_input import InputError, duration, read_input_file, variables
from runplane.client import ApiError, Client, ConfigurationError, Connection, render_review
from runplane.domain.errors import InvalidInput, InvalidPolicySet, RunplaneError
from runplane.domain.run_options import check_run_options

DEFAULT_CREDENTIALS = Path(".runplane/credentials.json")
EXIT_NOT_SUCCEEDED = 1
EXIT_API_ERROR = 2
EXIT_LOCAL_ERROR = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class CliError(Exception):
    """A local error: printed as one line, exit code 3."""


def _local_up(args: argparse.Namespace) -> int:
    from runplane.local.stack import EmbeddedStack, EngineNotFound, find_engine

    try:
        engine = find_engine(args.engine)
    except EngineNotFound as missing:
        raise CliError(str(missing)) from None
    stack = EmbeddedStack(
        Path(args.data_dir),
        host=args.host,
        port=args.port,
        engine=engine,
        sandbox_network=args.sandbox_network,
        runner_standby=args.runner_standby,
    )
    credentials = stack.start()
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    rc = stack.data_dir / "terraform.rc"
    print(f"Runplane embedded stack is up at {credentials.url}")
    print(f"  organization: {credentials.organization}")
    print(f"  admin token:  {credentials.token}")
    print(f"  engine:       {engine}")
    print(f"  sandboxes:    {stack.isolation_summary()}")
    print(f"  client files: {stack.data_dir / 'credentials.json'}, {rc}")
    print(f"  dashboard:    {stack.login_link()}  (one-time login link, valid 10 minutes)")
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
    """--url/--token/--organization, each falling back to the credentials file."""
    saved: dict[str, Any] = {}
    path = Path(args.credentials)
    if not (args.url and args.token):
        if not path.exists():
            raise CliError(
                f"no credentials: pass --url and --token, or run `runplane local up` "
                f"({path} is missing)"
            )
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CliError(f"{path}: cannot read credentials ({error})") from None
        if not isinstance(saved, dict) or not (saved.get("url") and saved.get("token")):
            raise CliError(f"{path}: not a credentials file (it needs url and token)")
    url = str(args.url or saved["url"]).rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        origin = "--url" if args.url else f"{path}: url"
        raise CliError(f"{origin} {url!r} is not an http(s) URL such as http://127.0.0.1:8700")
    token = str(args.token or saved["token"])
    organization = str(args.organization or saved.get("organization") or "default")
    # A sign-in (runplane login) renews its token; it is refused if others can read it.
    refresh = None if args.token else cli_credentials.refresher(path, saved)
    return Client(Connection(url, token, organization, refresh=refresh))


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _show(review: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(review)
    else:
        print(render_review(review))


def _workspace_create(args: argparse.Namespace) -> int:
    created = _client(args).create_workspace(args.name, args.tag or ())
    if args.json:
        _print_json(created)
    else:
        print(f"{created['id']}  {created['name']}")
    return 0


def _window(seconds: int | None) -> str:
    if seconds is None:
        return "deployment default"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit} ({seconds} s)"
    return f"{seconds} s"


def _workspace_list(args: argparse.Namespace) -> int:
    found = _client(args).list_workspaces()
    if args.json:
        _print_json(found)
        return 0
    for ws in found:
        print(f"{ws['id']}  {ws['name']}")
    return 0


def _print_workspace(ws: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(ws)
        return
    print(f"{ws['id']}  {ws['name']}")
    print(f"  approval window  {_window(ws.get('approval_window_seconds'))}")
    print(f"  engine version   {ws.get('terraform_version') or 'default'}")
    print(f"  tags             {', '.join(ws.get('tags') or []) or '-'}")
    print(f"  locked           {'yes' if ws.get('locked') else 'no'}")
    print(f"  writer run       {ws.get('writer_run_id') or '-'}")
    print(f"  queued runs      {ws.get('queue_length', 0)}")
    print(f"  current state    {ws.get('current_state_version_id') or '-'}")
    print(f"  drift            {cli_schedules.drift_line(ws.get('drift'))}")
    print(f"  second approver  {_second_approver(ws.get('second_approval') or {})}")
    separated = (ws.get("second_approval") or {}).get("separation_of_duties")
    print(f"  creator approves {'no (separation of duties)' if separated else 'yes'}")


def _second_approver(rule: dict[str, Any]) -> str:
    needed = []
    if rule.get("destroy_runs"):
        needed.append("destroy runs")
    if rule.get("destroys_over") is not None:
        needed.append(f"plans destroying more than {rule['destroys_over']}")
    return ", ".join(needed) or "never"


def _workspace_show(args: argparse.Namespace) -> int:
    client = _client(args)
    workspace_id = client.workspace_id(args.workspace)
    _print_workspace(client.workspace(workspace_id), args.json)
    if not args.json:
        print(f"  auto-destroy     {cli_auto_destroy.line(client.auto_destroy(workspace_id))}")
    return 0


def _workspace_update(args: argparse.Namespace) -> int:
    rule_given = (
        args.second_approver_for_destroy is not None
        or args.second_approver_over
        or args.separation_of_duties is not None
    )
    if args.approval_window is None and args.tag is None and not args.clear_tags and not rule_given:
        raise CliError(
            "nothing to update: pass --approval-window, --tag, --clear-tags, "
            "--second-approver-for-destroy, --second-approver-over or --separation-of-duties"
        )
    if args.tag is not None and args.clear_tags:
        raise CliError("--tag and --clear-tags contradict each other: pass one")
    seconds = None if args.approval_window is None else duration(args.approval_window)
    over = _destroys_over(args.second_approver_over)
    client = _client(args)
    workspace_id = client.workspace_id(args.workspace)
    fields: dict[str, Any] = {}
    if seconds is not None:
        fields["approval_window_seconds"] = seconds
    if args.tag is not None or args.clear_tags:
        fields["tags"] = args.tag or []
    if rule_given:
        # The rule is replaced whole: what is not given stays as it is.
        rule = dict(client.workspace(workspace_id).get("second_approval") or {})
        if args.second_approver_for_destroy is not None:
            rule["destroy_runs"] = args.second_approver_for_destroy == "yes"
        if args.second_approver_over:
            rule["destroys_over"] = over
        if args.separation_of_duties is not None:
            rule["separation_of_duties"] = args.separation_of_duties == "yes"
        fields["second_approval"] = rule
    client.update_workspace(workspace_id, **fields)  # one write: both or neither
    _print_workspace(client.workspace(workspace_id), args.json)
    return 0


def _destroys_over(text: str | None) -> int | None:
    if not text or text == "none":
        return None
    if not text.isascii() or not text.isdigit():
        raise CliError(f"--second-approver-over takes a whole number or none, not {text!r}")
    return int(text)


def _print_binding(binding: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(binding)
        return
    print(f"{binding['workspace_id']}  github {binding['repository']}")
    print(f"  branch             {binding['branch']}")
    print(f"  working directory  {binding['working_directory'] or '.'}")
    print(f"  installation       {binding['installation_id']}")
    print(f"  push run kind      {binding['push_run_kind']}")
    previews = "yes" if binding.get("pull_request_workspaces") else "no"
    print(f"  pull request workspaces  {previews}")
    if binding.get("pull_request_workspaces"):
        auto = "yes" if binding.get("pull_request_auto_apply_destroy") else "no"
        print(f"  auto-apply their destroy {auto}")
    for pattern in binding.get("trigger_patterns") or []:
        print(f"  trigger pattern    {pattern}")
    for pattern in binding.get("ignore_patterns") or []:
        print(f"  ignore pattern     {pattern}")


def _workspace_github(args: argparse.Namespace) -> int:
    client = _client(args)
    workspace_id = client.workspace_id(args.workspace)
    if args.unbind:
        result = client.unbind_github(workspace_id)
        _print_json(result) if args.json else print(f"{workspace_id}  not bound to GitHub")
        return 0
    if args.repository is None:
        _print_binding(client.github_binding(workspace_id), args.json)
        return 0
    if args.branch is None or args.installation_id is None:
        raise CliError("binding needs --repository, --branch and --installation-id")
    bound = client.bind_github(
        workspace_id,
        repository=args.repository,
        branch=args.branch,
        installation_id=args.installation_id,
        working_directory=args.working_directory,
        push_run_kind=args.push_run_kind,
        pull_request_workspaces=args.pull_request_workspaces == "yes",
        pull_request_auto_apply_destroy=args.pull_request_auto_apply_destroy == "yes",
        trigger_patterns=args.trigger_pattern,
        ignore_patterns=args.ignore_pattern,
    )
    _print_binding(bound, args.json)
    return 0


def _run_create(args: argparse.Namespace) -> int:
    values = variables(args.var, args.var_file)
    try:
        # Checked here too, so a bad address is refused before anything is uploaded.
        asked = check_run_options(
            destroy=args.destroy,
            refresh_only=args.refresh_only,
            targets=args.target,
            replacements=args.replace,
        )
    except InvalidInput as error:
        raise CliError(str(error)) from None
    options = asked.to_body()
    review = _client(args).create_run(
        args.workspace, Path(args.dir), kind=args.kind, variables=values, options=options
    )
    if args.json:
        _print_json(review)
    else:
        print(review["id"])
    return 0


def _run_list(args: argparse.Namespace) -> int:
    client = _client(args)
    runs = client.list_runs(client.workspace_id(args.workspace))
    if args.json:
        _print_json(runs)
        return 0
    for run in runs:
        print(f"{run['id']}  {run['kind']:<15} {run['status']:<20} {run['created_at']}")
    return 0


class _Stream:
    """Log text written as it arrives, with progress lines kept on lines of their own."""

    def __init__(self) -> None:
        self.midline = False

    def text(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()
        self.midline = not text.endswith("\n")

    def line(self, line: str) -> None:
        self.end_line()
        print(line, flush=True)

    def end_line(self) -> None:
        if self.midline:
            print(flush=True)
            self.midline = False


def _run_logs(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.follow:
        if args.json:
            parts: list[str] = []
            client.follow_log(args.run, args.phase, parts.append, timeout=args.timeout)
            _print_json({"run_id": args.run, "phase": args.phase, "log": "".join(parts)})
            return 0
        stream = _Stream()
        client.follow_log(args.run, args.phase, stream.text, timeout=args.timeout)
        stream.end_line()
        return 0
    text = client.log(args.run, args.phase)
    if args.json:
        _print_json({"run_id": args.run, "phase": args.phase, "log": text})
    else:
        print(text, end="" if text.endswith("\n") else "\n")
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
    stream = _Stream()

    def progress(review: dict[str, Any]) -> None:
        stages = "  ".join(f"{s['stage']}:{s['status']}" for s in review["stages"])
        stream.line(f"{review['status']:<20} {stages}")

    def log(phase: str, text: str) -> None:
        stream.text(text)

    live = not (args.json or args.no_logs)
    review = _client(args).watch(
        args.run,
        until=args.until,
        timeout=args.timeout,
        on_change=None if args.json else progress,
        on_log=log if live else None,
    )
    stream.end_line()
    _show(review, args.json)
    return 0 if review["status"] in {"succeeded", *args.until} else EXIT_NOT_SUCCEEDED


def _token_create(args: argparse.Namespace) -> int:
    created = _client(args).create_token(args.name, args.role)
    if args.json:
        print(json.dumps(created, indent=2))
    else:
        print(f"{created['id']}  {created['name']}  {created['role']}")
        print(created["token"])
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    revoked = _client(args).revoke_token(args.id)
    if args.json:
        _print_json(revoked)
    else:
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


def _run_recover(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "resolution": args.resolution,
        "reason": args.reason,
        "confirm_authority_revocation": args.confirm_revoke_authority,
        "current_state_version_id": None
        if args.current_state_version == "none"
        else args.current_state_version,
        "takeover": args.takeover,
        "acknowledge_state_loss": args.acknowledge_state_loss,
    }
    if args.emergency_state:
        raw = read_input_file(args.emergency_state, "--emergency-state")
        body["emergency_state"] = base64.b64encode(raw).decode()
        body["emergency_state_sha256"] = args.emergency_state_sha256
    if args.discard_claimed_upload:
        upload, _, claimed_at = args.discard_claimed_upload.partition("@")
        body["discard_claimed_upload"] = {"id": upload, "claimed_at": claimed_at}
    result = _client(args).recover(args.run, body)
    if args.json:
        _print_json(result)
    else:
        print(
            f"{result['run_id']} recovered ({result['resolution']}) by {result['recovered_by']}: "
            f"fence {result['fence']}, current state {result['state_version_id'] or 'none'}"
            + (
                f", workspace handed to {result['writer_handed_to']}"
                if result["writer_handed_to"]
                else ""
            )
        )
    return 0


def _run_override(args: argparse.Namespace) -> int:
    _show(_client(args).override_policy(args.run, args.reason), args.json)
    return 0


def _policy_publish(args: argparse.Namespace) -> int:
    from runplane.domain.policy import load_policy_set_dir
    from runplane.domain.rego_v0 import compiled_source

    content = load_policy_set_dir(Path(args.dir))
    published = _client(args).publish_policy_set(content.to_document())
    if args.json:
        _print_json(published)
    else:
        print(f"{published['name']}  {published['digest']}  version {published['version']}")
        for module in content.modules:
            if compiled_source(module.name, module.source).v0:
                print(f"  {module.name}: Rego v0, upgraded to v1 for evaluation")
    for warning in published.get("warnings") or ():
        print(f"warning: {warning}", file=sys.stderr)
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
        shape = entry.get("input_shape", "runplane")
        print(
            f"{entry['name']}  {entry['digest']}  version {entry['version']}  "
            f"input {shape}  {where}"
        )
        for module in entry.get("rego_v0_modules") or ():
            print(f"    {module}: Rego v0, upgraded to v1 for evaluation")
        for policy in entry["policies"]:
            print(f"    {policy['name']} ({policy['enforcement']})")
    return 0


def _policy_attach(args: argparse.Namespace) -> int:
    client = _client(args)
    workspaces = [client.workspace_id(name) for name in args.workspace]
    attached = client.attach_policy_set(args.name, workspaces, args.all)
    if args.json:
        _print_json(attached)
        return 0
    where = "all workspaces" if attached["all_workspaces"] else ", ".join(workspaces) or "nothing"
    print(f"{attached['name']}  attached to {where}")
    return 0


def _policy_test(args: argparse.Namespace) -> int:
    """Evaluate a policy set directory against a saved plan, with the production evaluator."""
    from runplane.adapters.rego import RegoEvaluator
    from runplane.domain.policy import load_policy_set_dir
    from runplane.domain.policy_input import PolicyInputs, check_input_roots
    from runplane.domain.policy_plan import assume_unmarked
    from runplane.domain.policy_results import overall, rule_probes
    from runplane.domain.policy_run import run_context

    # Bad usage, as argparse reports it: exit 2.
    if args.dir and args.dir_flag and args.dir != args.dir_flag:
        print(
            f"error: two directories given: {args.dir} and --dir {args.dir_flag}", file=sys.stderr
        )
        return EXIT_API_ERROR
    args.dir = args.dir or args.dir_flag
    if not args.dir:
        print("error: pass the policy set directory: --dir DIR", file=sys.stderr)
        return EXIT_API_ERROR
    content = load_policy_set_dir(Path(args.dir))
    for warning in check_input_roots(content):
        print(f"warning: {warning}", file=sys.stderr)
    evaluator = RegoEvaluator()
    evaluator.validate(content)
    status = _policy_unit_tests(args, content) if args.unit else 0
    if args.plan is None:
        if not args.unit:
            raise CliError("pass --plan PLAN_JSON, --unit, or both")
        return status
    try:
        plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    except ValueError as error:
        raise CliError(f"{args.plan}: not a plan JSON file ({error})") from None
    if not isinstance(plan, dict):
        raise CliError(f"{args.plan}: not a plan JSON file (not an object)")
    # A hand-written plan (a test mock) lacks sensitivity maps: read it as written.
    plan, filled = assume_unmarked(plan)
    if filled:
        print(
            f"warning: the plan has no sensitivity map (before_sensitive/after_sensitive) for "
            f"{len(filled)} value(s), read as marking nothing sensitive: "
            f"{', '.join(filled[:5])}{' ...' if len(filled) > 5 else ''}; the engine "
            'writes them, and a run hides a value without one whole, as "(sensitive)"',
            file=sys.stderr,
        )
    inputs = PolicyInputs(
        plan,
        run_context(
            _json_file(args.run_context, "run context") if args.run_context else None,
            workspace=args.workspace,
            kind=args.kind,
            engine_version=str(plan.get("terraform_version") or ""),
        ),
    )
    probes = rule_probes(content)
    evaluated = evaluator.evaluate([content, probes.content], inputs)
    results = [r for r in evaluated if r.policy_set == content.name]
    outcome = overall(results)
    undefined = probes.undefined(evaluated)
    queried = {p.query.removeprefix("data."): p.name for p in content.policies}
    for rule in undefined:
        if rule in queried:
            print(
                f"warning: policy {queried[rule]} passed because data.{rule} had no value on "
                "this plan (no rule body matched)",
                file=sys.stderr,
            )
    if args.json:
        print(
            json.dumps(
                {
                    "outcome": outcome,
                    "results": [r.to_dict() for r in results],
                    "undefined_rules": undefined,
                },
                indent=2,
            )
        )
    else:
        for result in results:
            print(f"{result.outcome:<8} {result.policy} ({result.enforcement.value})")
            for message in result.messages:
                print(f"         - {message}")
        if undefined:
            print(f"undefined on this plan: {', '.join(undefined)}")
        print(f"overall: {outcome}")
    return status or (0 if outcome == "passed" else EXIT_NOT_SUCCEEDED)


def _json_file(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise CliError(f"{path}: not a JSON {what} ({error})") from None


def _policy_unit_tests(args: argparse.Namespace, content: Any) -> int:
    """Run the directory's unit tests like ``opa test DIR``: its ``*_test.rego`` and
    ``*.test.rego`` modules with the set's, its JSON and YAML files as ``data``, builtin
    errors undefined unless ``--strict-builtin-errors``."""
    from runplane.adapters.rego_unit import load_unit_data, run_unit_tests
    from runplane.domain.policy import is_test_module
    from runplane.domain.policy_unit_tests import discover, failed, read_test_modules, report

    root = Path(args.dir)
    test_modules = read_test_modules(root)
    modules = [m for m in content.modules if not is_test_module(m.name)] + test_modules
    results = run_unit_tests(
        modules,
        discover(modules),
        data=load_unit_data(root),
        strict_builtin_errors=args.strict_builtin_errors,
    )
    if args.json:
        print(json.dumps({"unit_tests": [r.to_dict() for r in results]}, indent=2))
    else:
        print("\n".join(report(results)))
    return EXIT_NOT_SUCCEEDED if failed(results) or not results else 0


KINDS = ["plan_only", "speculative", "plan_and_apply"]


def _connected(command: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The connection flags and --json, shared by every command that calls the API."""
    command.add_argument(
        "--credentials",
        default=str(DEFAULT_CREDENTIALS),
        help="credentials file written by `runplane local up` (default: %(default)s)",
    )
    command.add_argument("--url", help="control plane URL (overrides the credentials file)")
    command.add_argument(
        "--token",
        help="API token (overrides the credentials file; visible to other local users "
        "in the process list, prefer the credentials file)",
    )
    command.add_argument(
        "--organization",
        help="organization name, used to find workspaces by name "
        "(default: the credentials file's, else 'default')",
    )
    command.add_argument("--json", action="store_true", help="print JSON instead of text")
    return command


def _add(
    commands: Any, name: str, what: str, handler: Any, *, connected: bool = True
) -> argparse.ArgumentParser:
    command: argparse.ArgumentParser = commands.add_parser(name, help=what, description=what)
    # Not `run`: a positional argument named `run` would overwrite the handler.
    command.set_defaults(handler=handler)
    return _connected(command) if connected else command


def _run_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument("run", help="the run ID (run-...)")


def _local_parser(commands: Any) -> None:
    local = commands.add_parser("local", help="the embedded stack on this machine")
    local_commands = local.add_subparsers(dest="local_command", required=True)
    up = _add(local_commands, "up", "start the embedded stack", _local_up, connected=False)
    up.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    up.add_argument("--port", type=int, default=8700, help="port to listen on (%(default)s)")
    up.add_argument(
        "--data-dir",
        default=".runplane",
        help="where the client files and sign-in key are written (%(default)s)",
    )
    up.add_argument(
        "--sandbox-network",
        action="store_true",
        help="give sandboxes this machine's network (to download providers or reach "
        "clouds); they can then reach the stack too, so it serves one organization",
    )
    up.add_argument(
        "--runner-standby",
        type=int,
        default=0,
        metavar="N",
        help="keep N runners of the AWS-style standby pool waiting, each claiming its "
        "phase over HTTP (docs/standby.md); 0, the default, keeps the launcher's own "
        "standby runner",
    )
    up.add_argument(
        "--engine",
        help="the engine binary sandboxes run (default: the pinned one in this "
        "environment's engine/ folder or ./.venv/engine, else tofu, else terraform on PATH)",
    )


def _workspace_parser(commands: Any) -> None:
    workspace = commands.add_parser("workspace", help="workspaces")
    workspace_commands = workspace.add_subparsers(dest="workspace_command", required=True)
    create = _add(workspace_commands, "create", "create a workspace", _workspace_create)
    create.add_argument("name", help="the new workspace's name")
    create.add_argument(
        "--tag", action="append", help="a tag policies see (repeat for more; docs/policy.md)"
    )
    _add(workspace_commands, "list", "the organization's workspaces", _workspace_list)
    show = _add(workspace_commands, "show", "a workspace's settings and state", _workspace_show)
    show.add_argument("workspace", help="workspace name or ws- ID")
    update = _add(workspace_commands, "update", "change a workspace's settings", _workspace_update)
    update.add_argument("workspace", help="workspace name or ws- ID")
    update.add_argument(
        "--approval-window",
        metavar="DURATION",
        help="how long a plan waits for a decision: seconds, or 90m, 72h, 7d, 1d12h",
    )
    update.add_argument(
        "--tag", action="append", help="the workspace's tags, all of them (repeat for more)"
    )
    update.add_argument("--clear-tags", action="store_true", help="remove every tag")
    update.add_argument(
        "--second-approver-for-destroy",
        choices=["yes", "no"],
        help="whether every destroy run needs a second approver (docs/runs.md)",
    )
    update.add_argument(
        "--second-approver-over",
        metavar="N|none",
        help="plans destroying more than N resources need a second approver; none: no count",
    )
    update.add_argument(
        "--separation-of-duties",
        choices=["yes", "no"],
        help="yes: a run's creator may not approve it (docs/teams.md)",
    )
    github = _add(
        workspace_commands,
        "github",
        "show, bind or unbind the workspace's GitHub repository (docs/github.md)",
        _workspace_github,
    )
    github.add_argument("workspace", help="workspace name or ws- ID")
    github.add_argument("--repository", metavar="OWNER/NAME", help="bind to this repository")
    github.add_argument(
        "--branch", help="the branch whose pushes run (pull requests against it plan)"
    )
    github.add_argument(
        "--working-directory", default="", metavar="PATH", help="the configuration's directory"
    )
    github.add_argument(
        "--installation-id", type=int, metavar="ID", help="the GitHub App installation ID"
    )
    github.add_argument(
        "--push-run-kind",
        default="plan_and_apply",
        choices=("plan_and_apply", "plan_only"),
        help="what a push runs (%(default)s); pull requests run speculative plans, unless "
        "--pull-request-workspaces yes",
    )
    github.add_argument(
        "--pull-request-workspaces",
        default="no",
        choices=("yes", "no"),
        help="yes: each pull request gets a preview workspace NAME-pr-N, planned and applied "
        "(after approval) on each new commit, destroyed when it closes (%(default)s)",
    )
    github.add_argument(
        "--pull-request-auto-apply-destroy",
        default="no",
        choices=("yes", "no"),
        help="yes: a closed pull request's preview is destroyed without a person's "
        "approval (%(default)s)",
    )
    github.add_argument(
        "--trigger-pattern",
        action="append",
        default=[],
        metavar="GLOB",
        help="repeatable: only changes touching a matching file (or the working directory) "
        "run, e.g. 'modules/**/*.tf' (default: every change runs)",
    )
    github.add_argument(
        "--ignore-pattern",
        action="append",
        default=[],
        metavar="GLOB",
        help="repeatable: changed files matching it never start a run, e.g. '**/*.md'",
    )
    github.add_argument("--unbind", action="store_true", help="remove the binding")
    cli_schedules.add_parser(workspace_commands, _add, _client)
    cli_variables.add_parser(workspace_commands, _add, _client)
    cli_gitlab.add_workspace_parser(workspace_commands, _add, _client)
    cli_cloud.add_parser(workspace_commands, _add, _client)
    cli_auto_destroy.add_parser(workspace_commands, _add, _client)
    cli_delete.add_parser(workspace_commands, _add, _client)

    from runplane.cli_events import register as register_events

    register_events(workspace_commands, _add, _client)


def _run_parser(commands: Any) -> None:
    run = commands.add_parser("run", help="runs")
    run_commands = run.add_subparsers(dest="run_command", required=True)
    create = _add(run_commands, "create", "upload a directory and run it", _run_create)
    create.add_argument("--workspace", required=True, help="workspace name or ws- ID")
    create.add_argument("--dir", required=True, help="the configuration directory to upload")
    create.add_argument(
        "--kind", default="plan_and_apply", choices=KINDS, help="run kind (%(default)s)"
    )
    create.add_argument(
        "--destroy", action="store_true", help="plan to destroy every managed resource"
    )
    create.add_argument(
        "--refresh-only",
        action="store_true",
        help="only refresh: the apply accepts the real world into state",
    )
    create.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="ADDR",
        help="limit the plan to a resource or module (repeatable)",
    )
    create.add_argument(
        "--replace",
        action="append",
        default=[],
        metavar="ADDR",
        help="replace a resource instance even if unchanged (repeatable)",
    )
    create.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="a string variable; NAME alone reads TF_VAR_NAME from the environment. "
        "NAME=VALUE shows the value to other local users (process list): use NAME or "
        "--var-file for secrets. Repeatable; overrides --var-file",
    )
    create.add_argument(
        "--var-file",
        action="append",
        default=[],
        metavar="FILE",
        help='variables from a JSON object of strings or NAME = "value" lines; repeatable',
    )
    listing = _add(run_commands, "list", "a workspace's runs, newest first", _run_list)
    listing.add_argument("--workspace", required=True, help="workspace name or ws- ID")
    _run_argument(_add(run_commands, "show", "the run review", _run_show))
    cli_plan.add_parser(run_commands, _add, _client)
    logs = _add(run_commands, "logs", "print the log of a run's plan or apply", _run_logs)
    _run_argument(logs)
    logs.add_argument(
        "--phase", default="plan", choices=["plan", "apply"], help="which log (%(default)s)"
    )
    logs.add_argument(
        "--follow",
        action="store_true",
        help="print the log as it grows, until it is complete (waits for the phase to start)",
    )
    logs.add_argument(
        "--timeout",
        type=float,
        default=1800,
        help="with --follow: give up after this many seconds (%(default)s)",
    )
    for decision in ("approve", "reject"):
        decide = _add(run_commands, decision, f"{decision} the plan", _run_decide)
        _run_argument(decide)
        decide.add_argument("--comment", help="recorded with the decision")
        decide.set_defaults(decision=decision)
    cancel = _add(run_commands, "cancel", "cancel a run that has not ended", _run_cancel)
    _run_argument(cancel)
    watch = _add(run_commands, "watch", "follow a run until it ends", _run_watch)
    _run_argument(watch)
    watch.add_argument(
        "--until",
        action="append",
        default=[],
        metavar="STATUS",
        help="also stop (exit 0) at this status; repeatable",
    )
    watch.add_argument(
        "--timeout", type=float, default=1800, help="give up after this many seconds (%(default)s)"
    )
    watch.add_argument(
        "--no-logs",
        action="store_true",
        help="show only stage progress, not the plan and apply logs",
    )
    recover = _add(
        run_commands,
        "recover",
        "release the workspace a run holds after an uncertain apply (docs/recovery.md)",
        _run_recover,
    )
    _run_argument(recover)
    recover.add_argument(
        "--resolution",
        required=True,
        choices=["current_state_verified", "import_emergency_state"],
        help="the workspace's current state is the truth, or import an emergency snapshot",
    )
    recover.add_argument("--reason", required=True, help="why, recorded in the audit events")
    recover.add_argument(
        "--current-state-version",
        required=True,
        metavar="SV_ID|none",
        help="the current state version you verified, as `run show` prints it",
    )
    recover.add_argument(
        "--confirm-revoke-authority",
        action="store_true",
        help="confirm the run's authority is revoked and the workspace fence advanced",
    )
    recover.add_argument(
        "--emergency-state", metavar="FILE", help="import_emergency_state: the snapshot to import"
    )
    recover.add_argument(
        "--emergency-state-sha256",
        metavar="HEX",
        help="the SHA-256 of the snapshot you reviewed (sha256sum FILE)",
    )
    recover.add_argument(
        "--discard-claimed-upload",
        metavar="SV_ID@CLAIMED_AT",
        help="discard this claimed, never-finished state upload, exactly as `run show` prints it",
    )
    recover.add_argument(
        "--acknowledge-state-loss",
        action="store_true",
        help="with --discard-claimed-upload: accept that in-flight state can be lost",
    )
    recover.add_argument(
        "--takeover",
        action="store_true",
        help="continue a recovery another operator prepared, after its lease ran out",
    )
    override = _add(
        run_commands, "override", "override a soft-mandatory policy failure", _run_override
    )
    _run_argument(override)
    override.add_argument("--reason", required=True, help="why, recorded with the override")


def _controls_parser(commands: Any) -> None:
    controls = commands.add_parser("controls", help="launch controls")
    controls_commands = controls.add_subparsers(dest="controls_command", required=True)
    for name, action, what in (
        ("show", _controls_show, "show launch controls and running sandboxes"),
        ("set", _controls_set, "change launch controls (only what is given)"),
    ):
        command = _add(controls_commands, name, what, action)
        command.add_argument(
            "--platform",
            dest="scope",
            action="store_const",
            const="platform",
            default="organization",
            help="the platform's controls (needs platform:operate)",
        )
        if name == "set":
            command.add_argument(
                "--launches", choices=["on", "off"], help="allow or stop new sandbox launches"
            )
            command.add_argument(
                "--suspended", choices=["yes", "no"], help="suspend the organization (or not)"
            )
            command.add_argument(
                "--max-sandboxes", type=int, help="running sandbox limit; negative: no limit"
            )
            for flag, what_list in (
                ("region", "allowed region"),
                ("runner-release", "allowed runner release"),
                ("policy-runtime", "allowed policy runtime"),
            ):
                command.add_argument(
                    f"--{flag}",
                    action="append",
                    help=f"an {what_list}; repeat for several, an empty value clears the list",
                )


def _token_parser(commands: Any) -> None:
    token = commands.add_parser("token", help="API tokens for automation")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = _add(token_commands, "create", "issue a token (shown once)", _token_create)
    create.add_argument("name", help="what the token is for")
    create.add_argument(
        "--role",
        required=True,
        choices=["reader", "developer", "operator", "admin"],
        help="the token's role (never beyond your own)",
    )
    revoke = _add(token_commands, "revoke", "revoke a token by its ID", _token_revoke)
    revoke.add_argument("id", help="the token ID")


def _policy_parser(commands: Any) -> None:
    policy = commands.add_parser("policy", help="policy sets (Rego)")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    publish = _add(policy_commands, "publish", "publish a policy set DIR", _policy_publish)
    publish.add_argument("dir", help="the policy set directory")
    _add(policy_commands, "list", "the organization's policy sets", _policy_list)
    attach = _add(policy_commands, "attach", "attach a policy set", _policy_attach)
    attach.add_argument("name", help="the policy set's name")
    attach.add_argument(
        "--workspace",
        action="append",
        default=[],
        help="workspace name or ws- ID; repeatable (none: detach from all)",
    )
    attach.add_argument("--all", action="store_true", help="attach to every workspace")
    test = _add(
        policy_commands,
        "test",
        "evaluate DIR against a saved plan JSON, or run its unit tests",
        _policy_test,
        connected=False,
    )
    test.add_argument("dir", nargs="?", help="the policy set directory (or --dir)")
    test.add_argument("--dir", dest="dir_flag", metavar="DIR", help="the policy set directory")
    test.add_argument("--plan", help="`tofu show -json PLANFILE` output")
    test.add_argument(
        "--strict-builtin-errors",
        action="store_true",
        help="with --unit: a builtin error errors the test (as in a run) instead of making "
        "the call undefined (as opa test does)",
    )
    test.add_argument(
        "--unit",
        action="store_true",
        help="run the test_* rules like opa test (*_test.rego, *.test.rego; JSON/YAML as data)",
    )
    test.add_argument("--workspace", help="workspace name the policies see (local)")
    test.add_argument(
        "--kind",
        choices=[*KINDS, "refresh_only"],
        help="run kind the policies see (plan_and_apply)",
    )
    test.add_argument(
        "--run-context",
        metavar="FILE",
        help="JSON with the rest of what the policies see of the run: tags, message, "
        "drift_detection, vcs (see docs/policy.md)",
    )
    test.add_argument("--json", action="store_true", help="print JSON instead of text")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="runplane",
        description="Runplane control plane",
        epilog="exit codes: 0 success, 1 the run or policy test did not succeed, "
        "2 the API refused the request (or bad usage), 3 a local error, 130 interrupted",
    )
    commands = root.add_subparsers(dest="command", required=True)
    for add in (
        _local_parser,
        _workspace_parser,
        _run_parser,
        _controls_parser,
        _token_parser,
        _policy_parser,
    ):
        add(commands)
    cli_github.add_parser(commands, _add, _client)
    cli_variable_sets.add_parser(commands, _add, _client)
    cli_teams.add_parser(commands, _add, _client)
    cli_attention.add_parser(commands, _add, _client)
    cli_audit.add_parser(commands, _add, _client)
    cli_login.add_parser(commands, _add, DEFAULT_CREDENTIALS)
    return root


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except ApiError as error:
        code = f" {error.code}" if error.code else ""
        print(f"error: {_one_line(error.detail)} (HTTP {error.status}{code})", file=sys.stderr)
        return EXIT_API_ERROR
    except InvalidPolicySet as error:
        # A refused policy set, found locally: the same exit code as the API's refusal.
        print(f"error: {_one_line(str(error))} ({error.code})", file=sys.stderr)
        return EXIT_API_ERROR
    except (CliError, InputError, ConfigurationError, RunplaneError) as error:
        print(f"error: {_one_line(str(error))}", file=sys.stderr)
    except BrokenPipeError:
        # The reader stopped early (`| head`): end quietly, as a shell pipeline expects.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except urllib.error.URLError as error:
        print(f"error: cannot reach the control plane: {error.reason}", file=sys.stderr)
    except TimeoutError as error:
        print(f"error: {_one_line(str(error)) or 'timed out'}", file=sys.stderr)
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        if args.command != "policy":
            raise
        # Policy commands read arbitrary authors' files: a defect is one line, not a trace.
        print(f"error: {type(error).__name__}: {_one_line(str(error))}", file=sys.stderr)
    return EXIT_LOCAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
