"""Classifying engine failures: which mean "this plan needs cloud credentials the
sandbox does not have".
"""

from __future__ import annotations

import re
from typing import Final

# (provider, pattern) pairs: engine failures that mean "this plan needs cloud credentials
# the sandbox does not have". Searched case-insensitively in whitespace-normalised text,
# since the engine wraps long diagnostics at 78 columns. Invalid or expired credentials are
# deliberately not here: those are ordinary plan failures.
_MISSING_CREDENTIALS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (provider, re.compile(pattern, re.IGNORECASE))
    for provider, pattern in (
        # AWS provider v4+ ("No valid credential sources found") and v3 ("no valid
        # credential sources for Terraform AWS Provider found"); the SDK's chain errors.
        ("aws", r"no valid credential sources (?:for [\w ]{1,40} )?found"),
        ("aws", r"NoCredentialProviders"),
        ("aws", r"no EC2 IMDS role found"),
        ("aws", r"failed to refresh cached credentials"),
        # Google: application default credentials absent.
        ("google", r"could not find default credentials"),
        # AzureRM: no usable Azure CLI login in the sandbox.
        ("azurerm", r"Authenticating using the Azure CLI is only supported as a User"),
        ("azurerm", r"Please run 'az login' to set ?up account"),
        ("azurerm", r"launching Azure CLI: exec: \W*az\W*: executable file not found"),
    )
)


def missing_credentials_provider(log_text: str) -> str | None:
    """The provider whose missing credentials made the engine fail, if recognisable."""
    normalised = " ".join(log_text.split())
    for provider, pattern in _MISSING_CREDENTIALS:
        if pattern.search(normalised):
            return provider
    return None


def credentials_missing(log_text: str) -> bool:
    """Whether the engine failed for lack of cloud credentials (``plan_credentials_required``)."""
    return missing_credentials_provider(log_text) is not None
