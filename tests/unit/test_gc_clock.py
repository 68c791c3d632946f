"""GcClock: collections and their time per generation, from gc.callbacks."""

from __future__ import annotations

import gc

from kmq.stats.gc_clock import GcClock, process_clock, set_young_threshold


def test_each_collection_is_counted_with_its_time_under_its_generation():
    times = iter([1.0, 1.25, 5.0, 5.5, 9.0, 9.01])
    clock = GcClock(clock=lambda: next(times))
    clock("start", {"generation": 0})
    clock("stop", {"generation": 0, "collected": 3})
    clock("start", {"generation": 2})
    clock("stop", {"generation": 2, "collected": 0})
    clock("start", {"generation": 0})
    clock("stop", {"generation": 0, "collected": 0})
    assert clock.collections == [2, 0, 1]
    assert [round(s, 3) for s in clock.seconds] == [0.26, 0.0, 0.5]
    assert clock.longest_s == 0.5 and round(clock.total_s, 3) == 0.76
    shown = clock.as_json()
    assert shown["collections"] == [2, 0, 1] and shown["longest_pause_ms"] == 500.0


def test_installed_it_sees_a_real_collection_and_removed_it_sees_none():
    with GcClock() as clock:
        assert clock in gc.callbacks
        gc.collect()
    assert clock not in gc.callbacks
    assert clock.collections[2] >= 1 and clock.seconds[2] >= 0.0
    before = list(clock.collections)
    gc.collect()
    assert clock.collections == before


def test_the_young_threshold_changes_alone():
    saved = gc.get_threshold()
    try:
        set_young_threshold(50_000)
        assert gc.get_threshold() == (50_000, *saved[1:])
    finally:
        gc.set_threshold(*saved)


def test_the_process_clock_is_one_and_installed():
    first = process_clock()
    assert process_clock() is first and first in gc.callbacks
