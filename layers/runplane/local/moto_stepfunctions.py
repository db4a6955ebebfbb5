"""Run Step Functions state machines in moto against our own Python Lambda handlers.

Pinned to moto 5.2.x (verified on 5.2.5): both patches replace private moto methods,
so ``check_moto_version`` refuses any other minor and every patch function calls it.
Re-verify the two patch points below when moto is upgraded.

With ``mock_aws(config={"stepfunctions": {"execute_state_machine": True},
"lambda": {"use_docker": False}})`` moto interprets real ASL on a daemon thread per
execution, and every Lambda Task reaches
``moto.awslambda_simple.models.LambdaSimpleBackend.invoke`` through a boto3 client.
That method ignores the function and echoes the request body, so:

* ``route_lambda_invocations`` replaces it with a dispatch, by function name, to
  in-process handlers: a handler's return value becomes the Lambda payload, a raised
  exception becomes an ``Unhandled`` function error whose ``errorType`` is the
  exception's class name (so ASL ``Retry``/``Catch`` match it, as on AWS), and a
  function with no handler is a ``ResourceNotFoundException`` (the Task fails).
* ``fix_task_token_race`` fixes a moto crash when a task token is sent while another
  execution is still starting (see its docstring).

Both patches are process-wide and idempotent; the Lambda routes are a registry that
``route_lambda_invocations`` replaces. In server mode (``ThreadedMotoServer``) apply
them in the process that runs the server.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType
from typing import Any, Final

PINNED_MOTO_MINOR: Final = "5.2."
"""The moto minor whose internals these patches were verified against."""

DEFAULT_TIMEOUT_SECONDS: Final = 900
"""The budget ``LambdaContext.get_remaining_time_in_millis`` counts down from (Lambda's max)."""

LambdaHandler = Callable[[dict[str, Any], Any], Any]
"""``handler(event, context) -> result``, the shape of a Python Lambda handler."""

_LOG = logging.getLogger(__name__)
_GUARD = threading.Lock()
_GUARD_CLIENTS = threading.Lock()
_ROUTES: Mapping[str, LambdaHandler] = MappingProxyType({})
_PATCHED: set[str] = set()


class MotoVersionError(RuntimeError):
    """The installed moto is not the minor these patches were verified against."""


def check_moto_version() -> str:
    """Return the installed moto version; raise ``MotoVersionError`` unless it is 5.2.x."""
    try:
        version = metadata.version("moto")
    except metadata.PackageNotFoundError as exc:
        raise MotoVersionError("moto is not installed; the local stack needs moto 5.2.x") from exc
    if not version.startswith(PINNED_MOTO_MINOR):
        raise MotoVersionError(
            f"moto {version} is installed but runplane.local.moto_stepfunctions patches "
            f"private moto internals verified only on moto {PINNED_MOTO_MINOR}x; "
            "re-verify the patch points and update PINNED_MOTO_MINOR"
        )
    return version


@dataclass(frozen=True)
class LambdaContext:
    """The subset of the Lambda context object our handlers use."""

    function_name: str
    invoked_function_arn: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    deadline: float = field(default_factory=lambda: time.monotonic() + DEFAULT_TIMEOUT_SECONDS)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def function_name_of(function_name_or_arn: str) -> str:
    """Resolve ``NAME``, ``NAME:qualifier`` or a (partial) function ARN to ``NAME``.

    ``arn:aws:lambda:REGION:ACCOUNT:function:NAME[:qualifier]`` and
    ``ACCOUNT:function:NAME[:qualifier]`` both give ``NAME``.
    """
    _, marker, rest = function_name_or_arn.partition(":function:")
    name = rest if marker else function_name_or_arn
    return name.split(":", 1)[0]


def route_lambda_invocations(handlers: Mapping[str, LambdaHandler]) -> None:
    """Make moto's docker-less Lambda invoke ``handlers[function_name]`` in-process.

    Replaces the routing table (a copy of ``handlers`` keyed by bare function name);
    the method patch itself is applied once. Invoking any other function fails with
    ``ResourceNotFoundException`` instead of moto's default "happy path" echo.
    """
    global _ROUTES
    check_moto_version()
    routes = MappingProxyType(dict(handlers))
    with _GUARD:
        _ROUTES = routes
        if "lambda" not in _PATCHED:
            _patch_lambda_invoke()
            _PATCHED.add("lambda")


def clear_lambda_routes() -> None:
    """Forget every route: every invocation then fails as an unknown function."""
    global _ROUTES
    with _GUARD:
        _ROUTES = MappingProxyType({})


def _patch_lambda_invoke() -> None:
    from moto.awslambda.exceptions import LambdaClientError
    from moto.awslambda_simple.models import LambdaSimpleBackend

    class FunctionNotFound(LambdaClientError):
        code = 404

        def __init__(self, arn: str, name: str) -> None:
            routed = ", ".join(sorted(_ROUTES)) or "none"
            super().__init__(
                "ResourceNotFoundException",
                f"Function not found: {arn} (no handler routed for {name!r}; routed: {routed})",
            )

    def invoke(
        self: Any,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> str | bytes | None:
        name = function_name_of(function_name)
        arn = f"arn:aws:lambda:{self.region_name}:{self.account_id}:function:{name}"
        handler = _ROUTES.get(name)
        if handler is None:
            raise FunctionNotFound(arn, name)
        if headers is not None and headers.get("X-Amz-Invocation-Type") == "DryRun":
            return b""
        context = LambdaContext(function_name=name, invoked_function_arn=arn)
        return _call(handler, _decode(body), context, response_headers)

    invoke.__doc__ = "Dispatch to the handler routed by runplane.local.moto_stepfunctions."
    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]


def _decode(body: Any) -> Any:
    if body is None or body in (b"", ""):
        return {}
    text = body.decode("utf-8") if isinstance(body, bytes | bytearray) else str(body)
    return json.loads(text)


def _call(
    handler: LambdaHandler, event: Any, context: LambdaContext, response_headers: Any
) -> bytes:
    try:
        result = handler(event, context)
    except Exception as exc:
        _LOG.info("lambda %s raised %s", context.function_name, type(exc).__name__, exc_info=True)
        return _function_error(response_headers, type(exc).__name__, str(exc))
    try:
        return json.dumps(result).encode("utf-8")
    except (TypeError, ValueError) as exc:
        return _function_error(response_headers, "Runtime.MarshalError", str(exc))


def _function_error(response_headers: Any, error_type: str, message: str) -> bytes:
    response_headers["x-amz-function-error"] = "Unhandled"
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode("utf-8")


def fix_task_token_race() -> None:
    """Skip executions that have not started evaluating when moto looks up a task token.

    The bug (moto 5.2.x): ``StepFunctionsParserBackend.send_task_success``,
    ``send_task_failure`` and ``send_task_heartbeat`` (and ``describe_map_run`` /
    ``update_map_run``) iterate ``_get_executions()`` and dereference
    ``execution.exec_worker.env``. ``start_execution`` appends the execution to its
    state machine *before* ``Execution.start`` sets ``exec_worker`` and ``exec_status``,
    and the worker sets ``env`` only once its own daemon thread has parsed the
    definition. A token sent while any other execution is in that window crashes with
    ``AttributeError`` (``NoneType`` has no ``callback_pool_manager``; or ``.value`` of
    a ``None`` status), a 500 in server mode, and the waiting execution stays RUNNING.
    A lock around the calls does not help: the window is on the execution's thread.

    Why filtering is safe: every caller only looks for state held by
    ``exec_worker.env`` (the callback pool that issued the token, the map-run
    records). Task tokens and map runs are created by an execution's ``env`` while it
    evaluates, so an execution without an ``env`` cannot own the token or map run
    being looked up; skipping it changes no answer and takes no lock.
    ``exec_worker`` and ``exec_status`` are set before the worker thread starts, so an
    ``env`` implies a status and the status filter is then safe to apply.
    """
    check_moto_version()
    with _GUARD:
        if "task-token-race" in _PATCHED:
            return
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        if not callable(getattr(StepFunctionsParserBackend, "_get_executions", None)):
            raise MotoVersionError(
                "StepFunctionsParserBackend._get_executions is gone: re-verify the patch"
            )

        def _get_executions(self: Any, execution_status: Any = None) -> list[Any]:
            executions: list[Any] = []
            for state_machine in list(self.state_machines):
                for execution in list(state_machine.executions):
                    worker = execution.exec_worker
                    if worker is None or worker.env is None:
                        continue  # not evaluating yet: owns no token or map run
                    if execution_status is None or execution_status == execution.status:
                        executions.append(execution)
            return executions

        _get_executions.__doc__ = "Executions whose worker has an environment (see fix)."
        StepFunctionsParserBackend._get_executions = _get_executions  # type: ignore[method-assign]
        _PATCHED.add("task-token-race")


def reuse_lambda_clients() -> None:
    """Build the interpreter's Lambda client once per region and server, not once per
    Task.

    moto's ``lambda_eval_utils`` calls ``boto_client_for`` for every Lambda Task it
    runs, and building a boto3 client costs about 9 ms of CPU, a run's seven tasks
    more than their own handlers' reads. A client is safe to share between threads;
    one with state credentials (which the ASL here never sets) is built as before.
    """
    check_moto_version()
    with _GUARD:
        if "lambda-clients" in _PATCHED:
            return
        from moto.core.models import botocore_stubber
        from moto.settings import moto_server_port
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import (
            lambda_eval_utils,
        )

        build: Callable[..., Any] = getattr(lambda_eval_utils, "boto_client_for")  # noqa: B009
        clients: dict[tuple[str, str, bool, str], Any] = {}

        def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
            if state_credentials is not None:
                return build(region=region, service=service, state_credentials=state_credentials)
            # moto builds a client for its in-process stubber (mock_aws) or one naming
            # its server by port (MOTO_PORT, read per call): one of each, per port, so
            # a stack started after another gets its own.
            key = (region, service, bool(botocore_stubber.enabled), moto_server_port())
            with _GUARD_CLIENTS:
                client = clients.get(key)
                if client is None:
                    client = clients[key] = build(region=region, service=service)
            return client

        setattr(lambda_eval_utils, "boto_client_for", boto_client_for)  # noqa: B010
        _PATCHED.add("lambda-clients")


def enable_step_functions(handlers: Mapping[str, LambdaHandler]) -> None:
    """Route Lambda invocations to ``handlers``, fix the task-token race and reuse the
    interpreter's Lambda client."""
    route_lambda_invocations(handlers)
    fix_task_token_race()
    reuse_lambda_clients()
