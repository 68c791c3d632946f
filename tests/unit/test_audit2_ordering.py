"""docs/ordering.md read as a user (a second audit): its claims checked without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kmq
from agents.dispatch.ordered import OrderedQueues
from kmq.protocol import envelope as V
from tests.fake_records import StampedRec

client = kmq.Client("127.0.0.1:1")  # nothing listens: nothing is written
KEY = (0, "q", 0)


@pytest.mark.parametrize("kwargs, named", [
    (dict(group="acct-\udcff"), "group="),
    (dict(dedup_id="\ud800txn"), "dedup_id="),
])
def test_a_group_or_dedup_id_that_is_no_utf8_text_is_refused_naming_it(kwargs, named):
    # "kmq.group (1 to 128 bytes)": a str is sent as its UTF-8 bytes; one that has none (a
    # lone surrogate) was a UnicodeEncodeError from inside send.
    with pytest.raises(kmq.ConfigError, match=f"{named}.*not valid UTF-8.*bytes"):
        client.send("q", b"x", **kwargs)
    assert client._producer is None


def rec(offset: int, group: bytes) -> StampedRec:
    return StampedRec(offset, [(V.ID, f"m{offset}".encode()), (V.GROUP, group)])


def test_records_waiting_for_their_group_are_released_when_the_queue_goes_unordered():
    # Given an ordered queue partition whose group g has its head out and two records waiting
    ordered = OrderedQueues(wall_ms=lambda: 1000)
    ordered.feed(KEY, [rec(0, b"g"), rec(1, b"g"), rec(2, b"h"), rec(3, b"g")], 300_000, now_ms=0)
    ordered.take(KEY, 1, now_ms=0)  # g's head
    assert ordered.waiting(KEY)
    # When it is no longer ordered, they go out lowest first, as credit allows
    assert [r.offset() for r in ordered.release(KEY, 2)] == [1, 2]
    assert [r.offset() for r in ordered.release(KEY, 10)] == [3]
    # Then nothing waits and no group state is kept (nor reported in the gauges)
    assert not ordered.waiting(KEY) and ordered.release(KEY, 10) == []
    assert ordered.held() == (0, 0) and ordered.gauges(0) == {}


def test_records_not_yet_released_go_to_their_groups_if_the_queue_is_ordered_again():
    ordered = OrderedQueues(wall_ms=lambda: 1000)
    ordered.feed(KEY, [rec(0, b"g"), rec(1, b"g"), rec(2, b"g")], 300_000, now_ms=0)
    ordered.take(KEY, 1, now_ms=0)
    assert [r.offset() for r in ordered.release(KEY, 1)] == [1]  # ordering "none" for a while
    ordered.feed(KEY, [rec(3, b"g")], 300_000, now_ms=0)  # "group" again: 2 is fed again
    assert [r.offset() for r in ordered.take(KEY, 10, now_ms=0, run=10)] == [2, 3]


@settings(max_examples=100, deadline=None)
@given(groups=st.lists(st.sampled_from([b"g", b"h", b"k"]), min_size=1, max_size=30),
       takes=st.lists(st.integers(0, 4), max_size=5), chunks=st.lists(st.integers(1, 5), min_size=1))
def test_every_record_read_goes_out_once_when_the_queue_goes_unordered(groups, takes, chunks):
    # Whatever was handed out while ordered, the rest is released once each, lowest first.
    ordered = OrderedQueues(wall_ms=lambda: 1000)
    ordered.feed(KEY, [rec(i, g) for i, g in enumerate(groups)], 300_000, now_ms=0)
    out = [r.offset() for n in takes for r in ordered.take(KEY, n, now_ms=0, run=n)]
    released: list[int] = []
    for n in chunks * len(groups):
        released += [r.offset() for r in ordered.release(KEY, n)]
    assert released == sorted(released)
    assert sorted(out + released) == list(range(len(groups)))
    assert not ordered.waiting(KEY)
