"""A workspace's cloud settings, and the credential decisions a run pins from them.

The settings say which cloud identities a workspace's runs may use: an AWS role for
plans (and speculative runs), a separate AWS role for applies, the external ID and
session duration those roles are assumed with, the AWS region, and the audiences of
the workload identity tokens that GCP (a workload identity pool provider) and Azure
(a federated credential) exchange. None of them is a credential: they name what a
run may ask for, and a run pins them at creation as its *credential decisions*, shown
in its review, so changing a workspace's settings never changes an existing run.

The rules (docs/credentials.md, "Workspace cloud settings"):

- AWS is enabled by a plan role. Plans and speculative runs only ever get the plan
  role; the apply of a ``plan_and_apply`` run only the apply role. A workspace with a
  plan role and no apply role can plan, but its applies get no AWS credentials (an
  apply role without a plan role is refused: plans would get none).
- The external ID, the region and a session duration other than the default need a
  plan role. The external ID is sensitive: it is never shown after being set (only
  ``aws_external_id_set``), never audited, never logged, and a run records only
  whether one was set.
- Azure is enabled by its client and tenant IDs, given together; its audience defaults
  to ``api://AzureADTokenExchange``. GCP is enabled by its audience.

Pure: the standard library only. Every refusal is ``InvalidInput`` with a pointer to
the field, and its message never repeats the external ID.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar, Final

from runplane.domain.errors import InvalidInput

MIN_SESSION_SECONDS: Final = 900
MAX_SESSION_SECONDS: Final = 43200
"""STS's range for a role session (AssumeRole and AssumeRoleWithWebIdentity); the role's
own maximum session duration may be lower, which STS checks when the role is assumed."""
DEFAULT_SESSION_SECONDS: Final = 3600
AZURE_DEFAULT_AUDIENCE: Final = "api://AzureADTokenExchange"
MAX_AUDIENCE: Final = 256
MAX_ROLE_NAME: Final = 64
MAX_ROLE_PATH: Final = 512
MIN_EXTERNAL_ID: Final = 2
MAX_EXTERNAL_ID: Final = 1224

_ROLE_ARN: Final = re.compile(r"arn:(aws(?:-[a-z]+)*):iam::(\d{12}):role/(.+)", re.ASCII)
_ROLE_NAME: Final = re.compile(rf"[\w+=,.@-]{{1,{MAX_ROLE_NAME}}}", re.ASCII)
# An IAM path's segments: printable ASCII other than the slash (IAM's own rule).
_PATH_SEGMENT: Final = re.compile(r"[\x21-\x2e\x30-\x7e]+", re.ASCII)
_EXTERNAL_ID: Final = re.compile(r"[\w+=,.@:/-]+", re.ASCII)
_REGION: Final = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}", re.ASCII)
_GUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)

# The partition of a region by its prefix, longest first; every other region is `aws`.
_PARTITIONS: Final = (
    ("us-isob-", "aws-iso-b"),
    ("us-isof-", "aws-iso-f"),
    ("eu-isoe-", "aws-iso-e"),
    ("us-iso-", "aws-iso"),
    ("us-gov-", "aws-us-gov"),
    ("cn-", "aws-cn"),
)

TEXT_FIELDS: Final = (
    "aws_plan_role_arn",
    "aws_apply_role_arn",
    "aws_external_id",
    "aws_region",
    "gcp_audience",
    "azure_audience",
    "azure_client_id",
    "azure_tenant_id",
)


def partition_of(region: str) -> str:
    """The AWS partition a region is in: ``cn-*`` is ``aws-cn``, ``us-gov-*`` is
    ``aws-us-gov`` (and the ISO regions theirs); every other region is ``aws``."""
    for prefix, partition in _PARTITIONS:
        if region.startswith(prefix):
            return partition
    return "aws"


@dataclass(frozen=True)
class CloudSettingsChange:
    """A whole replacement of a workspace's cloud settings, as asked: None leaves a
    setting unset. ``keep_aws_external_id`` keeps the external ID stored (whatever it
    is), since it is never read back to be sent again."""

    aws_plan_role_arn: str | None = None
    aws_apply_role_arn: str | None = None
    aws_external_id: str | None = field(default=None, repr=False)
    keep_aws_external_id: bool = False
    aws_session_duration: int | None = None
    aws_region: str | None = None
    gcp_audience: str | None = None
    azure_audience: str | None = None
    azure_client_id: str | None = None
    azure_tenant_id: str | None = None


@dataclass(frozen=True)
class CloudSettings:
    """A workspace's cloud settings as checked, stored and shown: the external ID only
    as whether one is set (its value is stored sealed, beside these)."""

    aws_plan_role_arn: str | None = None
    aws_apply_role_arn: str | None = None
    aws_external_id_set: bool = False
    aws_session_duration: int = DEFAULT_SESSION_SECONDS
    aws_region: str | None = None
    gcp_audience: str | None = None
    azure_audience: str | None = None
    azure_client_id: str | None = None
    azure_tenant_id: str | None = None

    @property
    def aws_enabled(self) -> bool:
        return self.aws_plan_role_arn is not None

    @property
    def azure_enabled(self) -> bool:
        return self.azure_client_id is not None

    @property
    def gcp_enabled(self) -> bool:
        return self.gcp_audience is not None

    @property
    def empty(self) -> bool:
        return self == CloudSettings()

    def view(self) -> dict[str, Any]:
        """The settings as the API shows them (never the external ID)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def changed_from(self, before: CloudSettings) -> list[str]:
        """The settings that differ from ``before``, in field order (the external ID by
        whether one is set: a replaced value is the caller's to name)."""
        names = []
        for f in fields(self):
            if getattr(self, f.name) != getattr(before, f.name):
                names.append("aws_external_id" if f.name == "aws_external_id_set" else f.name)
        return names


def check_cloud_settings(
    change: CloudSettingsChange, *, deployment_region: str, external_id_stored: bool = False
) -> CloudSettings:
    """The settings ``change`` asks for, checked against the deployment's region (whose
    partition every ARN and region must be in); ``external_id_stored`` says whether
    the settings it replaces hold an external ID (kept by ``keep_aws_external_id``).
    Raises :class:`InvalidInput` naming the first field in error."""
    for name in TEXT_FIELDS:
        value = getattr(change, name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidInput(f"{name} must be a string", f"/{name}")
        _printable(name, value)
        if value == "":
            raise InvalidInput(f"{name} is empty: leave it out (or null) to unset it", f"/{name}")
    partition = partition_of(deployment_region)
    plan_role = _role_arn("aws_plan_role_arn", change.aws_plan_role_arn, partition)
    apply_role = _role_arn("aws_apply_role_arn", change.aws_apply_role_arn, partition)
    if apply_role is not None and plan_role is None:
        raise InvalidInput(
            "aws_apply_role_arn needs aws_plan_role_arn: plans and speculative runs only "
            "ever get the plan role, so set both (they may name the same role)",
            "/aws_plan_role_arn",
        )
    if change.aws_external_id is not None and change.keep_aws_external_id:
        raise InvalidInput(
            "give aws_external_id or keep_aws_external_id, not both", "/keep_aws_external_id"
        )
    external_id_set = _external_id(change.aws_external_id) or (
        change.keep_aws_external_id and external_id_stored
    )
    duration = _duration(change.aws_session_duration)
    region = _region(change.aws_region, partition)
    if plan_role is None:
        for name, given in (
            ("aws_external_id", external_id_set),
            ("aws_region", region is not None),
            ("aws_session_duration", duration != DEFAULT_SESSION_SECONDS),
        ):
            if given:
                raise InvalidInput(
                    f"{name} needs aws_plan_role_arn: it applies to the AWS roles runs assume",
                    f"/{name}",
                )
    gcp_audience = _audience("gcp_audience", change.gcp_audience)
    client_id = _guid("azure_client_id", change.azure_client_id)
    tenant_id = _guid("azure_tenant_id", change.azure_tenant_id)
    for name, value, other in (
        ("azure_client_id", client_id, "azure_tenant_id"),
        ("azure_tenant_id", tenant_id, "azure_client_id"),
    ):
        if value is not None and (client_id is None or tenant_id is None):
            raise InvalidInput(
                f"{name} needs {other}: the engine's azurerm provider needs both", f"/{other}"
            )
    azure_audience = _audience("azure_audience", change.azure_audience)
    if azure_audience is not None and client_id is None:
        raise InvalidInput(
            "azure_audience needs azure_client_id and azure_tenant_id", "/azure_client_id"
        )
    if client_id is not None and azure_audience is None:
        azure_audience = AZURE_DEFAULT_AUDIENCE
    return CloudSettings(
        aws_plan_role_arn=plan_role,
        aws_apply_role_arn=apply_role,
        aws_external_id_set=external_id_set,
        aws_session_duration=duration,
        aws_region=region,
        gcp_audience=gcp_audience,
        azure_audience=azure_audience,
        azure_client_id=client_id,
        azure_tenant_id=tenant_id,
    )


def _printable(name: str, value: str) -> None:
    """No control character anywhere (named by code point, never with the value)."""
    for character in value:
        if unicodedata.category(character) == "Cc":
            raise InvalidInput(
                f"{name} has a control character (U+{ord(character):04X})", f"/{name}"
            )


def _role_arn(name: str, value: str | None, partition: str) -> str | None:
    if value is None:
        return None
    shape = (
        f"{name} is not an IAM role ARN: it must read arn:PARTITION:iam::ACCOUNT:role/NAME "
        f"or arn:PARTITION:iam::ACCOUNT:role/PATH/NAME, with a 12-digit account, a name of "
        f"1 to {MAX_ROLE_NAME} letters, digits or +=,.@_- and a path of at most "
        f"{MAX_ROLE_PATH} characters"
    )
    matched = _ROLE_ARN.fullmatch(value)
    if matched is None:
        raise InvalidInput(shape, f"/{name}")
    *path, role_name = matched.group(3).split("/")
    if not _ROLE_NAME.fullmatch(role_name):
        raise InvalidInput(shape, f"/{name}")
    if path and not all(_PATH_SEGMENT.fullmatch(segment) for segment in path):
        raise InvalidInput(shape, f"/{name}")
    if len("/" + "".join(f"{segment}/" for segment in path)) > MAX_ROLE_PATH:
        raise InvalidInput(shape, f"/{name}")
    if matched.group(1) != partition:
        raise InvalidInput(
            f"{name} is in the {matched.group(1)} partition; this deployment's runs assume "
            f"roles in {partition}",
            f"/{name}",
        )
    return value


def _external_id(value: str | None) -> bool:
    """Whether an external ID is given (checked; the message never repeats it)."""
    if value is None:
        return False
    if not MIN_EXTERNAL_ID <= len(value) <= MAX_EXTERNAL_ID or not _EXTERNAL_ID.fullmatch(value):
        raise InvalidInput(
            f"aws_external_id must be {MIN_EXTERNAL_ID} to {MAX_EXTERNAL_ID} characters of "
            "letters, digits and +=,.@:/_-",
            "/aws_external_id",
        )
    return True


def _duration(value: int | None) -> int:
    if value is None:
        return DEFAULT_SESSION_SECONDS
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(
            "aws_session_duration must be a whole number of seconds", "/aws_session_duration"
        )
    if not MIN_SESSION_SECONDS <= value <= MAX_SESSION_SECONDS:
        raise InvalidInput(
            f"aws_session_duration must be {MIN_SESSION_SECONDS} to {MAX_SESSION_SECONDS} "
            f"seconds (15 minutes to 12 hours), as STS allows",
            "/aws_session_duration",
        )
    return value


def _region(value: str | None, partition: str) -> str | None:
    if value is None:
        return None
    if not _REGION.fullmatch(value):
        raise InvalidInput("aws_region is not an AWS region name such as eu-west-1", "/aws_region")
    if partition_of(value) != partition:
        raise InvalidInput(
            f"aws_region is in the {partition_of(value)} partition; this deployment's "
            f"runs assume roles in {partition}",
            "/aws_region",
        )
    return value


def _audience(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if len(value) > MAX_AUDIENCE:
        raise InvalidInput(f"{name} has at most {MAX_AUDIENCE} characters", f"/{name}")
    if any(character.isspace() for character in value):
        raise InvalidInput(f"{name} must not contain spaces", f"/{name}")
    return value


def _guid(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    lowered = value.lower()
    if not _GUID.fullmatch(lowered):
        raise InvalidInput(
            f"{name} is not a GUID such as 00000000-0000-0000-0000-000000000000", f"/{name}"
        )
    return lowered


# -- what a run pins -------------------------------------------------------------------------


@dataclass(frozen=True)
class AwsDecision:
    """Which AWS roles a run's phases assume, and how."""

    plan_role_arn: str
    apply_role_arn: str | None
    """None for a run that never applies, or a workspace with no apply role: the
    apply then gets no AWS credentials."""
    external_id_set: bool
    session_duration: int
    region: str


@dataclass(frozen=True)
class AzureDecision:
    audience: str
    client_id: str
    tenant_id: str


@dataclass(frozen=True)
class CredentialDecisions:
    """A run's credential decisions, pinned at its creation from its workspace's cloud
    settings (``settings_version`` 0: the workspace had none): which identities each
    phase may get, never a credential. A run created before any settings, or before
    runs recorded decisions, has none."""

    settings_version: int = 0
    aws: AwsDecision | None = None
    gcp_audience: str | None = None
    azure: AzureDecision | None = None

    @classmethod
    def decide(
        cls,
        settings: CloudSettings | None,
        version: int,
        *,
        may_apply: bool,
        deployment_region: str,
    ) -> CredentialDecisions:
        """What a new run pins of ``settings`` (at ``version``): the apply role only
        for a run that may apply, the deployment's region where the settings name none."""
        if settings is None:
            return cls(settings_version=version)
        aws = None
        if settings.aws_plan_role_arn is not None:
            aws = AwsDecision(
                plan_role_arn=settings.aws_plan_role_arn,
                apply_role_arn=settings.aws_apply_role_arn if may_apply else None,
                external_id_set=settings.aws_external_id_set,
                session_duration=settings.aws_session_duration,
                region=settings.aws_region or deployment_region,
            )
        azure = None
        if (
            settings.azure_client_id is not None
            and settings.azure_tenant_id is not None
            and settings.azure_audience is not None
        ):
            azure = AzureDecision(
                settings.azure_audience, settings.azure_client_id, settings.azure_tenant_id
            )
        return cls(
            settings_version=version, aws=aws, gcp_audience=settings.gcp_audience, azure=azure
        )

    @property
    def none(self) -> bool:
        """No cloud credentials for any phase."""
        return self.aws is None and self.gcp_audience is None and self.azure is None

    def aws_role_for(self, phase: str) -> str | None:
        """The AWS role ``phase`` (``plan`` or ``apply``) may assume, or None."""
        if self.aws is None:
            return None
        return self.aws.apply_role_arn if phase == "apply" else self.aws.plan_role_arn

    def _document(self) -> dict[str, Any]:
        aws = self.aws
        return {
            "settings_version": self.settings_version,
            "aws": None
            if aws is None
            else {
                "plan_role_arn": aws.plan_role_arn,
                "apply_role_arn": aws.apply_role_arn,
                "external_id_set": aws.external_id_set,
                "session_duration": aws.session_duration,
                "region": aws.region,
            },
            "gcp": None if self.gcp_audience is None else {"audience": self.gcp_audience},
            "azure": None
            if self.azure is None
            else {
                "audience": self.azure.audience,
                "client_id": self.azure.client_id,
                "tenant_id": self.azure.tenant_id,
            },
        }

    @property
    def digest(self) -> str:
        """SHA-256 of the decisions' canonical JSON: what a later step (a workload
        identity token, an apply's credentials) can name to say which decisions it
        acted on."""
        canonical = json.dumps(self._document(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def to_body(self) -> dict[str, Any]:
        """The decisions as a run's input snapshot records them and its review shows
        them, with their digest."""
        return {**self._document(), "digest": self.digest}

    @classmethod
    def from_body(cls, body: object) -> CredentialDecisions:
        """The decisions a snapshot recorded (absent: none, as for a run created before
        runs recorded them)."""
        if not isinstance(body, Mapping):
            return cls()
        aws, gcp, azure = body.get("aws"), body.get("gcp"), body.get("azure")
        version = body.get("settings_version")
        return cls(
            settings_version=version if isinstance(version, int) else int(str(version or 0)),
            aws=None
            if not isinstance(aws, Mapping)
            else AwsDecision(
                plan_role_arn=str(aws["plan_role_arn"]),
                apply_role_arn=_text(aws.get("apply_role_arn")),
                external_id_set=bool(aws.get("external_id_set")),
                session_duration=int(str(aws.get("session_duration", DEFAULT_SESSION_SECONDS))),
                region=str(aws["region"]),
            ),
            gcp_audience=_text(gcp.get("audience")) if isinstance(gcp, Mapping) else None,
            azure=None
            if not isinstance(azure, Mapping)
            else AzureDecision(
                str(azure["audience"]), str(azure["client_id"]), str(azure["tenant_id"])
            ),
        )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class SealedExternalId:
    """An external ID as stored: a KMS-wrapped data key and AES-GCM ciphertext bound to
    its workspace (``external_id_context``); only ciphertext, never the value."""

    wrapped_key: bytes
    ciphertext: bytes

    def __repr__(self) -> str:
        return f"SealedExternalId({len(self.ciphertext)} bytes)"


def external_id_context(workspace_id: str) -> dict[str, str]:
    """The KMS encryption context (and AES-GCM associated data) of a workspace's
    external ID: a sealed value copied to another workspace does not open."""
    return {"purpose": "aws-external-id", "workspace_id": workspace_id}


def sealed_to_body(sealed: SealedExternalId) -> dict[str, str]:
    """A sealed external ID as a JSON document (its ciphertext only, in base64)."""
    return {
        "wrapped_key": base64.b64encode(sealed.wrapped_key).decode("ascii"),
        "ciphertext": base64.b64encode(sealed.ciphertext).decode("ascii"),
    }


def sealed_from_body(body: object) -> SealedExternalId | None:
    """The sealed external ID ``sealed_to_body`` wrote (None: none, or unreadable)."""
    if not isinstance(body, Mapping):
        return None
    try:
        return SealedExternalId(
            base64.b64decode(str(body["wrapped_key"]), validate=True),
            base64.b64decode(str(body["ciphertext"]), validate=True),
        )
    except (KeyError, binascii.Error):
        return None


@dataclass(frozen=True)
class StoredCloudSettings:
    """A workspace's cloud settings as the store holds them, at their version (each
    write adds one; a clear is a write of no settings, so versions never go back)."""

    workspace_id: str
    settings: CloudSettings
    version: int
    updated_at: datetime
    updated_by: str
    external_id: SealedExternalId | None = None


@dataclass(frozen=True)
class PinnedCredentials:
    """What a new run pins of its workspace's cloud settings: its decisions, and the
    external ID exactly as it was sealed then (so a later change of the workspace's
    external ID does not change the run's either). Only the decisions are shown."""

    decisions: CredentialDecisions
    external_id: SealedExternalId | None = None

    DECISIONS_KEY: ClassVar[str] = "credentials"
    SEALED_KEY: ClassVar[str] = "aws_external_id_sealed"

    def input_fields(self) -> dict[str, Any]:
        """The keys a run's input snapshot records them under."""
        recorded: dict[str, Any] = {self.DECISIONS_KEY: self.decisions.to_body()}
        if self.external_id is not None:
            recorded[self.SEALED_KEY] = sealed_to_body(self.external_id)
        return recorded

    @classmethod
    def from_input(cls, snapshot: Mapping[str, object]) -> PinnedCredentials:
        """What a run's input snapshot pinned (none for a run created before runs
        pinned credential decisions)."""
        return cls(
            CredentialDecisions.from_body(snapshot.get(cls.DECISIONS_KEY)),
            sealed_from_body(snapshot.get(cls.SEALED_KEY)),
        )


def settings_view(workspace_id: str, stored: StoredCloudSettings | None) -> dict[str, Any]:
    """The settings as the API and the CLI show them: version 0 and no settings for a
    workspace that never had any; the external ID only as whether one is set."""
    settings = stored.settings if stored is not None else CloudSettings()
    return {
        "workspace_id": workspace_id,
        **settings.view(),
        "version": stored.version if stored is not None else 0,
        "updated_at": stored.updated_at.isoformat() if stored is not None else None,
        "updated_by": stored.updated_by if stored is not None else None,
    }
