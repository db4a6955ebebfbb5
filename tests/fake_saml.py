"""An external SAML 2.0 identity provider over real HTTP on 127.0.0.1, for SSO tests.

``GET /sso`` reads an HTTP-Redirect AuthnRequest and answers the HTTP-POST binding's
page: a form holding a Response whose Assertion is signed (RSA-SHA256, exclusive
canonicalization) for whoever ``login_as`` names, if that user exists. A test
changes ``users`` and can make it misbehave: sign with another key, sign nothing,
name another audience, issue an assertion that is already expired; ``last_form``
keeps the last response posted, for replaying it.
"""

from __future__ import annotations

import html
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from lxml import etree

from runplane.local.saml import SAML, SAMLP, SUCCESS, read_request

GROUPS = "http://schemas.microsoft.com/ws/2008/06/identity/claims/groups"
EMAIL = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress"


@dataclass
class SamlUser:
    email: str
    groups: list[str] = field(default_factory=list)
    # More attributes the provider asserts (a test may assert an organization).
    extra: dict[str, str] = field(default_factory=dict)


def _key_and_certificate(name: str) -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return key_pem, certificate.public_bytes(serialization.Encoding.PEM).decode()


class FakeSamlProvider:
    def __init__(self) -> None:
        self.users: dict[str, SamlUser] = {}
        self.login_as: str | None = None
        self.key_pem, self.certificate_pem = _key_and_certificate("fake-saml-idp")
        self._rogue = _key_and_certificate("fake-saml-idp")
        # Misbehaviour knobs.
        self.rogue_key = False
        self.unsigned = False
        self.audience: str | None = None
        self.lifetime = timedelta(minutes=5)
        self.last_form: dict[str, str] = {}
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    @property
    def entity_id(self) -> str:
        return f"{self.url}/metadata"

    @property
    def sso_url(self) -> str:
        return f"{self.url}/sso"

    def start(self) -> FakeSamlProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider._sso(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _sso(self, request: BaseHTTPRequestHandler) -> None:
        query = dict(parse_qsl(urlsplit(request.path).query))
        authn = etree.fromstring(read_request(query["SAMLRequest"]))
        acs = authn.get("AssertionConsumerServiceURL")
        sp = authn.findtext(f"{{{SAML}}}Issuer")
        if self.login_as not in self.users:
            request.send_response(403)
            request.end_headers()
            return
        response = self.response(self.login_as or "", authn.get("ID"), acs, sp)
        self.last_form = {"SAMLResponse": response, "RelayState": query.get("RelayState", "")}
        inputs = "".join(
            f'<input type="hidden" name="{k}" value="{html.escape(v)}">'
            for k, v in self.last_form.items()
        )
        body = (
            f'<!doctype html><form method="post" action="{html.escape(acs or "")}">'
            f"{inputs}</form><script>document.forms[0].submit()</script>"
        ).encode()
        request.send_response(200)
        request.send_header("Content-Type", "text/html")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    def response(
        self, subject: str, request_id: str | None, acs: str | None, sp: str | None
    ) -> str:
        """A base64 SAMLResponse for ``subject`` answering ``request_id``."""
        import base64

        from signxml.signer import XMLSigner

        user = self.users[subject]
        now = datetime.now(UTC)
        until = now + self.lifetime

        def instant(moment: datetime) -> str:
            return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

        root = etree.Element(f"{{{SAMLP}}}Response", nsmap={"samlp": SAMLP, "saml": SAML})
        root.set("ID", "_" + secrets.token_hex(16))
        root.set("Version", "2.0")
        root.set("IssueInstant", instant(now))
        root.set("Destination", acs or "")
        root.set("InResponseTo", request_id or "")
        etree.SubElement(root, f"{{{SAML}}}Issuer").text = self.entity_id
        status = etree.SubElement(root, f"{{{SAMLP}}}Status")
        etree.SubElement(status, f"{{{SAMLP}}}StatusCode").set("Value", SUCCESS)
        assertion = etree.SubElement(root, f"{{{SAML}}}Assertion")
        assertion_id = "_" + secrets.token_hex(16)
        assertion.set("ID", assertion_id)
        assertion.set("Version", "2.0")
        assertion.set("IssueInstant", instant(now))
        etree.SubElement(assertion, f"{{{SAML}}}Issuer").text = self.entity_id
        subject_element = etree.SubElement(assertion, f"{{{SAML}}}Subject")
        etree.SubElement(subject_element, f"{{{SAML}}}NameID").text = subject
        confirmation = etree.SubElement(subject_element, f"{{{SAML}}}SubjectConfirmation")
        confirmation.set("Method", "urn:oasis:names:tc:SAML:2.0:cm:bearer")
        data = etree.SubElement(confirmation, f"{{{SAML}}}SubjectConfirmationData")
        data.set("Recipient", acs or "")
        data.set("InResponseTo", request_id or "")
        data.set("NotOnOrAfter", instant(until))
        conditions = etree.SubElement(assertion, f"{{{SAML}}}Conditions")
        conditions.set("NotBefore", instant(now - timedelta(seconds=30)))
        conditions.set("NotOnOrAfter", instant(until))
        restriction = etree.SubElement(conditions, f"{{{SAML}}}AudienceRestriction")
        etree.SubElement(restriction, f"{{{SAML}}}Audience").text = self.audience or sp
        statement = etree.SubElement(assertion, f"{{{SAML}}}AttributeStatement")
        values = {
            EMAIL: [user.email],
            GROUPS: user.groups,
            **{k: [v] for k, v in user.extra.items()},
        }
        for name, listed in values.items():
            attribute = etree.SubElement(statement, f"{{{SAML}}}Attribute")
            attribute.set("Name", name)
            for value in listed:
                etree.SubElement(attribute, f"{{{SAML}}}AttributeValue").text = value
        if not self.unsigned:
            key, cert = self._rogue if self.rogue_key else (self.key_pem, self.certificate_pem)
            signed = XMLSigner(c14n_algorithm="http://www.w3.org/2001/10/xml-exc-c14n#").sign(
                assertion, key=key, cert=cert, reference_uri=assertion_id
            )
            root.replace(assertion, signed)
        return base64.b64encode(etree.tostring(root)).decode()
