"""External identity providers for single sign-on (docs/sso.md), read from the
``identityProviders`` context option: a JSON list (in cdk.json, or as a string on the
command line), one object per provider.

Each provider is bound to one Runplane organization; that binding, not any attribute,
decides where its people land. Attribute mappings may set profile attributes and the
groups attribute only: nothing maps to ``custom:organization``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runplane.domain.federation import PROVIDER_NAME
from runplane.domain.identity import ROLES

# Runplane's names for the user-pool attributes a provider may fill (-> CDK's names).
PROFILE_ATTRIBUTES = {
    "email": "email",
    "emailVerified": "email_verified",
    "givenName": "given_name",
    "familyName": "family_name",
    "name": "fullname",
    "preferredUsername": "preferred_username",
}
GROUPS = "groups"
_KINDS = ("oidc", "saml")
_COMMON = {"name", "type", "organization", "attributes", "groupRoles"}
_OIDC = _COMMON | {"issuer", "clientId", "clientSecretName", "scopes"}
_SAML = _COMMON | {"metadataUrl", "metadataFile", "idpSignout"}
_SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,128}")
_ORGANIZATION = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Cognito's own provider names and reserved prefixes.
_RESERVED = {"cognito", "google", "facebook", "loginwithamazon", "signinwithapple"}


class IdentityProviderError(ValueError):
    """An identity provider entry is malformed."""


@dataclass(frozen=True)
class IdentityProvider:
    name: str
    kind: str
    organization: str
    # Runplane attribute name (PROFILE_ATTRIBUTES or "groups") -> the provider's claim
    # (OIDC) or attribute name (SAML).
    attributes: Mapping[str, str]
    group_roles: Mapping[str, str] = field(default_factory=dict)
    issuer: str = ""
    client_id: str = ""
    client_secret_name: str = ""
    scopes: tuple[str, ...] = ("openid", "email", "profile")
    metadata_url: str = ""
    metadata_file: str = ""
    idp_signout: bool = False

    @property
    def binding(self) -> dict[str, Any]:
        """This provider's entry in the ``sso_providers`` setting."""
        return {"organization": self.organization, "roles": dict(self.group_roles)}


def parse_identity_providers(value: Any) -> tuple[IdentityProvider, ...]:
    """Every provider of the context value (a list, or its JSON text); empty if unset."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise IdentityProviderError("must be a JSON list of providers") from None
    if not isinstance(value, list):
        raise IdentityProviderError("must be a list of providers")
    providers = tuple(_provider(i, entry) for i, entry in enumerate(value))
    names = [p.name.lower() for p in providers]
    if len(set(names)) != len(names):
        raise IdentityProviderError("names each provider once")
    return providers


def sso_providers_setting(providers: tuple[IdentityProvider, ...]) -> str:
    return json.dumps({p.name: p.binding for p in providers}, sort_keys=True)


def _provider(index: int, entry: Any) -> IdentityProvider:
    where = f"[{index}]"
    if not isinstance(entry, dict):
        raise IdentityProviderError(f"{where} must be an object")
    kind = entry.get("type")
    if kind not in _KINDS:
        raise IdentityProviderError(f"{where}.type must be oidc or saml")
    unknown = set(entry) - (_OIDC if kind == "oidc" else _SAML)
    if unknown:
        raise IdentityProviderError(f"{where} has unknown keys {sorted(unknown)}")
    name = _text(entry, "name", where)
    if not PROVIDER_NAME.fullmatch(name) or name.lower() in _RESERVED:
        raise IdentityProviderError(
            f"{where}.name must be 1-32 characters, no underscore, not a Cognito name"
        )
    organization = _text(entry, "organization", where)
    if not _ORGANIZATION.fullmatch(organization):
        raise IdentityProviderError(f"{where}.organization must be an organization ID")
    attributes = _mapping(entry.get("attributes", {}), f"{where}.attributes")
    allowed = set(PROFILE_ATTRIBUTES) | {GROUPS}
    if set(attributes) - allowed:
        # custom:organization above all: the binding decides the organization.
        raise IdentityProviderError(
            f"{where}.attributes may map only {sorted(allowed)}, "
            f"not {sorted(set(attributes) - allowed)}"
        )
    group_roles = _mapping(entry.get("groupRoles", {}), f"{where}.groupRoles")
    if not all(role in ROLES for role in group_roles.values()):
        raise IdentityProviderError(f"{where}.groupRoles maps groups to {', '.join(sorted(ROLES))}")
    if group_roles and GROUPS not in attributes:
        raise IdentityProviderError(f"{where}.groupRoles needs attributes.groups")
    common: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "organization": organization,
        "attributes": attributes,
        "group_roles": group_roles,
    }
    if kind == "oidc":
        return _oidc(entry, where, common)
    return _saml(entry, where, common)


def _oidc(entry: Mapping[str, Any], where: str, common: dict[str, Any]) -> IdentityProvider:
    issuer = _text(entry, "issuer", where)
    if not issuer.startswith("https://"):
        raise IdentityProviderError(f"{where}.issuer must be an https URL")
    secret = _text(entry, "clientSecretName", where)
    if not _SECRET_NAME.fullmatch(secret):
        raise IdentityProviderError(f"{where}.clientSecretName must be a secret's name")
    scopes = entry.get("scopes", ["openid", "email", "profile"])
    if (
        not isinstance(scopes, list)
        or "openid" not in scopes
        or not all(isinstance(s, str) and _SCOPE.fullmatch(s) for s in scopes)
    ):
        raise IdentityProviderError(f"{where}.scopes must be a list including openid")
    return IdentityProvider(
        **common,
        issuer=issuer,
        client_id=_text(entry, "clientId", where),
        client_secret_name=secret,
        scopes=tuple(scopes),
    )


def _saml(entry: Mapping[str, Any], where: str, common: dict[str, Any]) -> IdentityProvider:
    url, file = entry.get("metadataUrl", ""), entry.get("metadataFile", "")
    if bool(url) == bool(file):
        raise IdentityProviderError(f"{where} needs exactly one of metadataUrl, metadataFile")
    if url and not (isinstance(url, str) and url.startswith("https://")):
        raise IdentityProviderError(f"{where}.metadataUrl must be an https URL")
    if file and not isinstance(file, str):
        raise IdentityProviderError(f"{where}.metadataFile must be a path")
    signout = entry.get("idpSignout", False)
    if not isinstance(signout, bool):
        raise IdentityProviderError(f"{where}.idpSignout must be true or false")
    return IdentityProvider(**common, metadata_url=url, metadata_file=file, idp_signout=signout)


def _text(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > 2048:
        raise IdentityProviderError(f"{where}.{key} is required")
    return value


def _mapping(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
    ):
        raise IdentityProviderError(f"{where} must map names to names")
    return dict(value)
