"""Purges of an ordered queue (kmq.protocol.ordering.GroupOrder.purge_below): a purge drops the
waiting records below its point and frees the groups of purged heads, keeps what was sent
after its point in order, and drops a returned head below it.

The model of every interleaving (purges included): tests/property/test_ordering.py.
"""

from __future__ import annotations

from kmq.protocol.ordering import GroupOrder


def test_a_purge_drops_waiting_records_and_frees_groups_of_purged_heads():
    order = GroupOrder()
    for offset, (msg_id, group) in enumerate([("a0", b"a"), ("a1", b"a"), ("b0", b"b"), ("c0", b"c")]):
        order.offer(offset, msg_id, group, 0)
    assert sorted(order.take(2, 0)) == [(0, b"a"), (2, b"b")]  # a0, b0 in flight
    assert order.dead_lettered(2, hold=True)                   # b waits for a redrive
    # When: the queue is purged below 4 (the log's end)
    assert order.purge_below(4) == 4  # a1, c0 waiting; a0 in flight; b0 held
    # Then: nothing is left, and a late ack of the purged head is ignored
    assert len(order) == 0 and order.waiting_records() == 0 and order.in_flight() == {}
    assert order.gauges(10) == {"groups_waiting": 0, "groups_in_flight": 0, "groups_held": 0, "oldest_head_age_ms": 0}
    assert not order.settled(0)
    # and the groups' next sends go out at once
    order.offer(4, "a2", b"a", 5)
    order.offer(5, "b1", b"b", 5)
    assert sorted(order.take(5, 5)) == [(4, b"a"), (5, b"b")]


def test_a_purge_keeps_what_was_sent_after_its_point_in_order():
    order = GroupOrder()
    order.offer(0, "a0", b"a", 0)
    order.offer(1, "a1", b"a", 0)  # sent after the purge point (1), read before the purge
    order.offer(2, "a2", b"a", 0)
    order.offer(3, "b0", b"b", 0)
    assert sorted(order.take(5, 0)) == [(0, b"a"), (3, b"b")]
    assert order.purge_below(1) == 1   # only a0, the head in flight
    assert order.in_flight() == {3: b"b"}  # b0 is above the point: still in flight
    assert order.take(5, 0) == [(1, b"a")]
    assert order.take(5, 0) == []      # a2 waits for a1
    assert order.settled(1) and order.take(5, 0) == [(2, b"a")]


def test_a_purge_drops_a_returned_head_below_its_point():
    order = GroupOrder()
    order.offer(0, "a0", b"a", 0)
    order.offer(1, "a1", b"a", 0)
    assert order.take(1, 0) == [(0, b"a")]
    assert order.offer(2, "a0", b"a", 0) == "returned"  # republished (released), read
    assert order.purge_below(3) == 2   # the returned a0 and a1
    assert len(order) == 0
    order.offer(3, "a2", b"a", 0)
    assert order.take(5, 0) == [(3, b"a")]
