"""Items read ahead are served once each, never after a write, and a block read ahead
inside another never leaves the outer one an item older than its own write."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from runplane.domain.read_ahead import Read, ReadAhead
from runplane.store.request_reads import REQUEST

RUN = ("RUN#r1", "RUN")
WORKSPACE = ("WS#w1", "WS")
PART = ("RUN#r1", "PART#attempt#plan")
WS = Read.workspace("w1")


def test_an_item_is_served_once_and_an_absence_only_as_known() -> None:
    # Given a run read ahead, and a part read ahead and found absent
    with REQUEST.serving({RUN: {"pk": {"S": "RUN#r1"}}}, absent=[PART]) as reads:
        # When each is taken twice
        first, again = reads.take(RUN), reads.take(RUN)
        known, absent = reads.take_known(PART)
        unknown = reads.take_known(PART)

    # Then the run is served once, the absence is served once as known, then nothing
    assert first == {"pk": {"S": "RUN#r1"}}
    assert again is None
    assert (known, absent) == (True, None)
    assert unknown == (False, None)


def test_a_write_inside_a_nested_block_forgets_the_enclosing_blocks_items() -> None:
    # Given a request's items, and a block read ahead inside it
    with REQUEST.serving(
        {RUN: {"pk": {"S": "RUN#r1"}}, WORKSPACE: {"pk": {"S": "WS#w1"}}}
    ) as reads:
        with REQUEST.serving({PART: {"pk": {"S": "RUN#r1"}}}) as inner:
            # When the inner block is served the run, then writes
            assert inner.take(RUN) is not None
            REQUEST.forget()
        # Then after it, the enclosing block serves nothing read before that write
        assert reads.take(WORKSPACE) is None
        assert reads.take(RUN) is None


def test_an_item_served_inside_a_nested_block_is_not_served_again_after_it() -> None:
    # Given a request's items, and a block read ahead inside it that takes one
    with REQUEST.serving(
        {RUN: {"pk": {"S": "RUN#r1"}}, WORKSPACE: {"pk": {"S": "WS#w1"}}}
    ) as reads:
        with REQUEST.serving({}) as inner:
            assert inner.take(RUN) is not None
        # When both are asked for after the inner block
        # Then the one it took is gone and the other is still served
        assert reads.take(RUN) is None
        assert reads.take(WORKSPACE) is not None


def test_a_request_s_identity_map_serves_what_its_authentication_read_once_each() -> None:
    # Given what a request's authentication read: its run, and a workspace found absent
    ahead = ReadAhead.of({Read.run("r1"): {"pk": {"S": "RUN#r1"}}}, [Read.run("r1"), WS])

    # When the handler opens the request's identity map with it and the run is read twice
    with REQUEST.opened(ahead) as reads:
        first, again = reads.take(RUN), reads.take(RUN)
        absent, unknown = REQUEST.reads().take_known(WORKSPACE), reads.take_known(WORKSPACE)

    # Then the run is served to the first read only, the absence once as known
    assert first == {"pk": {"S": "RUN#r1"}}
    assert again is None
    assert absent == (True, None)
    assert unknown == (False, None)
    # And nothing is served once the request is over
    assert REQUEST.reads().take_known(RUN) == (False, None)


def test_a_write_forgets_everything_the_request_read_ahead() -> None:
    # Given a request's identity map holding its run and workspace
    ahead = ReadAhead.of({Read.run("r1"): {"pk": {"S": "RUN#r1"}}, WS: {"pk": {"S": "WS#w1"}}})
    with REQUEST.opened(ahead) as reads:
        # When the request writes
        REQUEST.forget()
        # Then no read after it is served what was read before it
        assert RUN not in reads
        assert reads.take_known(WORKSPACE) == (False, None)


def test_two_requests_have_identity_maps_of_their_own() -> None:
    # Given two requests whose authentications read the same run
    ahead = ReadAhead.of({Read.run("r1"): {"pk": {"S": "RUN#r1"}}})
    with REQUEST.opened(ahead) as first:
        # When the first is served it
        assert first.take(RUN) is not None
    # Then the second request is served it all the same
    with REQUEST.opened(ahead) as second:
        assert second.take(RUN) is not None


def test_a_request_resolved_inside_another_forgets_the_outer_one_s_items_when_it_writes() -> None:
    # Given a request that resolves another inside it (the engine's first reads)
    outer = ReadAhead.of({Read.run("r1"): {"pk": {"S": "RUN#r1"}}, WS: {"pk": {"S": "WS#w1"}}})
    with REQUEST.opened(outer) as reads:
        with REQUEST.opened(ReadAhead()):
            # When the inner one writes
            REQUEST.forget()
        # Then the outer one serves nothing read before that write
        assert reads.take(RUN) is None
        assert reads.take(WORKSPACE) is None


def test_requests_served_on_two_threads_each_have_their_own_identity_map() -> None:
    # Given a request in progress on this thread, whose authentication read the run
    ahead = ReadAhead.of({Read.run("r1"): {"pk": {"S": "RUN#r1"}}})

    def on_another_thread() -> tuple[bool, bool]:
        # (another request is served on the embedded stack's threads, in one process)
        outside = REQUEST.reads().take(RUN) is None
        with REQUEST.opened(ReadAhead()) as theirs:
            REQUEST.forget()
            return outside, theirs.take(RUN) is None

    with REQUEST.opened(ahead) as mine, ThreadPoolExecutor(1) as pool:
        # When another thread reads outside any request, then serves one and writes
        outside, theirs = pool.submit(on_another_thread).result()
        # Then neither saw this request's run, and its write forgot nothing of this one
        assert outside
        assert theirs
        assert mine.take(RUN) == {"pk": {"S": "RUN#r1"}}
