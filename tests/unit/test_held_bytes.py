"""What the dispatcher keeps in memory is counted with its records' headers (pure, no broker).

Records with a megabyte of headers on a short value were counted by their values only: a
queue whose consumers were busy kept up to 20,000 of them read ahead, and an ordered queue
kept a whole window of them waiting for a stuck group (docs/reliability.md).
"""

from __future__ import annotations

from hypothesis import given, strategies as st

import agents.dispatch.ordered as O
from kmq.protocol import envelope as V
from kmq.protocol.chunk import headers_bytes, record_bytes, record_size
from kmq.protocol.lookahead import Lookahead
from kmq.protocol.dispatch import Want
from tests.fake_records import Rec

KEY = (0, "q", 0)

header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=40)))
headers = st.one_of(st.none(), st.lists(header, max_size=4))


def model(rec: Rec) -> int:
    """Record by record: the value's bytes, then every header's name and value."""
    n = len(rec)
    for name, value in rec.headers() or []:
        n += len(name) + (len(value) if value is not None else 0)
    return n


@given(st.lists(st.tuples(st.integers(0, 100), headers), max_size=50), st.booleans())
def test_record_bytes_counts_values_and_headers_as_the_model_does(records, sizes_known):
    recs = [Rec(i, b"q", n, headers=h) for i, (n, h) in enumerate(records)]
    want = list(map(model, recs))
    assert record_bytes(recs, [len(r) for r in recs] if sizes_known else None) == want
    assert list(map(record_size, recs)) == want


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=50))
def test_the_common_case_of_one_header_each_is_counted_like_any_other(ids):
    """The path taken in C (every record one header, kmq.id) agrees with the model."""
    recs = [Rec(i, b"q", 7, headers=[(V.ID, raw)]) for i, raw in enumerate(ids)]
    assert record_bytes(recs) == [7 + len(V.ID) + len(raw) for raw in ids]


def test_a_header_without_a_value_counts_its_name():
    assert headers_bytes([("a", None), ("bc", b"xy")]) == 5
    assert record_bytes([Rec(0, b"q", 3, headers=[("a", None)])]) == [4]


def test_records_heavy_with_headers_are_cut_from_the_read_ahead_and_none_is_lost():
    """100 records of 1 byte with 100 bytes of headers each, kept for a queue with no demand:
    before, counted as 100 bytes, all were kept under a bound of 1,000."""
    log = [Rec(o, b"a", 1, headers=[("h", b"x" * 99)]) for o in range(100)]
    ahead = Lookahead(max_records=1000, max_bytes=1000)
    b = Want("b", 0, 1)
    ahead.serve({b"b": b})
    ahead.take(log, {b"a"}, {b"b": b})
    held = ahead.queues[b"a"]
    assert held.bytes <= 1000 and len(held.records) <= 1000 // 101  # halved till within
    # The queue asks: it is served what was kept, then the reader goes back for the rest.
    a = Want("a", 0, 100)
    assert ahead.serve({b"a": a}) == (True, held.end)
    ahead.take(log[held.end:], {b"a"}, {b"a": a})
    assert [r.offset() for r in a.taken] == list(range(100))


class Grouped(Rec):
    """An ordered queue's record: a group, and headers as heavy as asked."""

    def __init__(self, offset: int, group: bytes, header_bytes: int) -> None:
        super().__init__(offset, b"q", 10, headers=[(V.ID, b"m%d" % offset), (V.GROUP, group),
                                                   ("pad", b"x" * header_bytes)])

    def value(self):
        return b"x" * 10

    def timestamp(self):
        return (1, 1000)


def test_an_ordered_queue_reads_no_further_once_its_waiting_records_hold_the_bound(monkeypatch):
    """A group stuck behind its head: its records wait. Before, only the window of 65,535
    offsets bounded them, whatever their bytes."""
    monkeypatch.setattr(O, "ORDERED_HELD_BYTES", 10_000)
    oq = O.OrderedQueues()
    oq.feed(KEY, [Grouped(0, b"g", 0)], 300_000, 0)
    assert [r.offset() for r in oq.take(KEY, 1, 0)] == [0]  # the head goes out, and stays out
    assert oq.room(KEY, 1) == O.ORDERED_WINDOW_OFFSETS
    heavy = [Grouped(o, b"g", 1000) for o in range(1, 11)]
    oq.feed(KEY, heavy[:9], 300_000, 0)
    assert 0 < oq.room(KEY, 10) < O.ORDERED_WINDOW_OFFSETS  # under the bound: the window
    oq.feed(KEY, heavy[9:], 300_000, 0)
    assert oq.held() == (sum(map(record_size, heavy)), 10) and oq.held()[0] >= 10_000
    assert oq.room(KEY, 11) == 0
    # The head is acked: the group's records go out, and the queue is read on.
    oq.settled(KEY, [0])
    taken = oq.take(KEY, 100, 0, run=100)
    assert [r.offset() for r in taken] == list(range(1, 11))
    assert oq.held() == (0, 0) and oq.room(KEY, 11) > 0


def test_purged_records_are_no_longer_counted():
    oq = O.OrderedQueues()
    oq.feed(KEY, [Grouped(0, b"g", 0)], 300_000, 0)
    oq.take(KEY, 1, 0)
    oq.feed(KEY, [Grouped(o, b"g", 500) for o in range(1, 5)], 300_000, 0)
    assert oq.held()[0] > 2000
    oq.purged(0, "q", {0: 5})
    assert oq.held() == (0, 0)
