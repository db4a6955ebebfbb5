"""The runner's log redacts a secret's transformed spellings too (runner/bounded_log.py).

The streaming machinery (hold-back, truncation, sinks) is also tested next to the engine
runs in tests/e2e/test_runner_engine.py and with the shipper in test_logship.py.
"""

from __future__ import annotations

import base64
import itertools
import json
import urllib.parse
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runplane.domain import redaction
from runplane.domain.redaction import fold, secret_needles
from runplane.runner.bounded_log import MIN_TRANSFORMED_SECRET, BoundedLog

MARK = "[redacted]"


@pytest.fixture(autouse=True, params=["find", "scan"])
def search(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test runs with each way of searching: one find per spelling (few spellings)
    and the regular-expression scans (many)."""
    limit = 10_000 if request.param == "find" else 0
    with mock.patch.object(redaction, "_FIND_AT_MOST", limit):
        yield


SECRET = 'Tr0ub4dor&3 "horse"\\é'
RAW = SECRET.encode()


def go_quoted(text: str) -> str:
    """Go's strconv.Quote without the quotes, for the characters these tests use."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


FORMS = {
    "raw": SECRET,
    "upper": SECRET.upper(),
    "lower": SECRET.lower(),
    "mixed case": SECRET.swapcase(),
    "reversed": SECRET[::-1],
    "reversed upper": SECRET[::-1].upper(),
    "json": json.dumps(SECRET)[1:-1],
    "json utf-8": json.dumps(SECRET, ensure_ascii=False)[1:-1],
    "json upper": json.dumps(SECRET.upper())[1:-1],
    "hcl": SECRET.replace("\\", "\\\\").replace('"', '\\"'),
    "go %q": go_quoted(SECRET),
    "go %q reversed": go_quoted(SECRET[::-1]),
    "base64": base64.b64encode(RAW).decode(),
    "base64 unpadded": base64.b64encode(RAW).decode().rstrip("="),
    "base64 url-safe": base64.urlsafe_b64encode(RAW).decode(),
    "base64 url-safe unpadded": base64.urlsafe_b64encode(RAW).decode().rstrip("="),
    "hex": RAW.hex(),
    "HEX": RAW.hex().upper(),
    "urlencode": urllib.parse.quote_plus(SECRET, safe=""),
    "percent-encoded": urllib.parse.quote(SECRET, safe=""),
    "percent-encoded lower hex": urllib.parse.quote(SECRET, safe="").lower(),
}


def redacted(secrets: list[str], *pieces: str | bytes) -> str:
    log = BoundedLog(secrets=secrets)
    for piece in pieces:
        log.write(piece)
    return log.text()


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_each_spelling_of_a_secret_is_redacted(form: str) -> None:
    # Given a log redacting a secret
    # When the engine prints the secret transformed
    text = redacted([SECRET], f"value = {form}\n")

    # Then the line holds the marker instead
    assert text == f"value = {MARK}\n"


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_a_spelling_split_across_two_writes_at_any_offset_is_redacted(form: str) -> None:
    # Given a line holding a transformed secret
    line = f"error: {form}; done\n".encode()

    for cut in range(len(line) + 1):
        # When it is written in two pieces, cut at that offset
        text = redacted([SECRET], line[:cut], line[cut:])

        # Then it is redacted as if written whole
        assert text == f"error: {MARK}; done\n", cut


@pytest.mark.parametrize("form", ["hex", "base64", "percent-encoded"])
def test_a_long_secrets_spelling_written_byte_by_byte_is_redacted(form: str) -> None:
    # Given a secret whose spellings are far longer than what the scan looks up first
    secret = "k3y-" + "0123456789abcdefghij" * 8
    spelled = {
        "hex": secret.encode().hex(),
        "base64": base64.b64encode(secret.encode()).decode(),
        "percent-encoded": urllib.parse.quote(secret, safe=""),
    }[form]
    log = BoundedLog(secrets=[secret])

    # When it is printed one byte at a time
    for byte in f"x={spelled}!\n".encode():
        log.write(bytes([byte]))

    # Then it is redacted
    assert log.text() == f"x={MARK}!\n"


@pytest.mark.parametrize(("before", "after"), list(itertools.product(range(4), range(4))))
def test_the_part_of_a_base64_stream_that_encodes_only_the_secret_is_redacted(
    before: int, after: int
) -> None:
    # Given the secret embedded in a longer byte string, at every alignment
    stream = base64.b64encode(b"<" * before + RAW + b">" * after).decode()

    # When the engine prints that string's base64 (standard and URL-safe)
    for encoded in (stream, stream.translate(str.maketrans("+/", "-_"))):
        text = redacted([SECRET], encoded)

        # Then only the characters that also encode a neighbouring byte may remain
        head, marker, tail = text.partition(MARK)
        assert marker == MARK
        assert len(head) <= -(-8 * before // 6)
        assert len(tail) <= len(encoded) - 8 * (before + len(RAW)) // 6
        assert stream.startswith(head)


def test_a_secret_word_wrapped_by_the_engine_is_redacted() -> None:
    # Given a secret of several words
    secret = "correct horse battery staple"

    # When the engine's word-wrapping of a message put a newline for one of its spaces
    text = redacted([secret], "Invalid value: no file exists at correct horse\nbattery staple;")

    # Then it is redacted still
    assert text == f"Invalid value: no file exists at {MARK};"


def test_a_non_ascii_secret_is_redacted_in_upper_and_lower_case() -> None:
    secret = "straße-ÉCOLE-ключ"
    for form in (secret.upper(), secret.lower(), secret[::-1].upper()):
        assert redacted([secret], f"[{form}]") == f"[{MARK}]"


@pytest.mark.parametrize("secret", ["1", "true", "abc", "12345", "Ab3"])
def test_a_short_secret_is_redacted_only_as_written(secret: str) -> None:
    # Given a secret shorter than the minimum for transformed spellings
    assert len(secret) < MIN_TRANSFORMED_SECRET
    transformed = [
        secret.upper(),
        secret.lower(),
        secret[::-1],
        secret.encode().hex(),
        base64.b64encode(secret.encode()).decode(),
    ]
    others = [form for form in transformed if secret not in form]

    # When it and its transformations are printed
    text = redacted([secret], " ".join([secret, *others]))

    # Then only the value as written is redacted
    assert text == " ".join([MARK, *others])


def test_a_secret_at_the_minimum_length_is_redacted_transformed() -> None:
    secret = "a" * (MIN_TRANSFORMED_SECRET - 1) + "Z"
    assert redacted([secret], secret.swapcase(), " ", secret[::-1]) == f"{MARK} {MARK}"


ORDINARY = """\
Terraform used the selected providers to generate the following execution plan.

  # aws_instance.web will be created
  + resource "aws_instance" "web" {
      + ami           = "ami-0c55b159cbfafe1f0"
      + instance_type = "t3.micro"
      + tags          = {
          + "Name" = "web-1"
        }
      + user_data     = "IyEvYmluL2Jhc2gKZWNobyBoZWxsbyB3b3JsZAo="
    }

Plan: 1 to add, 0 to change, 0 to destroy.
2024-05-01T10:00:00.000Z [DEBUG] provider: HTTP/1.1 200 OK x-amz-request-id: 4A3B2C1D0E9F8A7B
sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
"""


def test_ordinary_engine_output_is_kept_whole() -> None:
    # Given a log redacting realistic secrets that do not appear in the output
    secrets = [
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AKIAIOSFODNN7EXAMPLE",
        "correct horse battery staple",
        "p@ssw0rd!",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    ]

    # When ordinary plan and debug output is written
    # Then none of it changes
    assert redacted(secrets, ORDINARY) == ORDINARY


def test_a_line_no_spelling_can_start_is_streamed_at_once() -> None:
    # Given a log redacting a secret, with a sink
    streamed: list[bytes] = []
    log = BoundedLog(secrets=[SECRET], sink=streamed.append)

    # When a line is written that no spelling of the secret can begin with
    log.write(b"Plan: 1 to add, 0 to change, 0 to destroy.\n")

    # Then it is streamed before anything else is written
    assert b"".join(streamed) == b"Plan: 1 to add, 0 to change, 0 to destroy.\n"


def test_a_line_ending_in_a_spellings_start_is_held_back_until_decided() -> None:
    # Given a log redacting a secret, with a sink
    streamed: list[bytes] = []
    log = BoundedLog(secrets=[SECRET], sink=streamed.append)
    spelled = RAW.hex()

    # When a line ends with the start of the secret's hex, then the rest follows
    log.write(f"data: {spelled[:10]}")
    held = b"".join(streamed)
    log.write(f"{spelled[10:]}\n")
    log.close()

    # Then the start was held back, and the whole is redacted
    assert held == b"data: "
    assert b"".join(streamed) == f"data: {MARK}\n".encode()


# --------------------------------------------------------------------------- properties


def reference_redaction(data: bytes, secrets: list[str]) -> bytes:
    """Every byte inside an occurrence of any spelling is covered; each covered run is one
    marker. Folded spellings match the folded text."""
    folded = fold(data)
    covered = [False] * len(data)
    for secret in secrets:
        needles = secret_needles(secret)
        for haystack, found in ((data, needles.exact), (folded, needles.folded)):
            for needle in found:
                for at in range(len(data) - len(needle) + 1):
                    if haystack.startswith(needle, at):
                        covered[at : at + len(needle)] = [True] * len(needle)
    out = bytearray()
    for is_covered, run in itertools.groupby(zip(covered, data, strict=True), lambda p: p[0]):
        out += MARK.encode() if is_covered else bytes(byte for _, byte in run)
    return bytes(out)


def spellings_of(secret: str) -> list[str]:
    raw = secret.encode()
    return [
        secret,
        secret.upper(),
        secret[::-1],
        raw.hex(),
        base64.b64encode(raw).decode(),
        # embedded one byte after a group boundary: what encodes only the secret's bits
        base64.b64encode(b"x" + raw).decode()[2 : 8 * (1 + len(raw)) // 6],
    ]


@st.composite
def output_with_secrets(draw: st.DrawFn) -> tuple[bytes, list[str], list[int]]:
    secrets = draw(st.lists(st.text("aAb1= ", min_size=1, max_size=8), min_size=1, max_size=3))
    pieces = draw(
        st.lists(
            st.one_of(
                st.text("aAbB1=+/ \n", max_size=6),
                st.sampled_from(secrets).flatmap(lambda s: st.sampled_from(spellings_of(s))),
            ),
            max_size=8,
        )
    )
    data = "".join(pieces).encode()
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=12))
    return data, secrets, cuts


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=output_with_secrets(), head=st.sampled_from([2, 3, 32]))
def test_the_log_equals_redacting_every_spelling_in_the_whole_stream(
    case: tuple[bytes, list[str], list[int]], head: int
) -> None:
    # Given output holding spellings of the secrets, written in arbitrary pieces, and
    # a scan that looks spellings up by their first `head` bytes (so that, with a short
    # head, the long-spelling paths are exercised by short secrets)
    data, secrets, cuts = case
    with mock.patch.object(redaction, "_HEAD", head):
        check_whole_stream_redaction(data, secrets, cuts)


def check_whole_stream_redaction(data: bytes, secrets: list[str], cuts: list[int]) -> None:
    log = BoundedLog(cap_bytes=10_000, secrets=secrets)
    edges = sorted({0, len(data), *cuts})

    # When it is written
    for start, end in itertools.pairwise(edges):
        log.write(data[start:end])

    # Then the log is what redacting the whole stream at once gives
    assert log.bytes() == reference_redaction(data, secrets)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    secret=st.text(
        st.characters(exclude_categories=["Cs"]), min_size=MIN_TRANSFORMED_SECRET, max_size=24
    ),
    pick=st.integers(0, 5),
    cut=st.integers(0, 200),
)
def test_no_spelling_of_a_secret_survives_whatever_its_characters(
    secret: str, pick: int, cut: int
) -> None:
    # Given a secret of any characters, and one of its spellings between separators
    spelled = spellings_of(secret)[pick]
    line = f"\x00{spelled}\x00".encode()
    cut = min(cut, len(line))

    # When it is written in two pieces
    text = redacted([secret], line[:cut], line[cut:])

    # Then the marker replaced it
    assert text == f"\x00{MARK}\x00"


def test_a_value_that_is_not_secret_is_redacted_as_written_and_its_derived_forms_show() -> None:
    # Given a log redacting a sensitive value, and a region that is not sensitive
    log = BoundedLog(secrets=["Tr0ub4dor-horse"], values=["eu-west-3"])
    # When the engine prints each as written and transformed
    log.write('region = "eu-west-3"; shout = "EU-WEST-3!"; token = "TR0UB4DOR-HORSE"\n')
    log.close()
    # Then the region is hidden only as written, the secret in every spelling
    text = log.text()
    assert "eu-west-3" not in text
    assert 'shout = "EU-WEST-3!"' in text
    assert "TR0UB4DOR-HORSE" not in text
