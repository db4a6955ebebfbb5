"""The engine CLI configuration (``TF_CLI_CONFIG_FILE``): the one writer of its HCL.

The runner, the embedded stack and the test-provider installer all write the same three
blocks (service discovery, credentials, provider installation); they differ only in what
they put in them. Standard library only: the runner imports it inside the sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def hcl_string(value: str) -> str:
    """``value`` as a quoted HCL string: escapes and template introducers neutralised."""
    escaped = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("${", "$${")
        .replace("%{", "%%{")
    )
    return f'"{escaped}"'


def provider_installation(path: str, patterns: Iterable[str]) -> str:
    """Install ``patterns`` from the filesystem mirror at ``path`` only; the rest directly."""
    listed = ", ".join(hcl_string(p) for p in patterns)
    return (
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f"    path    = {hcl_string(path)}\n"
        f"    include = [{listed}]\n"
        "  }\n"
        "  direct {\n"
        f"    exclude = [{listed}]\n"
        "  }\n"
        "}\n"
    )


def direct_installation() -> str:
    """Install every provider from its registry, and from nowhere else: an explicit
    block, so no implied local mirror (``terraform.d/plugins`` beside the
    configuration, the home directory's plugin directories) is ever consulted."""
    return "provider_installation {\n  direct {}\n}\n"


def cli_config(
    host: str,
    services: Mapping[str, str],
    token: str,
    *,
    installation: str = "",
    disable_checkpoint: bool = False,
) -> str:
    """A CLI configuration declaring ``services`` at ``host`` (so no https discovery
    request is made) with ``token`` as its credentials, then ``installation`` (if any)."""
    declared = "".join(f'    "{name}" = "{url}",\n' for name, url in services.items())
    return (
        ("disable_checkpoint = true\n\n" if disable_checkpoint else "") + f'host "{host}" {{\n'
        "  services = {\n"
        f"{declared}"
        "  }\n"
        "}\n"
        "\n"
        f'credentials "{host}" {{\n'
        f'  token = "{token}"\n'
        "}\n" + (f"\n{installation}" if installation else "")
    )
