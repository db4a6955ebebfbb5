"""SAML 2.0 for the embedded stack's sign-in broker (runplane.local.federation): the
AuthnRequest it sends (HTTP-Redirect binding) and the checks a Response must pass
(HTTP-POST binding) before anyone is signed in.

The assertion's XML signature is verified with signxml against the provider's
certificate, and every fact is then read from the element the signature covers, never
from the document around it (so a second, unsigned assertion cannot be slipped in).
It must come from the provider (Issuer), be for us (Audience, Recipient, the Response's
Destination), answer our request (InResponseTo), be within its validity window
(NotBefore, NotOnOrAfter) and not have been presented before (its ID).
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode
from xml.sax.saxutils import quoteattr

SAMLP = "urn:oasis:names:tc:SAML:2.0:protocol"
SAML = "urn:oasis:names:tc:SAML:2.0:assertion"
SUCCESS = "urn:oasis:names:tc:SAML:2.0:status:Success"
SKEW = timedelta(seconds=60)
MAX_RESPONSE_BYTES = 256 * 1024
_NS = {"samlp": SAMLP, "saml": SAML}


class SamlRefused(Exception):
    """A response that signs nobody in; ``reason`` is machine-readable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class SamlIdentity:
    subject: str
    attributes: Mapping[str, tuple[str, ...]]
    assertion_id: str
    valid_until: datetime


def authn_request(
    request_id: str, *, issuer: str, destination: str, acs_url: str, now: datetime
) -> str:
    instant = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f'<samlp:AuthnRequest xmlns:samlp="{SAMLP}" xmlns:saml="{SAML}" '
        f'ID={quoteattr(request_id)} Version="2.0" IssueInstant={quoteattr(instant)} '
        f"Destination={quoteattr(destination)} "
        f"AssertionConsumerServiceURL={quoteattr(acs_url)} "
        'ProtocolBinding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST">'
        f"<saml:Issuer>{_text(issuer)}</saml:Issuer></samlp:AuthnRequest>"
    )


def redirect_url(sso_url: str, request_xml: str, relay_state: str) -> str:
    """The HTTP-Redirect binding: raw DEFLATE, base64, in the query."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = compressor.compress(request_xml.encode("utf-8")) + compressor.flush()
    query = urlencode(
        {"SAMLRequest": base64.b64encode(deflated).decode("ascii"), "RelayState": relay_state}
    )
    return f"{sso_url}{'&' if '?' in sso_url else '?'}{query}"


def read_request(encoded: str) -> bytes:
    """An HTTP-Redirect AuthnRequest's XML (for the test identity provider)."""
    return zlib.decompress(base64.b64decode(encoded), -15)


def verify_response(
    encoded: str,
    *,
    certificate_pem: str,
    idp_entity_id: str,
    sp_entity_id: str,
    acs_url: str,
    request_id: str,
    now: datetime,
) -> SamlIdentity:
    """The identity a base64 SAMLResponse asserts, or ``SamlRefused``."""
    from lxml import etree
    from signxml.exceptions import InvalidInput, InvalidSignature
    from signxml.verifier import XMLVerifier

    if len(encoded) > MAX_RESPONSE_BYTES:
        raise SamlRefused("too_large")
    try:
        raw = base64.b64decode(encoded, validate=True)
        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
        response = etree.fromstring(raw, parser=parser)
    except (binascii.Error, ValueError, etree.XMLSyntaxError):
        raise SamlRefused("malformed") from None
    if response.tag != f"{{{SAMLP}}}Response":
        raise SamlRefused("malformed")
    if response.get("Destination") not in (None, acs_url):
        raise SamlRefused("wrong_destination")
    if response.get("InResponseTo") != request_id:
        raise SamlRefused("not_our_request")
    status = response.find("samlp:Status/samlp:StatusCode", _NS)
    if status is None or status.get("Value") != SUCCESS:
        raise SamlRefused("provider_refused")
    assertions = response.findall("saml:Assertion", _NS)
    if len(assertions) != 1 or response.find(f"{{{SAML}}}EncryptedAssertion") is not None:
        raise SamlRefused("one_assertion_required")
    try:
        verified = XMLVerifier().verify(etree.tostring(assertions[0]), x509_cert=certificate_pem)
    except (InvalidSignature, InvalidInput, ValueError):
        raise SamlRefused("bad_signature") from None
    if isinstance(verified, list):
        raise SamlRefused("bad_signature")
    signed = verified.signed_xml
    if signed is None or signed.tag != f"{{{SAML}}}Assertion":
        raise SamlRefused("bad_signature")
    return _identity(
        signed,
        idp_entity_id=idp_entity_id,
        sp_entity_id=sp_entity_id,
        acs_url=acs_url,
        request_id=request_id,
        now=now,
    )


def _identity(
    assertion: object,
    *,
    idp_entity_id: str,
    sp_entity_id: str,
    acs_url: str,
    request_id: str,
    now: datetime,
) -> SamlIdentity:
    from lxml import etree

    assert isinstance(assertion, etree._Element)
    if _find_text(assertion, "saml:Issuer") != idp_entity_id:
        raise SamlRefused("wrong_issuer")
    confirmation = assertion.find(
        "saml:Subject/saml:SubjectConfirmation/saml:SubjectConfirmationData", _NS
    )
    if confirmation is None or confirmation.get("Recipient") != acs_url:
        raise SamlRefused("wrong_recipient")
    if confirmation.get("InResponseTo") != request_id:
        raise SamlRefused("not_our_request")
    conditions = assertion.find("saml:Conditions", _NS)
    if conditions is None:
        raise SamlRefused("no_conditions")
    not_before = _instant(conditions.get("NotBefore"))
    not_after = _instant(conditions.get("NotOnOrAfter"))
    confirmed_until = _instant(confirmation.get("NotOnOrAfter"))
    if not_after is None or confirmed_until is None:
        raise SamlRefused("no_validity")
    if (not_before is not None and now + SKEW < not_before) or now >= min(
        not_after, confirmed_until
    ):
        raise SamlRefused("expired")
    audiences = [a.text for a in conditions.findall("saml:AudienceRestriction/saml:Audience", _NS)]
    if sp_entity_id not in audiences:
        raise SamlRefused("wrong_audience")
    subject = _find_text(assertion, "saml:Subject/saml:NameID")
    assertion_id = assertion.get("ID")
    if not subject or not assertion_id:
        raise SamlRefused("malformed")
    attributes: dict[str, tuple[str, ...]] = {}
    for attribute in assertion.findall("saml:AttributeStatement/saml:Attribute", _NS):
        name = attribute.get("Name")
        if name:
            values = attribute.findall("saml:AttributeValue", _NS)
            attributes[name] = tuple(v.text or "" for v in values)
    return SamlIdentity(subject, attributes, assertion_id, min(not_after, confirmed_until))


def _find_text(element: object, path: str) -> str | None:
    from lxml import etree

    assert isinstance(element, etree._Element)
    found = element.find(path, _NS)
    return None if found is None else (found.text or "").strip()


def _instant(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SamlRefused("malformed") from None


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
