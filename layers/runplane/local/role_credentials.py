"""Sign each embedded handler's AWS calls with its own role's credentials.

Off unless a test installs a resolver: then every request botocore signs in this
process (boto3's clients, pynamodb's, moto's own interpreter client, presigned
URLs) asks the resolver for credentials, given the deployed function the call is
made for (``runplane.adapters.acting_function``) and the request's service and
operation. botocore's own per-request credentials (``request_credentials`` in the
signing context) carry them, so no client is rebuilt or shared differently. The
resolver also sees presigned URLs as they are signed (they never reach moto's
authorization, which does not check them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from runplane.adapters.acting_function import acting_function

# (acting function or None, signing name, operation, request) -> botocore Credentials.
Resolver = Callable[[str | None, str, str, Any], Any]

_GUARD = threading.Lock()
_RESOLVER: list[Resolver] = []


def install(resolver: Resolver) -> None:
    """Sign every request from now on with what ``resolver`` returns."""
    with _GUARD:
        _patch_signer()
        _RESOLVER[:] = [resolver]


def uninstall() -> None:
    with _GUARD:
        _RESOLVER.clear()


def _patch_signer() -> None:
    from botocore.signers import RequestSigner

    original: Callable[..., Any] = RequestSigner.sign
    if getattr(original, "runplane_role_credentials", False):
        return

    def sign(self: Any, operation_name: str, request: Any, *args: Any, **kwargs: Any) -> Any:
        resolvers = list(_RESOLVER)
        if resolvers:
            credentials = resolvers[0](
                acting_function(), self._signing_name, operation_name, request
            )
            request.context.setdefault("signing", {})["request_credentials"] = credentials
        return original(self, operation_name, request, *args, **kwargs)

    sign.runplane_role_credentials = True  # type: ignore[attr-defined]
    RequestSigner.sign = sign  # type: ignore[method-assign]
