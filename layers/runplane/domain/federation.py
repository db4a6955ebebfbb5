"""Federated sign-in (docs/sso.md): which organization and roles a person signed in
through an external identity provider has.

Cognito names the provider a federated user came through in the ID token's
``identities`` claim, and only Cognito writes it. Each provider is bound to one
organization by the deployment: that binding, never an attribute the provider or
the user controls, decides the organization. The provider's groups arrive in a
custom attribute (``custom:groups``), updated at every sign-in; a deployment may map
some of them to Runplane roles.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runplane.domain.identity import ROLES

# The Cognito custom attribute the provider's groups are mapped to.
GROUPS_CLAIM = "custom:groups"
IDENTITIES_CLAIM = "identities"
# Cognito's provider names: 1-32 characters, no spaces at the ends.
PROVIDER_NAME = re.compile(r"[^\s_](?:[^_]{0,30}[^\s_])?")
_MAX_GROUPS = 200
_MAX_GROUP_LENGTH = 256


class NotFederated(ValueError):
    """The token names providers that are not bound, or bound to different organizations."""


@dataclass(frozen=True)
class FederatedProvider:
    """One external identity provider, as the deployment bound it."""

    name: str
    organization_id: str
    # The provider's group name -> the Runplane role its members get.
    roles: Mapping[str, str] = field(default_factory=dict)

    def roles_of(self, groups: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted({self.roles[g] for g in groups if g in self.roles}))


@dataclass(frozen=True)
class Federation:
    """Every bound provider, by its Cognito provider name."""

    providers: Mapping[str, FederatedProvider] = field(default_factory=dict)

    def provider_of(self, claims: Mapping[str, Any]) -> FederatedProvider | None:
        """The provider a token's person signed in through; None for a user of the
        pool itself. A federated person whose provider is not bound (or who is linked
        to providers of different organizations) belongs to no organization."""
        names = provider_names(claims.get(IDENTITIES_CLAIM))
        if not names:
            return None
        bound = [self.providers.get(name) for name in names]
        found = {p.organization_id: p for p in bound if p is not None}
        if None in bound or len(found) != 1:
            raise NotFederated("the identity provider you signed in with is not bound")
        (provider,) = found.values()
        return provider


NO_FEDERATION = Federation()


def provider_names(identities: Any) -> tuple[str, ...]:
    """The ``providerName`` of each entry of Cognito's ``identities`` claim (a list
    of objects in an ID token; the user attribute's JSON text is accepted too)."""
    if identities is None:
        return ()
    if isinstance(identities, str):
        try:
            identities = json.loads(identities)
        except ValueError:
            raise NotFederated("the token's identities claim is malformed") from None
    if not isinstance(identities, list) or not identities:
        raise NotFederated("the token's identities claim is malformed")
    names: list[str] = []
    for entry in identities:
        name = entry.get("providerName") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise NotFederated("the token's identities claim is malformed")
        names.append(name)
    return tuple(sorted(set(names)))


def idp_groups(value: Any) -> tuple[str, ...]:
    """The provider's groups from the groups attribute, in each way Cognito writes a
    multi-valued attribute: a JSON array (OIDC claims that are arrays), ``[a, b]``
    (SAML attributes with several values), or a single value as it is. A group name
    holding ", " is ambiguous in the SAML form (docs/sso.md)."""
    if value is None or value == "":
        return ()
    if isinstance(value, list):
        items: list[Any] = value
    elif not isinstance(value, str):
        return ()
    elif value.startswith("[") and value.endswith("]"):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            items = parsed
        else:
            inner = value[1:-1].strip()
            items = [part.strip() for part in inner.split(",")] if inner else []
    else:
        items = [value]
    groups = {str(g).strip() for g in items if isinstance(g, str | int) and str(g).strip()}
    return tuple(sorted(g for g in groups if len(g) <= _MAX_GROUP_LENGTH))[:_MAX_GROUPS]


def federation_from_json(text: str | None) -> Federation:
    """The settings' provider bindings: ``{"<provider>": {"organization": "<id>",
    "roles": {"<idp group>": "<role>"}}}``. Raises ``ValueError`` on anything else."""
    if not text:
        return NO_FEDERATION
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("sso_providers must be a JSON object of providers")
    providers: dict[str, FederatedProvider] = {}
    for name, entry in raw.items():
        if not PROVIDER_NAME.fullmatch(name):
            raise ValueError(f"sso_providers: {name!r} is not a Cognito provider name")
        if not isinstance(entry, dict) or set(entry) - {"organization", "roles"}:
            raise ValueError(f"sso_providers.{name} has only organization and roles")
        organization = entry.get("organization")
        if not isinstance(organization, str) or not organization:
            raise ValueError(f"sso_providers.{name}.organization must name an organization")
        roles = entry.get("roles", {})
        if not isinstance(roles, dict) or not all(
            isinstance(g, str) and g and r in ROLES for g, r in roles.items()
        ):
            raise ValueError(
                f"sso_providers.{name}.roles maps group names to {', '.join(sorted(ROLES))}"
            )
        providers[name] = FederatedProvider(name, organization, dict(roles))
    return Federation(providers)
