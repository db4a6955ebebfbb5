"""What the runner writes for the engine: the backend override and config, the CLI
configuration and the variables file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from runplane.domain.variables import name_problem
from runplane.runner.cli_config import cli_config, direct_installation, provider_installation
from runplane.runner.refusal import Refused

BACKEND_OVERRIDE_NAME: Final = "runplane_backend_override.tf"

_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?")
_TFE_NAME = re.compile(r"[A-Za-z0-9_-]+")
_API_URL = re.compile(r"https?://[^\s\"'\\$%{}]+")
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=:-]+")


def write_backend_override(
    workdir: Path, *, hostname: str, organization: str, workspace: str
) -> Path:
    """Point the configuration in ``workdir`` at the Runplane Cloud API.

    Writes ``runplane_backend_override.tf``: as an ``*_override.tf`` file it is merged
    after the configuration's own files and its ``backend "remote"`` block replaces any
    backend block they declare (or adds one where they declare none). Override files are
    merged in lexical order, so a user's own ``*_override.tf`` that sorts later and
    declares a backend would win: the runner refuses configurations that declare one
    (:mod:`runplane.runner.config_check`) and also passes the same values with
    ``-backend-config`` (:func:`write_backend_config`), which no file can override.
    """
    _check_backend_names(hostname, organization, workspace)
    path = Path(workdir) / BACKEND_OVERRIDE_NAME
    path.write_text(
        "# Written by the Runplane runner: the run's state lives in the Runplane Cloud API.\n"
        "terraform {\n"
        '  backend "remote" {\n'
        f'    hostname     = "{hostname}"\n'
        f'    organization = "{organization}"\n'
        "\n"
        "    workspaces {\n"
        f'      name = "{workspace}"\n'
        "    }\n"
        "  }\n"
        "}\n",
        encoding="utf-8",
    )
    return path


def write_backend_config(path: Path, *, hostname: str, organization: str, workspace: str) -> Path:
    """Write the ``-backend-config`` file naming the Runplane Cloud API and workspace.

    Values given with ``-backend-config`` win over those of any backend block in the
    configuration, and a backend of another type fails ``init`` on these arguments, so a
    configuration that slipped a backend past the check still cannot point the run's
    state elsewhere.
    """
    _check_backend_names(hostname, organization, workspace)
    content = (
        f'hostname     = "{hostname}"\n'
        f'organization = "{organization}"\n'
        "workspaces {\n"
        f'  name = "{workspace}"\n'
        "}\n"
    )
    return _write_private(Path(path), content)


def _checked(variables: Mapping[str, str]) -> None:
    for name, value in variables.items():
        problem = name_problem(name)
        if problem is not None:
            raise Refused(problem)
        if not isinstance(value, str):
            raise Refused(f"variable {name!r} does not have a string value")


# How often the hand-off looks for the engine opening its end.
_HAND_OFF_POLL_SECONDS = 0.005


@contextlib.contextmanager
def variables_handed_once(
    path: Path, variables: Mapping[str, str], owner: tuple[int, int] | None = None
) -> Iterator[Path]:
    """The run's variables as a ``-var-file`` that holds them for one read only.

    ``path`` is made a FIFO (owned by ``owner``, the engine's UID and GID, if given):
    the first reader, which is the engine loading its variables before it runs any of
    the configuration, gets the JSON and its end; then the FIFO is removed. So no file
    the configuration could read later (``file()``) holds the values, and nothing is
    left on disk. Values are JSON strings, so the engine takes them literally (no
    template or expression is evaluated) and converts them where the variable declares
    a type. Raises :class:`~runplane.runner.refusal.Refused` for a name the engine
    would not accept."""
    _checked(variables)
    # One variable a line: the engine's type error quotes the var file's line.
    data = json.dumps(dict(variables), indent=0).encode()
    os.mkfifo(path, 0o600)
    if owner is not None:
        os.chown(path, *owner)
    done = threading.Event()
    writer = threading.Thread(
        target=_hand_off, args=(path, data, done), name="variables", daemon=True
    )
    writer.start()
    try:
        yield path
    finally:
        done.set()
        writer.join(timeout=10)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _hand_off(path: Path, data: bytes, done: threading.Event) -> None:
    while not done.is_set():
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as error:
            if error.errno != errno.ENXIO:  # anything but "no reader yet": give up
                return
            done.wait(_HAND_OFF_POLL_SECONDS)
            continue
        try:
            if not stat.S_ISFIFO(os.fstat(descriptor).st_mode):
                return  # something else was put in its place: it gets nothing
            os.set_blocking(descriptor, True)
            with contextlib.suppress(BrokenPipeError):
                view = memoryview(data)
                while view:
                    view = view[os.write(descriptor, view) :]
        finally:
            os.close(descriptor)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return


def write_var_file(path: Path, variables: Mapping[str, str]) -> Path:
    """Write the run's variables as a ``-var-file`` (JSON, mode 0o600, created afresh).

    Each value is a JSON string, so the engine takes it literally (no template or
    expression is evaluated) and converts it to a ``number`` or ``bool`` where the
    variable declares one. Raises :class:`~runplane.runner.refusal.Refused` for a name
    the engine would not accept.
    """
    _checked(variables)
    path = Path(path)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(dict(variables), handle)
    return path


def _write_private(path: Path, content: str) -> Path:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)  # also when the file existed with a looser mode
        handle.write(content)
    return path


def _check_backend_names(hostname: str, organization: str, workspace: str) -> None:
    if not _HOSTNAME.fullmatch(hostname):
        raise ValueError(f"not a hostname[:port]: {hostname!r}")
    for label, value in (("organization", organization), ("workspace", workspace)):
        if not _TFE_NAME.fullmatch(value):
            raise ValueError(f"not a valid {label} name: {value!r}")


def write_cli_config(
    path: Path,
    *,
    host: str,
    api_url: str,
    token: str,
    provider_mirror: Path | None = None,
) -> Path:
    """Write an engine CLI configuration (mode 0o600) for the Cloud API at ``host``.

    The ``host`` block declares the ``tfe.v2``, ``tfe.v2.1`` and ``tfe.v2.2`` services at
    ``api_url``, so no https discovery request is made (plain http works); the
    ``credentials`` block carries ``token``. Terraform 1.0.x has no ``TF_TOKEN_*``
    variables, so this file is how the engine authenticates. Point ``TF_CLI_CONFIG_FILE``
    at it.

    The ``provider_installation`` block is always explicit, so the engine consults no
    implied local mirror a configuration could ship (``terraform.d/plugins``): every
    provider is installed directly from its registry, except, with ``provider_mirror``
    (an absolute directory path), those of the ``registry.terraform.io/runplane``
    namespace, installed from that filesystem mirror only (see docs/test-provider.md).
    """
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(f"not a hostname[:port]: {host!r}")
    if not _API_URL.fullmatch(api_url):
        raise ValueError(f"not an http(s) URL usable in a CLI configuration: {api_url!r}")
    if not _TOKEN.fullmatch(token):
        raise ValueError("the token has characters a CLI configuration cannot carry")
    installation = direct_installation()
    if provider_mirror is not None:
        mirror = os.fspath(provider_mirror)
        # No control characters, quotes, backslashes or template introducers in the string.
        if not Path(mirror).is_absolute() or not re.fullmatch(r"/[^\x00-\x1f\x7f\"\\$%]*", mirror):
            raise ValueError(
                f"not an absolute path usable in a CLI configuration: {mirror!r} (provider_mirror)"
            )
        installation = provider_installation(mirror, ["registry.terraform.io/runplane/*"])
    services = {name: api_url for name in ("tfe.v2", "tfe.v2.1", "tfe.v2.2")}
    content = cli_config(host, services, token, installation=installation, disable_checkpoint=True)
    return _write_private(Path(path), content)
