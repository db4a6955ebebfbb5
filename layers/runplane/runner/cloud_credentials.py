"""A phase's cloud credentials, handed to the engine the way each cloud's providers read them.

Only the engine's environment (and files in the engine's own directory) ever holds
them: never the runner's own environment, never the policy evaluator. What each
provider reads:

- AWS: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
  ``AWS_REGION`` and ``AWS_DEFAULT_REGION`` (the provider and the SDKs read either);
  ``AWS_ENDPOINT_URL_STS`` only where the control plane names a non-default STS.
- GCP: an ``external_account`` credential configuration whose token source is a file
  holding the workload identity token (``GOOGLE_APPLICATION_CREDENTIALS``); Google's
  STS exchanges it, as the workspace's workload identity pool allows.
- Azure: ``ARM_USE_OIDC``, ``ARM_OIDC_TOKEN_FILE_PATH``, ``ARM_CLIENT_ID`` and
  ``ARM_TENANT_ID`` for the azurerm provider, and the ``AZURE_FEDERATED_TOKEN_FILE``
  family for the Azure SDKs and CLI.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from runplane.domain.run_credentials import IssuedCredentials

GOOGLE_STS = "https://sts.googleapis.com/v1/token"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"

# Writes a new file of the engine's directory, the engine's to read; returns its path.
GiveFile = Callable[[str, bytes], Path]


def credentials_environment(issued: IssuedCredentials, give_file: GiveFile) -> dict[str, str]:
    """The engine's environment variables for ``issued``, writing the token files the
    GCP and Azure providers read through ``give_file``."""
    env: dict[str, str] = {}
    if issued.aws is not None:
        aws = issued.aws
        env |= {
            "AWS_ACCESS_KEY_ID": aws.access_key_id,
            "AWS_SECRET_ACCESS_KEY": aws.secret_access_key,
            "AWS_SESSION_TOKEN": aws.session_token,
            "AWS_REGION": aws.region,
            "AWS_DEFAULT_REGION": aws.region,
        }
        if issued.aws_endpoint_url:
            env["AWS_ENDPOINT_URL_STS"] = issued.aws_endpoint_url
    if issued.gcp is not None:
        token_file = give_file("gcp-identity-token.jwt", issued.gcp.token.encode("ascii"))
        configuration = {
            "type": "external_account",
            "audience": issued.gcp.audience,
            "subject_token_type": JWT_TOKEN_TYPE,
            "token_url": GOOGLE_STS,
            "credential_source": {"file": str(token_file)},
        }
        config_file = give_file(
            "gcp-credentials.json", json.dumps(configuration, indent=2).encode("utf-8")
        )
        env["GOOGLE_APPLICATION_CREDENTIALS"] = str(config_file)
    if issued.azure is not None:
        token_file = give_file("azure-identity-token.jwt", issued.azure.token.encode("ascii"))
        env |= {"ARM_USE_OIDC": "true", "ARM_OIDC_TOKEN_FILE_PATH": str(token_file)}
        env["AZURE_FEDERATED_TOKEN_FILE"] = str(token_file)
        if issued.azure.client_id:
            env["ARM_CLIENT_ID"] = env["AZURE_CLIENT_ID"] = issued.azure.client_id
        if issued.azure.tenant_id:
            env["ARM_TENANT_ID"] = env["AZURE_TENANT_ID"] = issued.azure.tenant_id
    return env
