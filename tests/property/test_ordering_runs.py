"""Runs of an ordered group (kmq.protocol.ordering.GroupOrder, ``take(..., run=N)``): a run
goes to one consumer and its group waits for all of it; a run given back comes again one
message at a time in run order; a run stops at a wide gap in the log.

The model of every interleaving: tests/property/test_ordering.py.
"""

from __future__ import annotations

from kmq.protocol.ordering import GroupOrder


def test_a_run_goes_to_one_consumer_and_its_group_waits_for_all_of_it():
    order = GroupOrder()
    for o in range(6):
        order.offer(o, f"a{o}", b"a", 0)
    order.offer(6, "b0", b"b", 0)
    # Given: one consumer takes a run of a's first four, and b's head
    assert order.take(8, 0, run=4) == [(0, b"a"), (1, b"a"), (2, b"a"), (3, b"a"), (6, b"b")]
    # Then: nothing more of a goes out until all four are settled
    for o in (0, 1, 2):
        assert order.settled(o) and order.take(8, 0, run=4) == []
    assert order.settled(3) and order.take(8, 0, run=4) == [(4, b"a"), (5, b"a")]


def test_a_run_given_back_comes_again_one_at_a_time_in_run_order():
    order = GroupOrder()
    for o in range(4):
        order.offer(o, f"a{o}", b"a", 0)
    order.offer(4, "a4", b"a", 0)
    assert [o for o, _ in order.take(8, 0, run=4)] == [0, 1, 2, 3]
    assert order.settled(0)
    # a1 released, a2 and a3 given back by the consumer: copies read in another order
    assert order.offer(10, "a3", b"a", 0) == "returned"
    assert order.offer(11, "a1", b"a", 0) == "returned"
    assert order.take(8, 0, run=4) == []          # a2 is neither at a consumer nor back
    assert order.offer(12, "a2", b"a", 0) == "returned"
    assert order.offer(13, "a2", b"a", 0) == "known"  # a second copy never goes out
    assert order.take(8, 0, run=4) == [(11, b"a")]   # the run's first, alone
    assert order.take(8, 0, run=4) == []
    assert order.settled(11) and order.take(8, 0, run=4) == [(12, b"a")]
    assert order.settled(12) and order.take(8, 0, run=4) == [(10, b"a")]
    assert order.settled(10) and order.take(8, 0, run=4) == [(4, b"a")]
    assert order.lowest_handed() == 4


def test_a_run_stops_at_a_wide_gap():
    order = GroupOrder()
    for o in (0, 1, 300, 301):
        order.offer(o, f"a{o}", b"a", 0)
    assert order.take(8, 0, run=8, max_gap=256) == [(0, b"a"), (1, b"a")]
