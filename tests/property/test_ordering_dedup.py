"""Deduplication of ordered queues' sends (kmq.protocol.ordering.Dedup, dedup_message_id): the
first of each id within a window is kept and the state stays bounded, across senders by log
time; an id stamped far in the future holds nothing up; a changed window keeps the ids seen;
a dedup id gives the same message id at every send.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kmq.protocol.ordering import Dedup, dedup_message_id


@settings(max_examples=300, deadline=None)
@given(sends=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 400)), max_size=300),
       window=st.integers(1, 500), cap=st.integers(1, 8))
def test_dedup_keeps_the_first_of_each_window_and_stays_bounded(sends, window, cap):
    dedup = Dedup(window, max_entries=cap)
    ts = 0
    accepted: dict[int, int] = {}  # id -> timestamp of the window's first
    for i, (key, step) in enumerate(sends):
        ts += step
        first = dedup.check(str(key).encode(), f"m{i}", i, ts)
        assert dedup.check(str(key).encode(), f"m{i}", i, ts) == first  # read again: the same
        if first is not None:
            # a duplicate only within the window of an accepted first of the same id
            assert key in accepted and ts - accepted[key] < window
            assert first.startswith("m")
        else:
            accepted[key] = ts
        assert len(dedup) <= cap


def test_dedup_across_senders_by_log_time():
    dedup = Dedup(300_000)
    assert dedup.check(b"txn-991", "first", 10, 1_000) is None
    assert dedup.check(b"txn-991", "second", 11, 200_000) == "first"   # another process, same window
    assert dedup.check(b"txn-991", "first", 10, 1_000) is None         # the first, read again
    assert dedup.check(b"txn-991", "third", 12, 301_000) is None       # window passed: a new message
    assert dedup.check(b"other", "x", 13, 301_000) is None
    assert len(dedup) == 2


def test_an_id_stamped_far_in_the_future_does_not_keep_the_others():
    # A producer's clock years ahead: its id is remembered until the reader's wall clock is
    # a window past it, not years, and the ids behind it still expire (they left by the cap)
    dedup = Dedup(1_000)
    assert dedup.check(b"future", "f", 0, 10**13, now_ms=1_000) is None
    for i in range(1, 6):
        assert dedup.check(b"id-%d" % i, f"m{i}", i, 1_000 + i, now_ms=1_000 + i) is None
    assert dedup.check(b"late", "l", 9, 5_000, now_ms=5_000) is None
    assert len(dedup) == 1


@settings(max_examples=300, deadline=None)
@given(stamps=st.lists(st.integers(0, 1 << 62), max_size=60), window=st.integers(1, 10_000))
def test_after_a_window_of_wall_time_only_the_newest_id_is_kept_whatever_the_timestamps(stamps, window):
    dedup = Dedup(window)
    wall = 1_000
    for i, ts in enumerate(stamps):
        wall += i % 3
        dedup.check(b"id-%d" % i, f"m{i}", i, ts, now_ms=wall)
    later = wall + window + 1
    assert dedup.check(b"last", "z", len(stamps), later, now_ms=later) is None
    assert len(dedup) == 1


def test_a_changed_window_keeps_the_ids_seen():
    dedup = Dedup(300_000)
    assert dedup.check(b"txn", "first", 10, 1_000) is None
    dedup.set_window(600_000)  # a longer window: the first is still remembered
    assert dedup.check(b"txn", "second", 11, 500_000) == "first"
    dedup.set_window(100_000)  # a shorter one drops what is already past it
    assert len(dedup) == 0 and dedup.check(b"txn", "third", 12, 500_000) is None


def test_dedup_message_id_is_the_same_for_every_send():
    a = dedup_message_id("payments", b"txn-991")
    assert a == dedup_message_id("payments", b"txn-991")
    assert a != dedup_message_id("payments2", b"txn-991") and a.startswith("d-")
