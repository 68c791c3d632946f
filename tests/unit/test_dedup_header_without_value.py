"""A plain producer's ``kmq.dedup-id`` header without a value (librdkafka allows one) is a bad
dedup id on an unordered shared queue, as on an ordered one: counted as ``bad-dedup-id``
and delivered (it was not counted at all: a header without a value read as no header)."""

from __future__ import annotations

from agents.dispatch.ordered import OrderedQueues
from kmq.protocol import envelope as V
from tests.fake_records import StampedRec as Rec


def test_a_dedup_id_header_without_a_value_is_counted_bad_and_delivered():
    oq = OrderedQueues(wall_ms=lambda: 10_000)
    recs = [Rec(5, [(V.ID, b"p-1"), (V.DEDUP_ID, None)]), Rec(6, [(V.ID, b"p-2"), (V.DEDUP_ID, None)])]
    assert oq.drop_duplicates((0, "q", 3), recs, 300_000) == recs
    assert oq.stats["bad-dedup-id"] == 2 and oq.stats["deduplicated"] == 0


def test_a_record_without_the_header_is_not_counted():
    oq = OrderedQueues(wall_ms=lambda: 10_000)
    recs = [Rec(5, [(V.ID, b"p-1"), ("other", b"x")])]
    assert oq.drop_duplicates((0, "q", 3), recs, 300_000) == recs
    assert oq.stats["bad-dedup-id"] == 0
