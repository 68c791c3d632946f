"""The markers agent's own rules, at its seams: what a record becomes, not how it arrives.

One marker's error sets that marker aside and the rest of its record is applied
(it stopped the agent); a name that only set-aside markers bring adds no queue
to the views (any name fitting QUEUE_NAME_RE got a permanent counter entry,
listed as a queue). The redeliverer and dispatcher are fakes: the seam is their calls.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from agents import track_markers
from agents.partitions import OwnedPartition, OwnedPartitions
from agents.redeliver import Execution
from kmq.protocol.clock import PartitionClock
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.outcomes import Outcome
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore
from kmq.queue_config import QueueConfig
from kmq.stats.gauges import GaugedStore, QueueGauges
from web.queue_scan import ScanResult
from web.queue_stats import QueueStats

R = M.RangeRef("orders", 0, 100, 110)


class FakeRedeliverer:
    def __init__(self) -> None:
        self.aside: list[tuple[bytes, bytes, dict]] = []

    def set_aside(self, key: bytes, data: bytes, headers: list) -> None:
        self.aside.append((key, data, dict(headers)))


class FailingDispatcher:
    """A dispatcher whose CREDIT handling raises (any bug past the codec's checks)."""

    def on_credit(self, partition: int, credit: M.Credit) -> None:
        raise RuntimeError("dispatcher bug")


def _runtime() -> SimpleNamespace:
    return SimpleNamespace(redeliverer=FakeRedeliverer(), dispatcher=FailingDispatcher(),
                           config=lambda queue: QueueConfig())


def _partition() -> OwnedPartition:
    gauges = QueueGauges()
    return OwnedPartition(0, PartitionState(GaugedStore(MemoryStore(), gauges), 0), gauges=gauges,
                          gauges_built=True)


def _apply(rt, part: OwnedPartition, markers: list[M.Marker], offset: int) -> None:
    msg = SimpleNamespace(partition=part.partition, offset=offset, timestamp=None, timestamp_type=0)
    event = SimpleNamespace(message=msg, value=marker_codec.encode(markers))
    asyncio.run(track_markers._apply(rt, part, event))


def test_an_error_in_one_marker_sets_it_aside_and_the_rest_of_the_record_is_applied():
    rt, part = _runtime(), _partition()
    part.state.apply(M.Start(R, 60_000, R.full_mask), part.clock.now_ms())
    credit = M.Credit("orders", "c-1", 0, 0, 0, 10, 30_000, 30_000)
    _apply(rt, part, [credit, M.Ack(R, 0b111)], offset=7)  # raised out of the agent before
    assert part.malformed == 1
    [(key, data, headers)] = rt.redeliverer.aside
    assert key == b"!malformed-markers" and marker_codec.decode(data) == [credit]
    assert b"RuntimeError: dispatcher bug" in headers["kmq.dlq.detail"]
    assert headers["kmq.source"].endswith(b":0:7")
    assert part.counters[("orders", Outcome.ACKED)] == 3  # the marker after it was applied


def test_names_only_set_aside_markers_bring_add_no_queue_and_are_still_counted():
    rt, part = _runtime(), _partition()
    owned = OwnedPartitions(1)
    owned[0] = part
    part.state.apply(M.Start(R, 60_000, R.full_mask), part.clock.now_ms())
    ghosts = [M.Ack(M.RangeRef(f"ghost-{i}", 0, 0, 1), 1) for i in range(1000)]  # valid names, no range
    _apply(rt, part, ghosts, offset=1)
    never = M.RangeRef(R.queue, R.partition, R.end + 10, R.end + 11)  # beyond what was handed out
    # A known queue's duplicate ack is late, its never-started range set aside: both keep its name.
    _apply(rt, part, [M.Ack(R, R.full_mask), M.Ack(R, 1), M.Ack(never, 1)], offset=2)
    assert {q for q, _ in part.counters} == {"orders"}
    assert part.counters[("orders", Outcome.LATE)] == 1
    assert part.counters[("orders", Outcome.UNKNOWN_RANGE)] == 1
    assert owned.set_aside()[Outcome.UNKNOWN_RANGE] == 1001
    stats = QueueStats(owned, SimpleNamespace(result=ScanResult()), lambda: None, 1)
    assert set(stats.queues()) == {"orders"}  # the admin's queue list held every ghost name
    assert not any(q.startswith("ghost-") for q, _ in part.rates.keys())


class RecordingRedeliverer(FakeRedeliverer):
    """Records what a TICK found due; writes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.executed: list[list] = []

    async def flush_set_aside(self) -> None:
        pass

    async def end_offsets(self, queues):
        return {}

    async def attempt_points(self, ranges):
        return {r: (0, 0) for r in ranges}

    async def execute(self, due, now_ms, sends, ranges):
        self.executed.append(due)
        return Execution()


def test_an_ack_right_behind_a_tick_in_the_log_wins_however_late_the_tick_is_read():
    """The log decides between an ack and a deadline: a TICK proposed before the deadline
    expires nothing, even when a loaded worker reads it after the deadline; the ack that
    follows it in the log is applied first. (Run at the clock's time when read within a
    second, such a TICK redelivered the message, which then came again after its ack.)"""
    mono = [0.0]
    rt, part = _runtime(), _partition()
    rt.redeliverer = RecordingRedeliverer()
    part.clock = PartitionClock(start_ms=1_000_000, mono_s=lambda: mono[0])
    part.state.apply(M.Start(R, 4000, R.full_mask), part.clock.now_ms())  # due at 1_004_000
    mono[0] = 4.5  # the worker reads the TICK 500 ms after the deadline
    _apply(rt, part, [M.Tick(1_003_500)], offset=1)
    assert rt.redeliverer.executed == [] and part.state.next_deadline_ms() == 1_004_000
    _apply(rt, part, [M.Ack(R, R.full_mask)], offset=2)
    mono[0] = 5.0
    _apply(rt, part, [M.Tick(1_005_000)], offset=3)
    assert rt.redeliverer.executed == [] and part.state.next_deadline_ms() is None


def test_a_tick_stamped_at_the_deadline_expires_what_is_due():
    """The other side of the rule above: a TICK stamped past a deadline acts on it."""
    mono = [0.0]
    rt, part = _runtime(), _partition()
    rt.redeliverer = RecordingRedeliverer()
    part.clock = PartitionClock(start_ms=1_000_000, mono_s=lambda: mono[0])
    part.state.apply(M.Start(R, 4000, R.full_mask), part.clock.now_ms())
    mono[0] = 4.0
    _apply(rt, part, [M.Tick(1_004_000)], offset=1)
    assert len(rt.redeliverer.executed) == 1


class QuietDispatcher:
    def on_credit(self, partition: int, credit: M.Credit) -> None:
        pass

    def on_started(self, partition: int, r: M.RangeRef) -> None:
        pass


def _apply_once(rt, part: OwnedPartition, markers: list[M.Marker], offset: int) -> None:
    msg = SimpleNamespace(partition=part.partition, offset=offset, timestamp=None, timestamp_type=0)
    asyncio.run(track_markers._apply_once(rt, part, SimpleNamespace(message=msg, value=marker_codec.encode(markers))))


def test_a_record_of_acks_only_moves_no_applied_mark_and_applied_again_changes_nothing():
    # The mark costs a changelog write per record; a record of ACKs needs none (state.replay_safe).
    rt = SimpleNamespace(redeliverer=FakeRedeliverer(), dispatcher=QuietDispatcher(),
                         config=lambda queue: QueueConfig(dispatch="partition"))
    part = _partition()
    store = part.state.store
    _apply_once(rt, part, [M.Start(R, 60_000, R.full_mask)], offset=1)
    assert part.applied_upto() == 1
    writes = store.writes
    _apply_once(rt, part, [M.Ack(R, 0b11)], offset=2)
    assert part.applied_upto() == 1 and store.writes > writes  # the ACK changed the range, no mark
    entries, index = dict(store.entries), list(store.index)
    part.applied_offset = None  # a successor restored the table: it reads the mark from it
    _apply_once(rt, part, [M.Ack(R, 0b11)], offset=2)  # ... and applies the ACK record again
    assert (store.entries, store.index) == (entries, index)
    _apply_once(rt, part, [M.Credit("orders", "c-1", 0, 0, 0, 10, 30_000, 30_000)], offset=3)
    assert part.applied_upto() == 1
    _apply_once(rt, part, [M.Ack(R, 0b100), M.Extend(R, 0b1000, 5_000)], offset=4)
    assert part.applied_upto() == 4  # an EXTEND applied again would move its deadline: marked
    # The whole range acked: its entry goes.
    _apply_once(rt, part, [M.Ack(R, R.full_mask)], offset=5)
    assert not any(k.startswith(b"R") for k in store.entries)


class EndedDispatcher(QuietDispatcher):
    """Records what the markers agent tells an ordered queue's groups."""

    def __init__(self) -> None:
        self.ended: list[list[int]] = []

    def on_ended(self, markers_partition: int, queue: str, partition: int, offsets: list[int],
                 dead_lettered: bool) -> None:
        assert not dead_lettered
        self.ended.append(offsets)


def test_only_offsets_an_ack_settled_let_an_ordered_queues_groups_go_on():
    # An ACK the table did not hold (late: taken back before; or of a range never handed
    # out, as a forged or mis-framed one) freed the groups of its offsets (any that were
    # still in flight), so a group's next message went out while its head was in hand.
    rt = SimpleNamespace(redeliverer=FakeRedeliverer(), dispatcher=EndedDispatcher(),
                         config=lambda queue: QueueConfig(ordering="group"))
    part = _partition()
    part.state.apply(M.Acquire(R, 60_000, 0b111, part.state.epoch(), True), part.clock.now_ms())
    _apply(rt, part, [M.Ack(M.RangeRef("orders", 0, 100, 102), 0b1)], offset=1)  # not R
    assert rt.dispatcher.ended == [] and part.counters[("orders", Outcome.LATE)] == 1
    _apply(rt, part, [M.Ack(R, 0b1)], offset=2)
    assert rt.dispatcher.ended == [[100]]
    _apply(rt, part, [M.Ack(R, 0b11)], offset=3)  # 100 again: only 101 is settled now
    assert rt.dispatcher.ended == [[100], [101]]
    _apply(rt, part, [M.Ack(R, 0b11)], offset=4)  # nothing held is settled
    assert rt.dispatcher.ended == [[100], [101]]
    _apply(rt, part, [M.Ack(M.RangeRef("orders", 0, 500, 510), 0b1)], offset=5)  # never handed out
    assert rt.dispatcher.ended == [[100], [101]]


def test_a_settle_of_a_range_whose_start_came_after_its_purge_is_late_not_set_aside():
    # An audit: a partition-mode consumer fetched, the client purged, then acked: the
    # START reached the tracker after the PURGE (another producer), was dropped whole, and
    # the 10 acks were set aside as unknown-range, as if forged; they are late.
    rt = SimpleNamespace(redeliverer=FakeRedeliverer(), dispatcher=EndedDispatcher(),
                         config=lambda queue: QueueConfig(dispatch="partition", purged_before={0: 200}))
    part = _partition()
    _apply(rt, part, [M.Start(R, 60_000, R.full_mask)], offset=1)
    _apply(rt, part, [M.Ack(R, R.full_mask)], offset=2)
    assert part.counters.get(("orders", Outcome.UNKNOWN_RANGE), 0) == 0
    assert part.counters[("orders", Outcome.LATE)] == 10
    _apply(rt, part, [M.Ack(M.RangeRef("orders", 0, 500, 510), 0b1)], offset=3)  # never handed out
    assert part.counters[("orders", Outcome.UNKNOWN_RANGE)] == 1


def _stamped(rt, part: OwnedPartition, markers: list[M.Marker], offset: int, stamp_ms: int) -> None:
    """A record stamped by its writer's clock (CreateTime: not trusted for deadlines)."""
    msg = SimpleNamespace(partition=part.partition, offset=offset, timestamp=stamp_ms / 1000, timestamp_type=1)
    asyncio.run(track_markers._apply(rt, part, SimpleNamespace(message=msg, value=marker_codec.encode(markers))))


def test_a_start_written_before_a_switch_to_shared_counts_when_it_is_read_late():
    """A partition-mode group's STARTs, read by a worker that took the markers partition over
    seconds after the queue was switched to shared mode (a rebalance after a SIGKILL), were
    judged at the time read: dropped as a shared queue's, the cursor stayed below them and the
    dispatcher handed their records out again (the mode-switch audit: 290 acked twice)."""
    switch_ms = 1_000_000
    rt, part = _runtime(), _partition()
    rt.config = lambda queue: QueueConfig(dispatch="shared", dispatch_since_ms=switch_ms)
    part.clock = PartitionClock(start_ms=switch_ms + 10_000, mono_s=lambda: 0.0)  # read 10 s after
    part.owned_since_ms = switch_ms + 9_000  # the worker took the partition over 9 s after
    _stamped(rt, part, [M.Start(R, 60_000, R.full_mask)], offset=1, stamp_ms=switch_ms - 2_000)
    assert part.state.cursors()[("orders", 0)] == R.end
    assert part.counters[("orders", Outcome.STARTED)] == 10
    # One written after the grace is a member's that missed the switch: dropped, as before.
    late = M.RangeRef("orders", 0, 110, 120)
    _stamped(rt, part, [M.Start(late, 60_000, late.full_mask)], offset=2, stamp_ms=switch_ms + 7_000)
    assert part.counters[("orders", Outcome.START_ON_SHARED)] == 10
    assert part.state.cursors()[("orders", 0)] == R.end
    # One stamped since the takeover is judged when read, whatever its stamp says (a writer's
    # clock ahead of ours says nothing).
    for offset, stamp_ms in ((3, switch_ms + 10**9), (4, switch_ms + 9_500)):
        _stamped(rt, part, [M.Start(late, 60_000, late.full_mask)], offset=offset, stamp_ms=stamp_ms)
    assert part.counters[("orders", Outcome.START_ON_SHARED)] == 30
