"""One search for the end of an unreadable batch for every reader (the dispatcher's queue
reader, the depth scan, a consumer's lane): what each reader needs of it besides the search
(kmq/kafka/batch_skips.py; the search itself: tests/unit/test_hostile_queue_records.py)."""

from __future__ import annotations

from kmq.kafka.batch_skips import BatchSkips


def skip(skips: BatchSkips, p: int, base: int, n: int, **where) -> int:
    """Drive a search for batch ``[base, base + n)`` to its end; return where it seeks last."""
    seek = skips.step(p, base, past=False, error="bad", **where)
    while skips.searching(p):
        inside = seek < base + n
        seek = skips.step(p, base if inside else None, past=not inside)
    return seek


def test_a_batch_read_again_from_below_is_skipped_at_once_and_counted_once():
    """The depth scan reads every partition again each pass; it counted the batch each time."""
    skips = BatchSkips("scan", remember=10)
    assert skip(skips, 0, 40, 5) == 45
    assert skips.step(0, 40, past=False) == 45 and not skips.searching(0)
    assert (skips.batches, skips.offsets) == (1, 5)


def test_without_remembering_each_meeting_is_a_search():
    skips = BatchSkips("lane")
    assert skip(skips, 0, 40, 5) == 45
    assert skips.step(0, 40, past=False) == 41 and skips.searching(0)  # a probe


def test_a_reader_past_the_failure_ignores_it_and_searches_from_where_it_stands():
    skips = BatchSkips("queue reader", remember=10)
    assert skips.step(0, 10, past=False, position=12) is None  # an earlier read's error
    # The batch holding the position failed at its first offset, below the position.
    assert skip(skips, 0, 10, 8, position=11) == 18
    assert skips.offsets == 7  # from where the reader stood


def test_the_partitions_end_bounds_the_search():
    bounded = BatchSkips("queue reader")
    probes = 0
    seek = bounded.step(0, 0, past=False, end=3)
    while bounded.searching(0):
        probes += 1
        seek = bounded.step(0, 0 if seek < 3 else None, past=seek >= 3)
    assert seek == 3 and probes <= 2


def test_an_end_of_partition_after_a_probe_says_the_batch_ended_before_it():
    skips = BatchSkips("queue reader")
    seek = skips.step(0, 100, past=False)  # probe 101
    assert seek == 101
    assert skips.step(0, None, past=True, next_batch=101) == 101 and not skips.searching(0)


def test_at_most_remember_batches_are_kept_per_partition():
    skips = BatchSkips("scan", remember=2)
    for base in (10, 20, 30):  # the third clears the first two
        skip(skips, 0, base, 2)
    assert skips.step(0, 30, past=False) == 32  # remembered
    assert skips.step(0, 10, past=False) == 11 and skips.searching(0)  # forgotten: searched again
