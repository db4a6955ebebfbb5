"""Items read ahead are served once each, never after a write, and a block read ahead
inside another never leaves the outer one an item older than its own write."""

from __future__ import annotations

from runplane.store import prefetch

RUN = ("RUN#r1", "RUN")
WORKSPACE = ("WS#w1", "WS")
PART = ("RUN#r1", "PART#attempt#plan")


def test_an_item_is_served_once_and_an_absence_only_as_known() -> None:
    # Given a run read ahead, and a part read ahead and found absent
    with prefetch.serving({RUN: {"pk": {"S": "RUN#r1"}}}, absent=[PART]):
        # When each is taken twice
        first, again = prefetch.take(RUN), prefetch.take(RUN)
        known, absent = prefetch.take_known(PART)
        unknown = prefetch.take_known(PART)

    # Then the run is served once, the absence is served once as known, then nothing
    assert first == {"pk": {"S": "RUN#r1"}}
    assert again is None
    assert (known, absent) == (True, None)
    assert unknown == (False, None)


def test_a_write_inside_a_nested_block_forgets_the_enclosing_blocks_items() -> None:
    # Given a request's items, and a block read ahead inside it
    with prefetch.serving({RUN: {"pk": {"S": "RUN#r1"}}, WORKSPACE: {"pk": {"S": "WS#w1"}}}):
        with prefetch.serving({PART: {"pk": {"S": "RUN#r1"}}}):
            # When the inner block is served the run, then writes
            assert prefetch.take(RUN) is not None
            prefetch.forget()
        # Then after it, the enclosing block serves nothing read before that write
        assert prefetch.take(WORKSPACE) is None
        assert prefetch.take(RUN) is None


def test_an_item_served_inside_a_nested_block_is_not_served_again_after_it() -> None:
    # Given a request's items, and a block read ahead inside it that takes one
    with prefetch.serving({RUN: {"pk": {"S": "RUN#r1"}}, WORKSPACE: {"pk": {"S": "WS#w1"}}}):
        with prefetch.serving({}):
            assert prefetch.take(RUN) is not None
        # When both are asked for after the inner block
        # Then the one it took is gone and the other is still served
        assert prefetch.take(RUN) is None
        assert prefetch.take(WORKSPACE) is not None
