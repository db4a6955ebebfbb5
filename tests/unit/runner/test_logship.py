"""The runner's live log: the chunker/buffer (retry, ordering, bound) and its one
redaction path (the BoundedLog feeds the shipper only redacted bytes)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.domain.logs import utf8_end
from runplane.runner.bounded_log import BoundedLog
from runplane.runner.diagnostics import engine_errors
from runplane.runner.logship import LogShipper, Pacing, SendFailed, send_delay

FAST = Pacing(interval=0.0, batch_bytes=1, first_backoff=0.001, max_backoff=0.002)


class FakeControlPlane:
    """Stores chunks as the endpoint does: once per sequence, contiguous, in order.

    ``failures`` scripts what the next sends meet: ``"down"`` (nothing stored, no
    answer), ``"lost"`` (stored, but the answer never arrives) or an HTTP status.
    """

    def __init__(self, failures: list[object] | None = None) -> None:
        self.failures = list(failures or [])
        self.chunks: dict[int, tuple[int, bytes]] = {}
        self.sends: list[tuple[int, int, bytes]] = []

    def send(self, sequence: int, offset: int, data: bytes) -> None:
        self.sends.append((sequence, offset, data))
        failure = self.failures.pop(0) if self.failures else None
        if failure == "down":
            raise SendFailed(None, "ConnectionRefusedError")
        if isinstance(failure, int):
            raise SendFailed(failure)
        stored = self.chunks.get(sequence)
        if stored is not None:
            assert stored == (offset, data), "a resend must carry the same bytes"
        else:
            previous = self.chunks.get(sequence - 1)
            expected = 0 if sequence == 0 else (previous[0] + len(previous[1]) if previous else -1)
            assert offset == expected, "chunks arrive in order, without gaps"
            self.chunks[sequence] = (offset, data)
        if failure == "lost":
            raise SendFailed(None, "TimeoutError")

    @property
    def text(self) -> bytes:
        return b"".join(self.chunks[n][1] for n in sorted(self.chunks))


def test_chunks_arrive_in_order_once_each_despite_outages_and_lost_answers() -> None:
    # Given a control plane that is down, loses an answer, and answers 503 at times
    plane = FakeControlPlane(["down", "down", "lost", 503, None, "lost", 502, "down"])
    shipper = LogShipper(plane.send, pacing=FAST, chunk_bytes=7)
    shipper.start()

    # When the log grows line by line and the phase ends
    lines = [f"line {n}: {'x' * n}\n".encode() for n in range(40)]
    for line in lines:
        shipper.feed(line)
    shipper.close()

    # Then every byte arrived, once, in order, and retries resent the same chunk
    assert plane.text == b"".join(lines)
    assert sorted(plane.chunks) == list(range(len(plane.chunks)))
    assert shipper.acknowledged == len(b"".join(lines))
    assert shipper.chunks == len(plane.chunks)
    assert shipper.stopped_reason is None
    resent = [s for s in plane.sends if plane.sends.count(s) > 1]
    assert resent  # the lost answers and outages were retried with the same chunk


def test_the_stream_stops_at_its_bound() -> None:
    # Given a shipper bounded to 100 bytes
    plane = FakeControlPlane()
    shipper = LogShipper(plane.send, pacing=FAST, limit=100, chunk_bytes=30)
    shipper.start()

    # When 1,000 bytes are fed
    for _ in range(100):
        shipper.feed(b"0123456789")
    shipper.close()

    # Then exactly the first 100 were streamed
    assert plane.text == (b"0123456789" * 10)
    assert all(len(data) <= 30 for _, data in plane.chunks.values())


def test_a_refusal_ends_streaming_and_later_output_is_not_sent() -> None:
    # Given a control plane that refuses the first chunk (the attempt has ended)
    plane = FakeControlPlane([409])
    shipper = LogShipper(plane.send, pacing=FAST)
    shipper.start()

    # When output is fed before and after the refusal
    shipper.feed(b"first\n")
    shipper.close()
    shipper.feed(b"after\n")

    # Then nothing was stored and the shipper says why it stopped
    assert plane.chunks == {}
    assert [s[0] for s in plane.sends] == [0]
    assert shipper.stopped_reason == "the control plane refused chunk 0 (409)"


def test_an_abandoned_stream_sends_nothing_more() -> None:
    # Given a shipper holding a line not yet due (closing would deliver it)
    plane = FakeControlPlane()
    shipper = LogShipper(plane.send, pacing=Pacing(interval=60.0, gather=60.0))
    shipper.start()
    shipper.feed(b"held\n")

    # When it is abandoned (the final log is stored), fed again, then closed
    shipper.abandon()
    shipper.feed(b"later\n")
    shipper.close()

    # Then nothing was sent, and its stop is not reported as a failure
    assert plane.sends == []
    assert shipper.stopped_reason is None


def test_feeding_never_waits_for_a_blocked_send() -> None:
    # Given a send that hangs until released (a control plane that does not answer)
    release = threading.Event()
    sent: list[bytes] = []

    def hanging(sequence: int, offset: int, data: bytes) -> None:
        release.wait()
        sent.append(data)

    shipper = LogShipper(hanging, pacing=FAST)
    shipper.start()
    shipper.feed(b"a")

    # When the engine keeps writing while the first send hangs
    for _ in range(1000):
        shipper.feed(b"b")

    # Then every write returned at once; the bytes wait in the buffer and follow later
    release.set()
    shipper.close()
    assert b"".join(sent) == b"a" + b"b" * 1000


def test_a_secret_split_across_writes_never_reaches_a_chunk() -> None:
    # Given the runner's log, redacting a secret, feeding a shipper
    plane = FakeControlPlane()
    shipper = LogShipper(plane.send, pacing=FAST, chunk_bytes=3)
    shipper.start()
    secret = "s3cr3t-token-value"
    log = BoundedLog(secrets=[secret], sink=shipper.feed)

    # When the engine prints the secret one byte at a time, then more output
    for byte in f"token={secret}; done\n".encode():
        log.write(bytes([byte]))
    log.close()
    shipper.close()

    # Then no chunk holds any long piece of it, and the stream is the final log
    assert plane.text == b"token=[redacted]; done\n" == log.bytes()
    assert not any(b"s3cr3t" in data for _, _, data in plane.sends)


def test_a_line_that_cannot_start_a_secret_is_streamed_before_the_next_write() -> None:
    # Given a log redacting a long secret
    streamed: list[bytes] = []
    log = BoundedLog(secrets=["x" * 40], sink=streamed.append)

    # When a line is written that no secret can begin with
    log.write(b"Plan: 1 to add, 0 to change, 0 to destroy.\n")

    # Then it is streamed at once, not held back for the secret's length
    assert b"".join(streamed) == b"Plan: 1 to add, 0 to change, 0 to destroy.\n"


@settings(max_examples=300)
@given(
    data=st.binary(max_size=80).map(lambda b: bytes(ord("a") + x % 3 for x in b)),
    secrets=st.lists(st.text("abc", min_size=1, max_size=5), max_size=3),
    cuts=st.lists(st.integers(0, 80), max_size=20),
    cap=st.integers(2, 120),
)
def test_the_streamed_bytes_are_the_start_of_the_final_log(
    data: bytes, secrets: list[str], cuts: list[int], cap: int
) -> None:
    # Given output written in arbitrary pieces to a log with a sink
    streamed: list[bytes] = []
    log = BoundedLog(cap_bytes=cap, secrets=secrets, sink=streamed.append)
    edges = sorted({0, len(data), *(c for c in cuts if c <= len(data))})

    # When it is written and closed
    for start, end in itertools.pairwise(edges):
        log.write(data[start:end])
        # (what was streamed so far is always the start of the final log)
        assert log.bytes().startswith(b"".join(streamed))
    log.close()

    # Then the stream is the final log's head: all of it up to half the cap
    final = log.bytes()
    assert b"".join(streamed) == final[: cap // 2]


def test_engine_errors_name_each_error_with_its_detail() -> None:
    text = (
        "==> Planning\n"
        "\n"
        "Error: Reference to undeclared input variable\n"
        "\n"
        '  on main.tf line 2, in output "o":\n'
        '   2: output "o" { value = var.b }\n'
        "\n"
        "\n"
        'An input variable with the name "b" has not been declared.\n'
        "\n"
        "Warning: Deprecated\n"
        "\n"
        "ignore me\n"
        "│ Error: Unsupported argument\n"
        "│ \n"
        "│   on main.tf line 3\n"
        "╵\n"
        # (the runner's next step ends the block)
        "==> Reading the saved plan\n"
        "Reading the saved plan failed: the engine exited with 1\n"
    )
    assert engine_errors(text, 2000) == (
        "Error: Reference to undeclared input variable\n"
        "\n"
        '  on main.tf line 2, in output "o":\n'
        '   2: output "o" { value = var.b }\n'
        "\n"
        'An input variable with the name "b" has not been declared.'
        "\n\n"
        "Error: Unsupported argument\n"
        "\n"
        "  on main.tf line 3"
    )
    assert engine_errors("all good\n", 2000) == ""
    bounded = engine_errors(text, 40)
    assert len(bounded) == 40
    assert bounded.endswith("…")


@pytest.mark.parametrize(
    ("data", "more", "cut"),
    [
        (b"abc", True, 3),
        ("aé".encode(), True, 3),
        ("aé".encode()[:2], True, 1),  # a lead byte alone waits for the next read
        ("a€".encode()[:3], True, 1),
        ("a€".encode()[:3], False, 3),  # the log ends there: keep it
        ("€".encode()[:2], True, 2),  # nothing else to return: keep it
        ("a🔑".encode(), True, 5),
    ],
)
def test_reads_do_not_end_inside_a_character(data: bytes, more: bool, cut: int) -> None:
    assert utf8_end(data, more=more) == cut


def test_a_burst_after_a_quiet_spell_is_gathered_into_one_chunk() -> None:
    # Given default pacing, a send half a second ago, then a quiet spell
    pacing = Pacing()

    # When a line has just arrived, and when it has waited the gathering time
    just_fed = send_delay(pacing, waiting=40, since=60.0, last_send=59.5, now=60.0, quiet=True)
    gathered = send_delay(
        pacing, waiting=400, since=60.0 - pacing.gather, last_send=59.5, now=60.0, quiet=True
    )

    # Then it waits a quarter second for the lines that follow it, then goes (the
    # interval since the last send does not hold back a quiet log's line)
    assert just_fed == pacing.gather == 0.25
    assert gathered == 0.0


def test_a_busy_log_is_sent_every_interval_or_once_a_batch_is_full() -> None:
    # Given default pacing and a send half a second ago, with output since
    pacing = Pacing()

    def busy(waiting: int) -> float:
        return send_delay(pacing, waiting=waiting, since=9.5, last_send=9.5, now=10.0, quiet=False)

    # When lines keep arriving, Then they wait for the interval (two seconds) unless
    # a batch's worth is waiting
    assert busy(100) == pytest.approx(1.5)
    assert busy(pacing.batch_bytes) == 0.0


def test_a_phase_streams_nothing_before_its_first_send_is_due() -> None:
    # Given a shipper whose phase started just now, and one whose first send is due at once
    waiting, prompt = FakeControlPlane(), FakeControlPlane()
    held = LogShipper(waiting.send, pacing=Pacing(gather=0.0, first_send=60.0))
    sent = LogShipper(prompt.send, pacing=Pacing(gather=0.0, first_send=0.0))
    for shipper in (held, sent):
        shipper.start()
        # When the engine prints its first line
        shipper.feed(b"Initializing the backend...\n")
    # Then the second sends it, while the first holds it for its phase's final log
    deadline = time.monotonic() + 10
    while not prompt.sends and time.monotonic() < deadline:
        time.sleep(0.01)
    assert prompt.text == b"Initializing the backend...\n"
    assert waiting.sends == []
    # And a phase that ended meanwhile (its final log stored) never streamed it
    held.abandon()
    held.close()
    sent.close()
    assert waiting.sends == []
