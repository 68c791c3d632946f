"""Property tests of the tracker's state machine against a per-offset reference model.

The model is the obvious, slow definition: each offset has (pending, deadline,
cause). Hypothesis drives random markers and ticks through both and checks
that the machine dues exactly what the model says, so:
- an acked offset is never redelivered;
- every unacked offset is redelivered or dead-lettered exactly once per deadline;
- a shared queue's ACQUIRE acts as a START only for the current dispatcher epoch (BEGIN),
  and every START and ACQUIRE moves its queue partition's cursor up, never down;
- a marker for a range the machine no longer holds is ``late`` if the range was handed out
  (acked or taken back since), ``unknown-range`` if it never was, and changes nothing.
"""

from __future__ import annotations

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmq.protocol.entries import Cause
from kmq.protocol.markers import Ack, Acquire, Begin, Extend, RangeRef, Reject, Release, Start
from kmq.protocol.state import Expiry, PartitionState
from kmq.protocol.store import MemoryStore

RANGES = [RangeRef("a", 0, 0, 8), RangeRef("a", 0, 8, 20), RangeRef("b", 1, 0, 5)]


class TrackerVsModel(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.machine = PartitionState(MemoryStore())
        self.now = 1_000_000
        self.model: dict[tuple[int, int], list] = {}  # (range idx, rel) -> [deadline, cause, reason]
        self.acked: set[tuple[int, int]] = set()
        self.expired: list[tuple[int, int]] = []
        self.epoch = 0
        self.cursors: dict[tuple[str, int], int] = {}

    def _rels(self, i, mask):
        return [rel for rel in range(RANGES[i].length) if mask >> rel & 1]

    @rule(i=st.sampled_from(range(3)), data=st.data(), timeout=st.integers(0, 5000))
    def start(self, i, data, timeout):
        r = RANGES[i]
        mask = data.draw(st.integers(1, r.full_mask))
        self.machine.apply(Start(r, timeout, mask), self.now)
        self._started(i, mask, timeout)

    def _started(self, i, mask, timeout):
        r = RANGES[i]
        self.cursors[(r.queue, r.partition)] = max(self.cursors.get((r.queue, r.partition), 0), r.end)
        for key in [k for k in self.model if k[0] == i]:
            del self.model[key]
        for rel in self._rels(i, mask):
            self.model[(i, rel)] = [self.now + timeout, Cause.TIMEOUT, ""]
            self.acked.discard((i, rel))

    @rule(epoch=st.integers(1, 3))
    def begin(self, epoch):
        self.machine.apply(Begin(epoch), self.now)
        self.epoch = epoch

    @rule(i=st.sampled_from(range(3)), data=st.data(), timeout=st.integers(0, 5000),
          epoch=st.integers(0, 3))
    def acquire(self, i, data, timeout, epoch):
        r = RANGES[i]
        mask = data.draw(st.integers(1, r.full_mask))
        applied = self.machine.apply(Acquire(r, timeout, mask, epoch), self.now)
        if epoch != self.epoch:
            assert applied.what == "fenced"  # a dispatcher that lost its partition
            return
        self._started(i, mask, timeout)

    def _check_not_held(self, i, applied):
        """A marker for range ``i``: when the model holds none of its offsets, the machine says
        why (late: handed out before; unknown-range: never) and changes nothing."""
        if any(k[0] == i for k in self.model):
            assert applied is None or applied.what not in ("late", "unknown-range"), applied
            return
        r = RANGES[i]
        handed = self.cursors.get((r.queue, r.partition), 0) >= r.end
        assert applied.what == ("late" if handed else "unknown-range"), (applied, handed)

    @rule(i=st.sampled_from(range(3)), data=st.data())
    def ack(self, i, data):
        mask = data.draw(st.integers(1, RANGES[i].full_mask))
        self._check_not_held(i, self.machine.apply(Ack(RANGES[i], mask), self.now))
        for rel in self._rels(i, mask):
            if self.model.pop((i, rel), None) is not None:
                self.acked.add((i, rel))

    @rule(i=st.sampled_from(range(3)), data=st.data(), timeout=st.integers(0, 9000))
    def extend(self, i, data, timeout):
        mask = data.draw(st.integers(1, RANGES[i].full_mask))
        self._check_not_held(i, self.machine.apply(Extend(RANGES[i], mask, timeout), self.now))
        for rel in self._rels(i, mask):
            m = self.model.get((i, rel))
            if m and m[1] == Cause.TIMEOUT:
                m[0] = self.now + timeout

    @rule(i=st.sampled_from(range(3)), data=st.data(),
          delay=st.one_of(st.just(-1), st.just(0), st.integers(1, 4000)), counted=st.booleans())
    def release(self, i, data, delay, counted):
        mask = data.draw(st.integers(1, RANGES[i].full_mask))
        self._check_not_held(i, self.machine.apply(Release(RANGES[i], mask, delay, counted), self.now))
        if not counted:
            cause = Cause.RETURNED
        else:
            cause = Cause.RELEASED_BACKOFF if delay < 0 else Cause.RELEASED
        for rel in self._rels(i, mask):
            m = self.model.get((i, rel))
            if m and m[1] != Cause.REJECTED:
                m[:] = [self.now + max(0, delay), cause, ""]

    @rule(i=st.sampled_from(range(3)), data=st.data(), reason=st.sampled_from(["x", "y"]))
    def reject(self, i, data, reason):
        mask = data.draw(st.integers(1, RANGES[i].full_mask))
        self._check_not_held(i, self.machine.apply(Reject(RANGES[i], mask, reason), self.now))
        for rel in self._rels(i, mask):
            m = self.model.get((i, rel))
            if m and m[1] != Cause.REJECTED:
                m[:] = [self.now, Cause.REJECTED, reason]

    @rule(dt=st.one_of(st.just(0), st.integers(0, 6000)))
    def tick(self, dt):
        self.now += dt
        due = self.machine.due(self.now)
        got = {}
        for d in due:
            assert isinstance(d, Expiry)
            i = RANGES.index(d.range)
            for rel in self._rels(i, d.mask):
                assert (i, rel) not in got, "an offset was due twice in one tick"
                got[(i, rel)] = (d.cause, d.reason)
        want = {k: (m[1] if m[1] != Cause.TIMEOUT else Cause.TIMEOUT, m[2])
                for k, m in self.model.items() if m[0] <= self.now}
        assert got == want
        assert not (set(got) & self.acked), "an acked offset came due"
        self.machine.settle(due)
        for k in got:
            del self.model[k]
            self.expired.append(k)

    @invariant()
    def cursors_match_the_model(self):
        if hasattr(self, "machine"):
            assert self.machine.cursors() == self.cursors

    @invariant()
    def next_deadline_matches_model(self):
        if not hasattr(self, "machine"):
            return
        want = min((m[0] for m in self.model.values()), default=None)
        assert self.machine.next_deadline_ms() == want


TrackerVsModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_tracker_matches_the_model = TrackerVsModel.TestCase
