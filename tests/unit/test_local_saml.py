"""The embedded stack's SAML checks (runplane.local.saml): only a signed, fresh
assertion for us, answering our request, signs anyone in."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from lxml import etree

from runplane.local.saml import SAML, SamlRefused, verify_response
from tests.fake_saml import GROUPS, FakeSamlProvider, SamlUser

ACS = "http://127.0.0.1:1/saml2/idpresponse"
SP = "urn:amazon:cognito:sp:runplane-local"
REQUEST = "_request1"


@pytest.fixture
def idp() -> FakeSamlProvider:
    provider = FakeSamlProvider()
    provider.url = "http://127.0.0.1:2"
    provider.users["ann"] = SamlUser("ann@example.com", ["ops", "dev team"])
    return provider


def verify(idp: FakeSamlProvider, response: str, **changes: object) -> object:
    arguments: dict[str, object] = {
        "certificate_pem": idp.certificate_pem,
        "idp_entity_id": idp.entity_id,
        "sp_entity_id": SP,
        "acs_url": ACS,
        "request_id": REQUEST,
        "now": datetime.now(UTC),
        **changes,
    }
    return verify_response(response, **arguments)  # type: ignore[arg-type]


def test_a_signed_assertion_for_us_names_its_subject_and_attributes(idp: FakeSamlProvider) -> None:
    identity = verify(idp, idp.response("ann", REQUEST, ACS, SP))
    assert identity.subject == "ann"  # type: ignore[attr-defined]
    assert identity.attributes[GROUPS] == ("ops", "dev team")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("knob", "reason"),
    [
        ({"rogue_key": True}, "bad_signature"),
        ({"unsigned": True}, "bad_signature"),
        ({"audience": "urn:someone-else"}, "wrong_audience"),
        ({"lifetime": timedelta(seconds=-10)}, "expired"),
    ],
)
def test_a_response_the_provider_did_not_sign_for_us_now_is_refused(
    idp: FakeSamlProvider, knob: dict[str, object], reason: str
) -> None:
    for name, value in knob.items():
        setattr(idp, name, value)
    with pytest.raises(SamlRefused) as refused:
        verify(idp, idp.response("ann", REQUEST, ACS, SP))
    assert refused.value.reason == reason


def test_an_answer_to_another_request_or_for_another_recipient_is_refused(
    idp: FakeSamlProvider,
) -> None:
    with pytest.raises(SamlRefused) as refused:
        verify(idp, idp.response("ann", "_other", ACS, SP))
    assert refused.value.reason == "not_our_request"
    with pytest.raises(SamlRefused) as refused:
        verify(idp, idp.response("ann", REQUEST, "http://127.0.0.1:9/acs", SP))
    assert refused.value.reason == "wrong_destination"


def test_a_second_unsigned_assertion_beside_the_signed_one_is_refused(
    idp: FakeSamlProvider,
) -> None:
    # Given a genuine response and a forged assertion for another person added to it
    root = etree.fromstring(base64.b64decode(idp.response("ann", REQUEST, ACS, SP)))
    forged = etree.fromstring(etree.tostring(root.find(f"{{{SAML}}}Assertion")))
    forged.find(f"{{{SAML}}}Subject/{{{SAML}}}NameID").text = "admin"
    root.insert(0, forged)
    # Then nobody is signed in
    with pytest.raises(SamlRefused):
        verify(idp, base64.b64encode(etree.tostring(root)).decode())


def test_a_signed_assertion_altered_after_signing_is_refused(idp: FakeSamlProvider) -> None:
    root = etree.fromstring(base64.b64decode(idp.response("ann", REQUEST, ACS, SP)))
    root.find(f".//{{{SAML}}}NameID").text = "admin"
    with pytest.raises(SamlRefused) as refused:
        verify(idp, base64.b64encode(etree.tostring(root)).decode())
    assert refused.value.reason == "bad_signature"
