"""The dispatcher's ordered queues (agents/dispatch/ordered.py) on fake records: hostile headers are
counted and set aside, duplicates dropped, heads handed out one per group."""

from agents.dispatch.ordered import OrderedQueues
from kmq.protocol import envelope as V
from tests.fake_records import StampedRec as Rec

KEY = (0, "q", 3)


def test_hostile_groups_and_dedup_ids_are_counted_and_never_crash():
    oq = OrderedQueues()
    recs = [Rec(0, [(V.ID, b"a"), (V.GROUP, b"x" * 129)]),        # too long: a group of its own
            Rec(1, [(V.ID, b"b"), (V.GROUP, b"")]),               # empty: a group of its own
            Rec(2, [(V.ID, b"c"), (V.DEDUP_ID, b"d" * 500)]),     # too long: delivered
            Rec(3, None),                                          # a plain record: derived id
            Rec(4, [(V.GROUP, b"\xff\xfe")])]                      # any bytes are a group
    oq.feed(KEY, recs, 300_000, 0)
    assert oq.stats == {"bad-group": 2, "bad-dedup-id": 1, "deduplicated": 0, "held-heads-let-go": 0,
                        "given-back": 0}
    assert [r.offset() for r in oq.take(KEY, 10, 0)] == [0, 1, 2, 3, 4]


def test_one_head_per_group_and_the_floor_is_the_oldest_waiting():
    oq = OrderedQueues()
    oq.feed(KEY, [Rec(o, [(V.ID, f"m{o}".encode()), (V.GROUP, b"g")]) for o in (10, 12, 15)], 300_000, 0)
    assert [r.offset() for r in oq.take(KEY, 10, 0)] == [10]
    assert oq.floor(KEY, 16) == 12
    assert oq.settled(KEY, [10])
    assert [r.offset() for r in oq.take(KEY, 10, 0)] == [12]
    assert oq.floor(KEY, 16) == 15


def test_duplicates_of_an_unordered_queue_are_dropped_and_plain_sends_not_looked_into():
    oq = OrderedQueues()
    first = Rec(0, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=1000)
    dup = Rec(1, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=2000)
    plain = Rec(2, [(V.ID, b"p")])
    assert oq.drop_duplicates(KEY, [first, dup, plain], 300_000) == [first, plain]
    assert oq.drop_duplicates(KEY, [first], 300_000) == [first]  # read again: still the first
    assert oq.stats["deduplicated"] == 1
    assert oq.gauges(0) == {}  # an unordered queue has no groups to show


def test_a_plain_producers_record_with_only_a_dedup_id_is_deduplicated():
    # No kmq.id, one header: the look for one header only was skipped (both were delivered).
    oq = OrderedQueues()
    first, dup = Rec(0, [(V.DEDUP_ID, b"txn")], ts=1000), Rec(1, [(V.DEDUP_ID, b"txn")], ts=2000)
    other = Rec(2, [("trace", b"x")])
    assert oq.drop_duplicates(KEY, [first, dup, other], 300_000) == [first, other]
    assert oq.stats["deduplicated"] == 1


def test_a_changed_dedup_window_keeps_what_the_queue_partition_saw():
    oq = OrderedQueues()
    first = Rec(0, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=1000)
    assert oq.drop_duplicates(KEY, [first], 300_000) == [first]
    again = Rec(1, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=400_000)
    assert oq.drop_duplicates(KEY, [again], 600_000) == []  # the window grew to 600 s
