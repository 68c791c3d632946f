"""The state machine under hostile markers: it refuses, never raises, and its work stays bounded."""

from __future__ import annotations

from kmq.protocol import entries as E
from kmq.protocol import markers as M
from kmq.protocol.entries import Cause
from kmq.protocol.limits import MAX_GROUPS_PER_RANGE
from kmq.protocol.outcomes import Outcome
from kmq.protocol.state import Expiry, PartitionState
from kmq.protocol.store import MemoryStore

R = M.RangeRef("orders", 0, 100, 110)


def test_a_release_with_the_largest_delay_is_refused_not_raised():
    s = PartitionState(MemoryStore())
    s.apply(M.Start(R, 1000, R.full_mask), 0)
    before = dict(s.store.entries)
    applied = s.apply(M.Release(R, 1, 2**63 - 1), 10)  # struct.error before the limits
    assert applied.what == Outcome.MALFORMED_MARKER and "MAX_DELAY_MS" in applied.detail
    assert s.store.entries == before


def test_markers_with_an_invalid_queue_name_add_no_counter_entry():
    s = PartitionState(MemoryStore())
    applied = s.apply(M.Purge("bad name with spaces"), 0)
    assert applied.queue == "" and applied.what == Outcome.MALFORMED_MARKER


def test_one_huge_range_comes_due_in_slices_of_the_batch_limit_each_offset_once():
    wide = M.RangeRef("orders", 0, 0, M.MAX_RANGE_LEN)
    s = PartitionState(MemoryStore())
    s.apply(M.Start(wide, 1000, wide.full_mask), 0)
    s.apply(M.Reject(wide, 0b1010, "bad"), 1)
    seen: list[int] = []
    slices = 0
    while due := s.due(10**6, limit=1000):
        assert sum(d.count for d in due) <= 1000
        for d in due:
            seen += M.mask_offsets(d.range.start, d.mask)
        s.settle(due)
        slices += 1
    assert sorted(seen) == list(range(M.MAX_RANGE_LEN))
    assert slices == -(-M.MAX_RANGE_LEN // 1000)


def test_distinct_deadlines_beyond_the_group_limit_join_a_later_group_never_an_earlier_one():
    wide = M.RangeRef("orders", 0, 0, 4096)
    s = PartitionState(MemoryStore())
    s.apply(M.Start(wide, 10**6, wide.full_mask), 0)
    asked = {}
    for i in range(2000):  # each offset its own deadline
        s.apply(M.Extend(wide, 1 << i, 1000 + 7 * i), 0)
        asked[i] = 1000 + 7 * i
    entry = E.decode_inflight(s.store.entries[E.range_key(wide)])
    assert len(entry.groups) <= MAX_GROUPS_PER_RANGE + len(Cause)
    for g in entry.groups:
        for off in M.mask_offsets(0, g.mask):
            assert g.deadline_ms >= asked.get(off, 10**6)
    # Every offset still comes due, once.
    due = s.due(10**7)
    assert sorted(o for d in due for o in M.mask_offsets(0, d.mask)) == list(range(4096))


def test_a_record_past_the_work_budget_has_its_remaining_markers_refused():
    s = PartitionState(MemoryStore(), work_budget_bytes=2000)
    ranges = [M.RangeRef("orders", 0, 10 * i, 10 * i + 10) for i in range(100)]
    s.begin_record()
    results = [s.apply(M.Start(r, 1000, r.full_mask), 0) for r in ranges]
    refused = [a for a in results if a.what == Outcome.MALFORMED_MARKER]
    assert refused and "MAX_RECORD_WORK_BYTES" in refused[0].detail
    assert s.work_bytes <= 2000 + 200  # plus the one marker that crossed it
    s.begin_record()  # the next record has its own budget
    assert s.apply(M.Start(ranges[-1], 1000, 1), 0).what == Outcome.STARTED


def test_one_due_list_stops_at_the_work_budget_and_the_rest_stays_due():
    s = PartitionState(MemoryStore(), work_budget_bytes=1000)
    for i in range(100):
        r = M.RangeRef("orders", 0, 10 * i, 10 * i + 10)
        s.apply(M.Start(r, 1000, r.full_mask), 0)
        s.begin_record()
    first = s.due(10**6)
    assert 0 < len(first) < 100 and all(isinstance(d, Expiry) for d in first)
    s.settle(first)
    total = len(first)
    while due := s.due(10**6):
        total += len(due)
        s.settle(due)
    assert total == 100
