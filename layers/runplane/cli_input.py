"""What a person types into the ``runplane`` CLI, checked before anything is sent.

Pure functions: variables (``--var``, ``--var-file``) and durations. Each refusal is
an :class:`InputError` whose message says what to fix.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

ENV_PREFIX = "TF_VAR_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# NAME = "value", with an optional trailing comment.
_ASSIGNMENT = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*("(?:[^"\\]|\\.)*")\s*(?:(?:#|//).*)?')
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION_PART = re.compile(r"(\d+)([smhdw])")


class InputError(ValueError):
    """Input the CLI refuses before making any request."""


def variables(
    assignments: Iterable[str],
    var_files: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Variables from ``--var-file`` files, then ``--var`` flags (a later one wins).

    ``NAME=VALUE`` takes the value as given; a bare ``NAME`` reads ``TF_VAR_NAME`` from
    the environment, so the value never appears in the process list.
    """
    env = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for path in var_files:
        found.update(read_var_file(Path(path)))
    for item in assignments:
        name, sep, value = item.partition("=")
        _check_name(name, f"--var {item.split('=', 1)[0]}")
        if not sep:
            if ENV_PREFIX + name not in env:
                raise InputError(
                    f"--var {name}: the environment variable {ENV_PREFIX}{name} is not set "
                    f"(export it, or use --var-file)"
                )
            value = env[ENV_PREFIX + name]
        found[name] = value
    return found


def read_var_file(path: Path) -> dict[str, str]:
    """A JSON object of strings, or ``NAME = "value"`` lines (comments with # or //)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--var-file {path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"--var-file {path}: is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"--var-file {path}: cannot be read ({error})") from None
    if path.suffix == ".json" or text.lstrip()[:1] in ("{", "["):
        return _json_vars(path, text)
    return _tfvars(path, text)


def _json_vars(path: Path, text: str) -> dict[str, str]:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise InputError(f"--var-file {path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise InputError(f"--var-file {path}: must be a JSON object of strings")
    for name, value in data.items():
        _check_name(name, f"--var-file {path}: {name!r}")
        if not isinstance(value, str):
            raise InputError(f"--var-file {path}: {name} must be a string")
    return dict(data)


def _tfvars(path: Path, text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        match = _ASSIGNMENT.fullmatch(line)
        if match is None:
            raise InputError(
                f'--var-file {path}, line {number}: expected NAME = "value" '
                "(only string values; or use a JSON object)"
            )
        found[match.group(1)] = _hcl_string(match.group(2), f"--var-file {path}, line {number}")
    return found


def _hcl_string(quoted: str, where: str) -> str:
    body = quoted[1:-1]
    # Templates are not allowed in variable files; $${ and %%{ are their escapes.
    unescaped = body.replace("$${", "").replace("%%{", "")
    if "${" in unescaped or "%{" in unescaped:
        raise InputError(f"{where}: templates (${{...}}, %{{...}}) are not allowed in values")
    try:
        value = json.loads(f'"{body}"', strict=False)
    except ValueError:
        raise InputError(f"{where}: invalid escape in the quoted value") from None
    return str(value).replace("$${", "${").replace("%%{", "%{")


def _check_name(name: str, where: str) -> None:
    if not _NAME.fullmatch(name):
        raise InputError(f"{where}: a variable name is a letter or _ then letters, digits or _")


def duration(text: str) -> int:
    """Seconds from ``3600``, ``90s``, ``45m``, ``72h``, ``7d``, ``2w`` or ``1d12h``."""
    value = text.strip().lower()
    if value.isdigit():
        seconds = int(value)
    else:
        parts = _DURATION_PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise InputError(
                f"{text!r} is not a duration: use seconds or forms like 90m, 72h, 7d, 1d12h"
            )
        seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds < 1:
        raise InputError(f"{text!r}: a duration must be at least one second")
    return seconds


def read_input_file(path: str, flag: str, max_bytes: int = 10_000_000) -> bytes:
    """A file a flag names, read whole (at most ``max_bytes``), or a one-line refusal."""
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise InputError(f"{flag} {path}: larger than {max_bytes} bytes")
        with open(path, "rb") as file:
            return file.read(max_bytes + 1)[:max_bytes]
    except FileNotFoundError:
        raise InputError(f"{flag} {path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{flag} {path}: is a directory") from None
    except PermissionError:
        raise InputError(f"{flag} {path}: permission denied") from None
