"""Dashboard session rules: CSRF tokens, origin checks and cookie flags."""

from __future__ import annotations

from runplane.domain.web_session import (
    cleared_cookie,
    csrf_matches,
    csrf_token,
    new_secret,
    same_origin,
    session_cookie,
)


def test_the_csrf_token_belongs_to_one_session_and_reveals_nothing_of_it() -> None:
    # Given two sessions
    first, second = new_secret(), new_secret()

    # Then each session's token matches only that session
    assert csrf_matches(first, csrf_token(first))
    assert not csrf_matches(first, csrf_token(second))
    assert csrf_token(first) == csrf_token(first)
    assert first not in csrf_token(first)


def test_a_missing_truncated_or_non_ascii_csrf_token_is_refused() -> None:
    secret = new_secret()
    token = csrf_token(secret)
    for presented in (None, "", token[:-1], token + "0", token[:-1] + "é", token.upper()):
        assert not csrf_matches(secret, presented), presented


def test_only_this_origin_or_no_origin_may_post() -> None:
    assert same_origin(None, "http", "127.0.0.1:8700")
    assert same_origin("http://127.0.0.1:8700", "http", "127.0.0.1:8700")
    for origin in (
        "https://127.0.0.1:8700",
        "http://127.0.0.1:8701",
        "http://evil.example",
        "null",
        "",
    ):
        assert not same_origin(origin, "http", "127.0.0.1:8700"), origin
    assert not same_origin("http://127.0.0.1:8700", "http", None)


def test_the_session_cookie_is_http_only_strict_and_secure_over_https() -> None:
    plain = session_cookie("abc", secure=False, max_age=60)
    assert plain == "runplane_session=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=60"
    assert session_cookie("abc", secure=True, max_age=60).endswith("; Secure")
    assert "Max-Age=0" in cleared_cookie(secure=True)
