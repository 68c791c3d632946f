"""QueueGauges follow the state machine's writes exactly: equal to a full recount after any
sequence of markers, ticks and settles, and equal to a rebuild from the store."""

from __future__ import annotations

from collections import Counter

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmq.protocol import entries as E
from kmq.stats.gauges import GaugedStore, QueueGauges
from kmq.protocol.markers import Ack, Extend, Purge, RangeRef, Reject, Release, Schedule, Start
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore

RANGES = [RangeRef("a", 0, 0, 8), RangeRef("a", 0, 8, 20), RangeRef("b", 1, 0, 5)]


def recount(store: MemoryStore) -> tuple[Counter, Counter, dict[str, int]]:
    in_flight: Counter = Counter()
    oldest: dict[str, int] = {}
    for k, v in store.entries.items():
        if E.is_range_key(k):
            e = E.decode_inflight(v)
            q = E.decode_range_key(k).queue
            in_flight[q] += e.pending.bit_count()
            oldest[q] = min(oldest.get(q, e.started_ms), e.started_ms)
    scheduled = Counter(E.decode_schedule_key(E.decode_index_key(k)[1])[0]
                        for k in store.index if E.decode_index_key(k)[1][:1] == b"S")
    return +in_flight, +scheduled, oldest


class GaugesVsRecount(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.store = MemoryStore()
        self.gauges = QueueGauges()
        self.machine = PartitionState(GaugedStore(self.store, self.gauges))
        self.now = 1_000_000
        self.ids = 0

    @rule(i=st.sampled_from(range(3)), data=st.data(), timeout=st.integers(0, 5000))
    def start(self, i, data, timeout):
        self.machine.apply(Start(RANGES[i], timeout, data.draw(st.integers(1, RANGES[i].full_mask))), self.now)

    @rule(i=st.sampled_from(range(3)), data=st.data(), kind=st.sampled_from(["ack", "ext", "rel", "rej"]))
    def verb(self, i, data, kind):
        r = RANGES[i]
        mask = data.draw(st.integers(1, r.full_mask))
        marker = {"ack": Ack(r, mask), "ext": Extend(r, mask, 3000), "rel": Release(r, mask, 100),
                  "rej": Reject(r, mask, "bad")}[kind]
        self.machine.apply(marker, self.now)

    @rule(queue=st.sampled_from("ab"), delay=st.integers(0, 4000))
    def schedule(self, queue, delay):
        self.ids += 1
        m = Schedule(queue, f"id{self.ids}", self.now + delay, b"v", ())
        self.machine.apply(m, self.now)
        self.machine.apply(m, self.now)  # a duplicate is kept once

    @rule(queue=st.sampled_from("ab"))
    def purge(self, queue):
        self.machine.apply(Purge(queue), self.now)

    @rule(step=st.integers(0, 3000), defer=st.booleans())
    def tick(self, step, defer):
        self.now += step
        due = self.machine.due(self.now)
        deferred = {}
        if defer:
            for d in due:
                if hasattr(d, "range"):
                    deferred.setdefault(d.range, []).append((d.mask, self.now + 500))
        self.machine.settle(due, deferred)

    @invariant()
    def gauges_equal_a_recount(self):
        in_flight, scheduled, oldest = recount(self.store)
        assert +self.gauges.in_flight == in_flight
        assert +self.gauges.scheduled == scheduled
        for q in ("a", "b"):
            assert self.gauges.oldest_started_ms(q) == oldest.get(q)
        rebuilt = QueueGauges()
        rebuilt.rebuild(list(self.store.entries.items()) + [(k, b"\x01") for k in self.store.index])
        assert +rebuilt.in_flight == in_flight and +rebuilt.scheduled == scheduled


TestGaugesVsRecount = GaugesVsRecount.TestCase
TestGaugesVsRecount.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_start_watermark_is_the_highest_range_end_per_queue_partition():
    g = QueueGauges()
    m = PartitionState(GaugedStore(MemoryStore(), g))
    m.apply(Start(RangeRef("a", 3, 0, 10), 1000, 0b11), 5)
    m.apply(Start(RangeRef("a", 3, 10, 25), 1000, 0b1), 5)
    m.apply(Ack(RangeRef("a", 3, 10, 25), 0b1), 6)  # settled ranges leave the table, not the mark
    assert g.started_upto[("a", 3)] == 25


def test_a_rebuilt_worker_knows_where_consumers_got_to_from_the_table_cursors():
    # A restart or takeover: every range was settled before, so no range entry is left to
    # say where the queue's consumers got to; the cursor keys do (the depth scan starts
    # there, not at the log start: a drained queue showed its whole log as depth).
    store = MemoryStore()
    m = PartitionState(GaugedStore(store, QueueGauges()))
    for r in (RangeRef("a", 3, 0, 10), RangeRef("a", 3, 10, 25), RangeRef("b", 1, 4, 9)):
        m.apply(Start(r, 1000, r.full_mask), 5)
        m.apply(Ack(r, r.full_mask), 6)
    assert not any(E.is_range_key(k) for k in store.entries)
    successor = QueueGauges()
    successor.rebuild(list(store.entries.items()))
    assert successor.started_upto == {("a", 3): 25, ("b", 1): 9}
