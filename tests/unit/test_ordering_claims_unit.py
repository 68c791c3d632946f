"""Claims of docs/ordering.md checked without a broker, on the dispatcher's ordered queues
(agents/dispatch/ordered.py) and the pure rules they use."""

import pytest

from agents.dispatch.ordered import OrderedQueues
from kmq.errors import ConfigError
from kmq.protocol import envelope as V
from kmq.queue_config import QueueConfig
from tests.fake_records import StampedRec as Rec

KEY = (0, "q", 3)
WINDOW_MS = 1_000


def send(offset, ts, group=b"g", msg_id=b"d-1", dedup=b"txn"):
    """An SDK send with a dedup id: every send of ``dedup`` has the same ``kmq.id``."""
    return Rec(offset, [(V.ID, msg_id), (V.GROUP, group), (V.DEDUP_ID, dedup)], ts=ts)


def copy(offset, ts, group=b"g", msg_id=b"d-1"):
    """The tracker's republished copy of a message: same id and group, no dedup id."""
    return Rec(offset, [(V.ID, msg_id), (V.GROUP, group)], ts=ts)


def offsets(records):
    return [r.offset() for r in records]


def test_a_dedup_id_sent_again_after_its_window_while_the_first_is_in_hand_never_runs_beside_it():
    # "the messages of one group reach user code one at a time": the send after the window
    # has the first's id (docs: "a new message with the same id"); it is not a copy of it.
    oq = OrderedQueues()
    oq.feed(KEY, [send(0, ts=1000)], WINDOW_MS, 0)
    assert offsets(oq.take(KEY, 10, 0)) == [0]           # the first, at a consumer
    oq.feed(KEY, [send(5, ts=5000)], WINDOW_MS, 0)       # the window has passed
    assert oq.take(KEY, 10, 0) == []                     # nothing of g while 0 is in hand
    assert oq.settled(KEY, [0])                          # the first's ack frees its group


def test_a_dedup_id_sent_again_after_its_window_while_the_first_waits_never_sticks_its_group():
    oq = OrderedQueues()
    oq.feed(KEY, [send(0, ts=1000), send(1, ts=5000)], WINDOW_MS, 0)  # both wait
    taken = offsets(oq.take(KEY, 10, 0, run=5))
    assert taken[0] == 0
    # The consumer released 0 (and gave back the rest of its run): copies come back.
    oq.feed(KEY, [copy(7, ts=6000)] + ([copy(8, ts=6000)] if 1 in taken else []), WINDOW_MS, 0)
    again = offsets(oq.take(KEY, 10, 0))
    assert again == [7], f"group g stuck or out of order: {again}"
    assert oq.settled(KEY, [7])
    assert oq.take(KEY, 10, 0) == []  # the send after the window was the first's duplicate


NOW_MS = 1_764_000_000_000  # the dispatcher's wall clock in these tests


def test_one_record_stamped_by_a_clock_years_ahead_does_not_forget_every_dedup_id():
    # "a later record with the same id and a timestamp inside that window is a duplicate":
    # record timestamps are the producers' clocks (CreateTime); one producer's clock far
    # ahead moved the log's time there and expired every id of the queue partition.
    oq = OrderedQueues(wall_ms=lambda: NOW_MS)
    firsts = [Rec(i, [(V.ID, f"d-{i}".encode()), (V.DEDUP_ID, f"txn-{i}".encode())], ts=NOW_MS + i)
              for i in range(100)]
    assert oq.drop_duplicates(KEY, firsts, 300_000) == firsts
    skewed = Rec(100, [(V.ID, b"d-x"), (V.DEDUP_ID, b"txn-x")], ts=NOW_MS + 10 * 365 * 86_400_000)
    assert oq.drop_duplicates(KEY, [skewed], 300_000) == [skewed]
    repeats = [Rec(200 + i, [(V.ID, f"d-{i}".encode()), (V.DEDUP_ID, f"txn-{i}".encode())], ts=NOW_MS + 5_000)
               for i in range(100)]
    assert oq.drop_duplicates(KEY, repeats, 300_000) == []  # 5 s later: inside the window


def test_the_window_still_ends_by_the_logs_time():
    oq = OrderedQueues(wall_ms=lambda: NOW_MS + 400_000)
    first = Rec(0, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=NOW_MS)
    later = Rec(1, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=NOW_MS + 300_000)
    assert oq.drop_duplicates(KEY, [first, later], 300_000) == [first, later]


def test_ordering_on_a_spread_queue_says_how_to_get_one_partition():
    # A spread only grows: "needs spread=1" alone names a value the queue can never have.
    with pytest.raises(ConfigError, match="only grows.*new queue"):
        QueueConfig(spread=4).changed(ordering="group")
