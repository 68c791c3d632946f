"""The tracker's state machine, given/when/then, with time passed in."""

from kmq.protocol import handed as H
from kmq.protocol.entries import Cause, cursor_key
from kmq.protocol.markers import Ack, Extend, RangeRef, Reject, Release, Schedule, Start, Tick
from kmq.protocol.state import DueSend, Expiry, PartitionState
from kmq.protocol.store import MemoryStore

R = RangeRef("orders", 0, 100, 110)
ALL = R.full_mask


def fresh() -> PartitionState:
    return PartitionState(MemoryStore())


def offsets(due) -> dict:
    out = {}
    for d in due:
        if isinstance(d, Expiry):
            for i in range(d.range.length):
                if d.mask >> i & 1:
                    out[d.range.start + i] = d.cause
    return out


def test_nothing_is_due_before_the_visibility_timeout():
    s = fresh()
    s.apply(Start(R, 1000, ALL), now_ms=5000)
    assert s.due(5999) == []
    assert s.next_deadline_ms() == 6000


def test_unacked_offsets_come_due_at_the_deadline_once():
    s = fresh()
    s.apply(Start(R, 1000, ALL), now_ms=5000)
    s.apply(Ack(R, 0b1111111110), now_ms=5100)
    due = s.due(6000)
    assert offsets(due) == {100: Cause.TIMEOUT}
    s.settle(due)
    assert s.due(10**12) == []
    assert s.next_deadline_ms() is None


def test_a_fully_acked_range_leaves_no_state_but_the_queue_partitions_cursor():
    store = MemoryStore()
    s = PartitionState(store)
    s.apply(Start(R, 1000, ALL), now_ms=0)
    s.apply(Ack(R, 0b1111), now_ms=1)
    s.apply(Ack(R, ALL & ~0b1111), now_ms=2)
    assert list(store.entries) == [cursor_key(R.queue, R.partition)] and store.index == []
    assert s.cursors() == {(R.queue, R.partition): R.end}


def test_extend_moves_the_deadline_of_the_offsets_it_names():
    s = fresh()
    s.apply(Start(R, 1000, ALL), now_ms=0)
    s.apply(Extend(R, 0b11, 5000), now_ms=500)
    assert set(offsets(s.due(1000))) == set(range(102, 110))
    s.settle(s.due(1000))
    assert s.due(5499) == []
    assert set(offsets(s.due(5500))) == {100, 101}


def test_extending_every_pending_offset_keeps_a_single_group():
    s = fresh()
    s.apply(Start(R, 1000, ALL), now_ms=0)
    for t in range(1, 50):
        s.apply(Extend(R, ALL, 1000), now_ms=t * 100)
    from kmq.protocol.entries import decode_inflight, range_key
    assert len(decode_inflight(s.store.get(range_key(R))).groups) == 1


def test_release_with_delay_comes_due_after_the_delay_as_released():
    s = fresh()
    s.apply(Start(R, 30000, 0b1), now_ms=0)
    s.apply(Release(R, 0b1, 2000), now_ms=100)
    assert s.due(2099) == []
    assert offsets(s.due(2100)) == {100: Cause.RELEASED}


def test_reject_is_due_at_once_with_its_reason():
    s = fresh()
    s.apply(Start(R, 30000, 0b11), now_ms=0)
    s.apply(Reject(R, 0b10, "bad payload"), now_ms=10)
    (d,) = s.due(10)
    assert d.cause == Cause.REJECTED and d.reason == "bad payload" and d.mask == 0b10


def test_a_rejected_offset_cannot_be_extended_or_released_back():
    s = fresh()
    s.apply(Start(R, 30000, 0b1), now_ms=0)
    s.apply(Reject(R, 0b1, "no"), now_ms=1)
    s.apply(Extend(R, 0b1, 99999), now_ms=2)
    s.apply(Release(R, 0b1, 99999), now_ms=3)
    assert offsets(s.due(3)) == {100: Cause.REJECTED}


def test_an_uncounted_release_is_due_as_returned():
    s = fresh()
    s.apply(Start(R, 30000, 0b1), now_ms=0)
    s.apply(Release(R, 0b1, 0, counted=False), now_ms=5)
    assert offsets(s.due(5)) == {100: Cause.RETURNED}


def test_acks_for_unknown_ranges_are_counted_not_fatal():
    s = fresh()
    applied = s.apply(Ack(R, 0b1), now_ms=0)
    assert applied.what == "unknown-range" and applied.count == 1


def test_a_settle_after_the_visibility_timeout_took_the_range_back_is_late_not_set_aside():
    # kmq dev's demo: a consumer releases held messages after the tracker redelivered them.
    s = fresh()
    s.apply(Start(R, 1500, 0b11), now_ms=0)
    s.settle(s.due(1500))
    for late in (Release(R, 0b11, 0), Extend(R, 0b1, 1500), Ack(R, 0b10), Reject(R, 0b1, "x")):
        applied = s.apply(late, now_ms=1600)
        assert (applied.what, applied.count) == ("late", late.mask.bit_count())
    assert s.due(10**9) == []  # nothing came back
    # The next range of the same partition, never handed out, is still unknown.
    ahead = RangeRef("orders", 0, 110, 120)
    assert s.apply(Ack(ahead, 0b1), now_ms=1600).what == "unknown-range"


def test_a_repeated_start_is_a_fresh_delivery_of_the_same_range():
    store = MemoryStore()
    s = PartitionState(store)
    s.apply(Start(R, 1000, ALL), now_ms=0)
    s.apply(Start(R, 1000, ALL), now_ms=500)
    assert s.due(1000) == []
    assert len(offsets(s.due(1500))) == 10
    assert len(store.index) == 1


def test_due_respects_its_limit_in_deadline_order():
    s = fresh()
    for i in range(5):
        r = RangeRef("q", 0, i * 10, i * 10 + 10)
        s.apply(Start(r, 100 + i, r.full_mask), now_ms=0)
    due = s.due(10**6, limit=20)
    assert [d.range.start for d in due] == [0, 10]


def test_scheduled_sends_come_due_at_their_time_once():
    s = fresh()
    s.apply(Schedule("q", "m1", 5000, b"v", ()), now_ms=0)
    s.apply(Schedule("q", "m1", 5000, b"v", ()), now_ms=1)  # duplicate send
    assert s.due(4999) == []
    due = s.due(5000)
    assert due == [DueSend("q", "m1", 5000, b"v", ())]
    s.settle(due)
    assert s.due(10**9) == []


def test_ticks_do_not_change_state():
    s = fresh()
    assert s.apply(Tick(123), now_ms=0) is None


def test_a_purge_forgets_every_range_and_schedule_of_its_queue_only():
    from kmq.protocol.markers import Purge
    store = MemoryStore()
    s = PartitionState(store)
    other = RangeRef("orders-2", 0, 0, 5)
    s.apply(Start(R, 1000, ALL), now_ms=0)
    s.apply(Start(RangeRef("orders", 1, 50, 60), 1000, 0b1), now_ms=0)
    s.apply(Schedule("orders", "m1", 5000, b"v", ()), now_ms=0)
    s.apply(Start(other, 1000, other.full_mask), now_ms=0)
    applied = s.apply(Purge("orders"), now_ms=1)
    assert applied.what == "purged" and applied.count == 10 + 1 + 1
    assert [d.range for d in s.due(10**9)] == [other]
    assert len(store.index) == 1


def test_floor_sets_an_ordered_queues_cursor_back_and_is_fenced_by_epoch():
    from kmq.protocol import markers as M
    from kmq.protocol.state import PartitionState
    from kmq.protocol.store import MemoryStore
    s = PartitionState(MemoryStore())
    s.apply(M.Begin(7), 0)
    s.apply(M.Acquire(M.RangeRef("q", 0, 10, 20), 1000, (1 << 10) - 1, 7), 0)
    assert s.cursors()[("q", 0)] == 20
    s.apply(M.Floor("q", 0, 12, 7), 0)
    assert s.cursors()[("q", 0)] == 12   # a successor reads the held-back records again
    assert s.apply(M.Floor("q", 0, 0, 8), 0).what.value == "fenced"
    assert s.cursors()[("q", 0)] == 12


def test_ordered_acquires_are_kept_as_handed_out_above_the_floor_for_a_successor():
    from kmq.protocol import markers as M
    from kmq.protocol.state import PartitionState
    from kmq.protocol.store import MemoryStore
    s = PartitionState(MemoryStore())
    s.apply(M.Begin(7), 0)
    s.apply(M.Acquire(M.RangeRef("q", 0, 10, 20), 1000, 0b1000000101, 7, True), 0)  # 10, 12, 19
    s.apply(M.Acquire(M.RangeRef("u", 0, 10, 20), 1000, 0b1, 7), 0)   # unordered: not kept
    s.apply(M.Floor("q", 0, 11, 7), 0)         # 10 is below the floor now: its bit goes
    s.apply(M.Ack(M.RangeRef("q", 0, 10, 20), 0b100), 0)   # 12 settled
    (h, pending), = s.handed_outs().values()
    assert (h.offsets(), pending) == ([12, 19], {19})
    assert [(o, H.status(h, pending, o)) for o in (11, 12, 19)] == [
        (11, H.WAITING), (12, H.SETTLED), (19, H.IN_FLIGHT)]
    assert s.apply(M.Acquire(M.RangeRef("q", 0, 30, 31), 1000, 1, 8, True), 0).what.value == "fenced"
    assert s.handed_out("q", 0).offsets() == [12, 19]



def test_a_settle_for_an_ordered_range_above_a_lowered_floor_is_late_not_unknown():
    # A FLOOR sets an ordered queue's cursor back to its oldest waiting record; a second
    # ACK of a range handed out above it was set aside as unknown-range.
    from kmq.protocol import markers as M
    from kmq.protocol.state import PartitionState
    from kmq.protocol.store import MemoryStore
    s = PartitionState(MemoryStore())
    s.apply(M.Begin(7), 0)
    s.apply(M.Acquire(M.RangeRef("q", 0, 5, 6), 1000, 1, 7, True), 0)   # a head, in hand
    s.apply(M.Acquire(M.RangeRef("q", 0, 7, 8), 1000, 1, 7, True), 0)   # another group's
    s.apply(M.Floor("q", 0, 6, 7), 0)                                     # 6 waits
    assert s.apply(M.Ack(M.RangeRef("q", 0, 7, 8), 1), 0).what.value == "acked"
    assert s.apply(M.Ack(M.RangeRef("q", 0, 7, 8), 1), 0).what.value == "late"
    assert s.apply(M.Ack(M.RangeRef("q", 0, 8, 9), 1), 0).what.value == "unknown-range"  # never
