"""Hosted-UI sign-in rules: what binds a sign-in to a browser, and what an ID token
must say beyond its signature."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from runplane.domain.errors import SignInRefused
from runplane.domain.sign_in import (
    Binding,
    authorize_url,
    check_id_token,
    code_challenge,
    logout_url,
    pre_session_cookie,
    signed_out_uri,
)
from runplane.domain.web_session import new_secret

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def claims(binding: Binding, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "token_use": "id",
        "nonce": binding.nonce,
        "auth_time": int((NOW - timedelta(minutes=2)).timestamp()),
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def reason(call: Any) -> str:
    with pytest.raises(SignInRefused) as refused:
        call()
    return refused.value.reason


def test_the_pkce_challenge_is_rfc_7636_s256() -> None:
    # The example of RFC 7636, appendix B
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert code_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_a_binding_is_derived_from_its_secret_and_reveals_nothing_of_it() -> None:
    # Given two pre-session secrets
    first, second = new_secret(), new_secret()
    one, again, other = Binding.of(first), Binding.of(first), Binding.of(second)

    # Then the same secret gives the same state, nonce and verifier, another secret others
    assert one == again
    assert {one.state, one.nonce, one.verifier}.isdisjoint(
        {other.state, other.nonce, other.verifier}
    )
    # And the three differ from each other and from the secret
    assert len({one.state, one.nonce, one.verifier, first}) == 4
    # And the verifier is a valid PKCE verifier (43-128 unreserved characters)
    assert 43 <= len(one.verifier) <= 128
    assert set(one.verifier) <= _UNRESERVED
    assert first not in repr(one)
    assert one.verifier not in repr(one)


def test_only_the_exact_state_matches() -> None:
    binding = Binding.of(new_secret())
    assert binding.state_matches(binding.state)
    for presented in (None, "", binding.state[:-1], binding.state + "x", binding.state + "é"):
        assert not binding.state_matches(presented), presented


def test_the_authorize_url_asks_for_a_code_with_s256_pkce_and_no_secret() -> None:
    secret = new_secret()
    binding = Binding.of(secret)
    url = authorize_url(
        "https://auth.example.com/",
        "client-1",
        "https://run.example.com/ui/oauth2/callback",
        binding,
    )
    parts = urlsplit(url)
    assert (
        f"{parts.scheme}://{parts.netloc}{parts.path}"
        == "https://auth.example.com/oauth2/authorize"
    )
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    assert query == {
        "response_type": "code",
        "client_id": "client-1",
        "redirect_uri": "https://run.example.com/ui/oauth2/callback",
        "scope": "openid email profile",
        "state": binding.state,
        "nonce": binding.nonce,
        "code_challenge": binding.challenge,
        "code_challenge_method": "S256",
    }
    assert secret not in url
    assert binding.verifier not in url


def test_sign_out_returns_to_the_sign_in_page_next_to_the_callback() -> None:
    callback = "https://abc.execute-api.us-east-1.amazonaws.com/prod/ui/oauth2/callback"
    back = signed_out_uri(callback)
    assert back == "https://abc.execute-api.us-east-1.amazonaws.com/prod/ui/sign-in"
    url = logout_url("https://auth.example.com", "client-1", back)
    query = parse_qs(urlsplit(url).query)
    assert url.startswith("https://auth.example.com/logout?")
    assert query == {"client_id": ["client-1"], "logout_uri": [back]}


def test_an_id_token_answering_this_sign_in_gives_its_auth_time() -> None:
    binding = Binding.of(new_secret())
    assert check_id_token(claims(binding), nonce=binding.nonce, now=NOW) == NOW - timedelta(
        minutes=2
    )


def test_an_access_token_or_one_without_token_use_is_refused() -> None:
    binding = Binding.of(new_secret())
    for token_use in ("access", None, "ID", 1):
        presented = claims(binding, token_use=token_use)
        assert reason(lambda c=presented: check_id_token(c, nonce=binding.nonce, now=NOW)) == (
            "wrong_token_use"
        )


def test_a_missing_or_foreign_nonce_is_refused() -> None:
    binding, other = Binding.of(new_secret()), Binding.of(new_secret())
    for nonce in (None, "", other.nonce, binding.nonce[:-1], 42, binding.nonce + "é"):
        presented = claims(binding, nonce=nonce)
        if nonce is None:
            presented.pop("nonce", None)
        assert reason(lambda c=presented: check_id_token(c, nonce=binding.nonce, now=NOW)) == (
            "nonce_mismatch"
        ), nonce


def test_an_id_token_must_say_when_the_person_authenticated() -> None:
    binding = Binding.of(new_secret())
    future = int((NOW + timedelta(minutes=5)).timestamp())
    for auth_time in (None, "yesterday", True, future, 10**20):
        presented = claims(binding, auth_time=auth_time)
        if auth_time is None:
            presented.pop("auth_time", None)
        assert reason(lambda c=presented: check_id_token(c, nonce=binding.nonce, now=NOW)) == (
            "no_auth_time"
        ), auth_time
    # A little clock skew is tolerated
    skewed = claims(binding, auth_time=int((NOW + timedelta(seconds=30)).timestamp()))
    assert check_id_token(skewed, nonce=binding.nonce, now=NOW) > NOW


def test_the_pre_session_cookie_is_http_only_lax_and_scoped_to_the_callback() -> None:
    cookie = pre_session_cookie("s3cret", secure=True, max_age=600)
    name, *flags = [part.strip() for part in cookie.split(";")]
    assert name == "runplane_sign_in=s3cret"
    assert set(flags) == {"Path=/ui/oauth2/", "HttpOnly", "SameSite=Lax", "Max-Age=600", "Secure"}
    assert "Secure" not in pre_session_cookie("s3cret", secure=False, max_age=600)
