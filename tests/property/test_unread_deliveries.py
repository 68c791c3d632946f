"""Deliveries a live consumer has not read yet are kept invisible by its dispatcher
(kmq.protocol.dispatch, ``Roster.extensions``): against a model of the tracker's deadlines,
with time passed in."""

from __future__ import annotations

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmq.protocol.dispatch import Roster, extend_every_ms
from kmq.protocol.markers import Credit, RangeRef

CHECK_MS = 50  # the dispatcher looks for extensions due this often (agents.dispatch.unread)


def credit(seq: int, now_free: int = 10, lease_ms: int = 5000, timeout_ms: int = 1000, epoch: int = 3) -> Credit:
    return Credit("q", "c", 0, epoch, seq, now_free, lease_ms, timeout_ms)


class UnreadVsTracker(RuleBasedStateMachine):
    """One consumer, its dispatcher's roster, and each delivery's deadline at the tracker."""

    @initialize(timeout_ms=st.integers(200, 120_000))
    def setup(self, timeout_ms):
        self.timeout_ms = timeout_ms
        self.roster = Roster(epoch=3)
        self.now = 0
        self.lease_until = 5000
        self.roster.credit(credit(0, timeout_ms=timeout_ms), self.now)
        self.deadline: dict[int, int] = {}  # seq -> the tracker's deadline of its entry
        self.range_seq: dict[RangeRef, int] = {}
        self.read = 0       # deliveries the consumer read, in order
        self.confirmed = 0  # the seq its last CREDIT named

    @rule(k=st.integers(1, 5))
    def dispatch(self, k):
        slot = self.roster.slots.get("c")
        if slot is None or slot.available < k:
            return
        seq = self.roster.sent(slot, k)
        ref = RangeRef("q", 0, seq * 100, seq * 100 + k)
        self.roster.note(slot, seq, ref, ref.full_mask, self.now)
        self.deadline[seq] = self.now + self.timeout_ms  # the ACQUIRE, applied at once
        self.range_seq[ref] = seq

    @rule()
    def consumer_reads_one(self):
        if self.read < max(self.deadline, default=0):
            self.read += 1

    @rule()
    def consumer_asks(self):  # its heartbeat names what it read; the lease goes on
        self.roster.credit(credit(self.read, timeout_ms=self.timeout_ms), self.now)
        self.confirmed = self.read
        self.lease_until = self.now + 5000

    @rule(dt=st.integers(1, CHECK_MS))
    def time_passes(self, dt):
        self.now += dt
        for e in self.roster.extensions(self.now):
            seq = self.range_seq[e.range]
            assert seq > self.confirmed, "a delivery the consumer said it read was extended"
            assert self.now < self.lease_until, "extended for a consumer whose lease ran out"
            assert e.mask == e.range.full_mask and e.timeout_ms == self.timeout_ms
            self.deadline[seq] = self.now + e.timeout_ms

    @invariant()
    def unread_deliveries_of_a_live_consumer_never_time_out(self):
        if not hasattr(self, "roster") or self.now >= self.lease_until:
            return
        for seq, deadline in self.deadline.items():
            if seq > self.confirmed:
                assert deadline > self.now, f"delivery {seq} timed out unread at {self.now} ms"


UnreadVsTracker.TestCase.settings = settings(max_examples=200, stateful_step_count=80, deadline=None)
test_unread_deliveries_are_kept_invisible = UnreadVsTracker.TestCase


def test_a_delivery_is_extended_every_quarter_timeout_until_the_consumer_says_it_read_it():
    r = Roster(epoch=3)
    slot = r.credit(credit(0, timeout_ms=1000), now_ms=0)
    seq = r.sent(slot, 2)
    ref = RangeRef("q", 0, 10, 12)
    r.note(slot, seq, ref, 0b11, now_ms=0)
    assert r.extensions(249) == []
    assert [(e.range, e.mask, e.timeout_ms) for e in r.extensions(250)] == [(ref, 0b11, 1000)]
    assert r.extensions(499) == [] and len(r.extensions(500)) == 1
    r.credit(credit(seq, timeout_ms=1000), now_ms=600)
    assert r.extensions(10_000) == [] and slot.unread == {}


def test_no_extension_once_the_lease_ran_out_or_the_consumer_left():
    r = Roster(epoch=3)
    slot = r.credit(credit(0, lease_ms=1000), now_ms=0)
    r.note(slot, r.sent(slot, 1), RangeRef("q", 0, 0, 1), 1, now_ms=0)
    assert r.extensions(999) != [] and r.extensions(1000) == []
    r.credit(credit(0, lease_ms=0), now_ms=1001)
    assert r.extensions(5000) == []


def test_a_credit_of_an_earlier_epoch_confirms_nothing():
    r = Roster(epoch=3)
    slot = r.credit(credit(0), now_ms=0)
    r.note(slot, r.sent(slot, 1), RangeRef("q", 0, 0, 1), 1, now_ms=0)
    r.credit(credit(5, epoch=2), now_ms=10)
    assert len(r.extensions(300)) == 1


def test_the_interval_is_a_quarter_of_the_timeout_within_bounds():
    assert extend_every_ms(1) == 50 and extend_every_ms(1000) == 250 and extend_every_ms(10**9) == 5000
