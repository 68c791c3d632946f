"""An ordered queue's period ends: its ordering set back to "none", or partition mode
(agents.dispatch.ordered ``unorder``; agents.dispatch.give_back; docs/ordering.md,
"Changing the ordering setting").

Before, the dispatcher kept an ordered queue's groups through the periods it was not
ordered: the acks of their messages in flight no longer reached them, so an ordered
period after it waited on them (its groups stalled) and its FLOOR went back to them,
below what partition-mode groups and unordered rounds had handed out since; a successor
began there (an audit flipping a queue between partition, shared and ordered while a
tracker worker was killed every 25 s: 546 acked messages handed out again). And the
records an ordered queue kept waiting for their groups when it was switched to partition
mode stayed in the dispatcher while partition mode lasted (lost if it began anew); one
switched right after its dispatcher began anew was handed over past the first gap in what
its predecessor had handed out, and the group read what was handed out above it again."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError
from hypothesis import given, settings as hsettings, strategies as st

import agents.dispatch.give_back as give_back
from agents.dispatch.dispatcher import Dispatcher
from kmq.protocol import markers as M
from kmq.protocol import marker_codec
from kmq.protocol.dispatch import Roster, Want
from kmq.protocol.limits import MAX_RANGE_LEN
from kmq.protocol.lookahead import Lookahead
from kmq.protocol.masks import mask_offsets
from kmq.protocol.state import Cause, PartitionState
from kmq.protocol.store import MemoryStore
from kmq.queue_config import QueueConfig
from kmq.settings import Settings
from tests.unit.test_begin_after_ordered import (MP, Q, Rec, begun, drain_round, hand_over, quiet,  # noqa: F401 - a fixture
                                                 switched_to_partition, table_after_an_ordered_epoch)

ORDERED = QueueConfig(dispatch="shared", ordering="group")
UNORDERED = QueueConfig(dispatch="shared", ordering="none")
PARTITION = QueueConfig(dispatch="partition", ordering="none")


def dispatcher() -> tuple[Dispatcher, list[QueueConfig]]:
    """A dispatcher begun on an empty table; the queue's settings are ``current[0]``."""
    d = begun(PartitionState(MemoryStore(), MP), ORDERED)
    current = [ORDERED]
    d._configs = SimpleNamespace(get=lambda q: current[0], queues=lambda: [Q])
    return d, current


def round_of(d: Dispatcher, cfg: QueueConfig, offsets: range, credit: int = 20, consumer: str = "c1") -> list[int]:
    """One dispatch round of the queue's records at ``offsets`` for one consumer: the
    offsets handed out."""
    part = d._parts[MP]
    roster = part.rosters[Q] = Roster(part.epoch)
    roster.credit(M.Credit(Q, consumer, 0, 0, 0, credit, 30_000, 30_000), int(time.monotonic() * 1000))
    w = Want(Q, offsets[-1] + 1, credit, [Rec(o) for o in offsets])
    out: dict = {}
    d._take(0, {Q.encode(): w}, {Q: (part, MP, cfg)}, out, Lookahead())
    return sorted(o for b in out.get(MP, []) for o in mask_offsets(b.delivery.range.start, b.delivery.mask))


def floors(d: Dispatcher) -> list[int]:
    return [f.offset for f in d._floors.pop(MP, [])]


def unordered_round(d: Dispatcher, current: list[QueueConfig]) -> None:
    current[0] = UNORDERED  # the acks of 0 and 1 come now: the markers agent no longer passes them on
    assert round_of(d, UNORDERED, range(2, 6)) == [2, 3, 4, 5]


def partition_mode_fetch(d: Dispatcher, current: list[QueueConfig]) -> None:
    current[0] = PARTITION
    d._started(MP, M.RangeRef(Q, 0, 2, 6))  # the partition-mode group fetched 2-5


@pytest.mark.parametrize("between", [unordered_round, partition_mode_fetch])
def test_an_ordered_period_after_another_mode_starts_afresh(between):
    d, current = dispatcher()
    assert round_of(d, ORDERED, range(0, 2)) == [0, 1]  # the heads of g0 and g1, in flight
    floors(d)
    between(d, current)
    current[0] = ORDERED
    # Before: g0 and g1 still waited on 0 and 1, so nothing went out, and the period's FLOOR
    # went back to 0, below 2-5, handed out meanwhile.
    assert round_of(d, ORDERED, range(6, 10), consumer="c2") == [6, 7, 8, 9]
    written = floors(d)
    assert written and min(written) >= 6


def test_a_start_while_the_queue_is_ordered_keeps_its_groups():
    d, current = dispatcher()
    assert round_of(d, ORDERED, range(0, 2)) == [0, 1]
    d._started(MP, M.RangeRef(Q, 0, 2, 4))  # a forged or late START: the groups still wait
    assert round_of(d, ORDERED, range(2, 4), consumer="c2") == []


def test_records_waiting_for_their_group_go_to_the_tracker_at_the_handover(monkeypatch):
    d, current = dispatcher()
    assert round_of(d, ORDERED, range(0, 6), credit=1) == [0]  # 1-5 wait (g1's head: no credit)
    cfg = current[0] = QueueConfig(dispatch="partition", ordering="none", handover_pending=True)
    at, markers = hand_over(d, cfg, monkeypatch)
    assert at == {0: 6}
    acquire, release, floor = markers
    assert isinstance(acquire, M.Acquire) and acquire.ordered and acquire.epoch == d._parts[MP].epoch
    assert mask_offsets(acquire.range.start, acquire.mask) == [1, 2, 3, 4, 5]
    assert release == M.Release(acquire.range, acquire.mask, 0, counted=False)
    assert floor == M.Floor(Q, 0, 6, d._parts[MP].epoch)
    assert not d._ordered.waiting((MP, Q, 0)) and d._ordered.stats["given-back"] == 5
    # Applied, they are due at once as returned (uncounted): the tracker writes them again.
    state = PartitionState(MemoryStore(), MP)
    state.apply(M.Begin(d._parts[MP].epoch), 0)
    for m in markers:
        state.apply(m, 1000)
    (due,) = state.due(1000)
    assert due.cause == Cause.RETURNED and mask_offsets(due.range.start, due.mask) == [1, 2, 3, 4, 5]
    assert state.cursors()[(Q, 0)] == 6


def test_a_handover_with_nothing_waiting_writes_no_markers(monkeypatch):
    d, current = dispatcher()
    assert round_of(d, ORDERED, range(0, 2)) == [0, 1]
    cfg = current[0] = QueueConfig(dispatch="partition", ordering="none", handover_pending=True)
    at, markers = hand_over(d, cfg, monkeypatch)
    assert at == {0: 2} and markers == []  # the FLOOR goes past given-back records only


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3 * MAX_RANGE_LEN), min_size=0, max_size=300, unique=True))
def test_returned_covers_every_offset_once_within_range_limits(offsets):
    offsets.sort()
    units = give_back.returned(Q, 2, offsets, 7)
    markers = [m for unit in units for m in unit]
    got = []
    for acquire, release in units:
        assert isinstance(acquire, M.Acquire) and acquire.ordered and acquire.epoch == 7
        assert acquire.range.length <= MAX_RANGE_LEN and acquire.range.partition == 2
        assert release == M.Release(acquire.range, acquire.mask, 0, counted=False)
        assert acquire.range.start == mask_offsets(acquire.range.start, acquire.mask)[0]
        got += mask_offsets(acquire.range.start, acquire.mask)
    assert got == offsets
    # Written in as many records as the codec's limits need, in order, no pair split (lanes.acquire).
    records = [marker_codec.decode(value) for value in marker_codec.encode_units(units)]
    assert [m for r in records for m in r] == markers
    assert all(len(r) % 2 == 0 and isinstance(r[0], M.Acquire) for r in records)


def test_a_handover_after_a_begin_reads_again_past_gaps_in_what_went_out(monkeypatch):
    # Epoch 1 handed out 4 and 5 (4 in flight), held 6 back for its group, handed out 7 and
    # 8 (acked): FLOOR 4. Before, the successor handed over past the unbroken run from the
    # FLOOR, at 6, and the group read 7 and 8 again (acked). Now it reads to 9 first, gives
    # 6 back and hands over at 9.
    state = table_after_an_ordered_epoch(((0, [0, 1]), (2, [2, 3]), (4, [4, 5]), (7, [7, 8])))
    d, cfg = switched_to_partition(state)
    part = d._parts[MP]
    assert hand_over(d, cfg, monkeypatch) == (None, [])
    acquire, release, floor = drain_round(d, cfg, [4, 5, 6, 7, 8, 9, 10])
    assert mask_offsets(acquire.range.start, acquire.mask) == [6] and release.mask == acquire.mask
    assert floor == M.Floor(Q, 0, 9, 2) and part.cursors[(Q, 0)] == 9  # 9 and 10: the group's
    assert hand_over(d, cfg, monkeypatch) == ({0: 9}, [])
    assert d._ordered.stats["given-back"] == 1
    for m in (M.Begin(2), acquire, release, floor):
        state.apply(m, 1000)
    assert [mask_offsets(e.range.start, e.mask) for e in state.due(1000)] == [[6]]


def test_a_queue_read_again_in_rounds_hands_over_once_all_is_read(monkeypatch):
    state = PartitionState(MemoryStore(), MP)
    state.apply(M.Begin(1), 0)
    r = M.RangeRef(Q, 0, 0, 40)
    state.apply(M.Acquire(r, 30_000, M.offsets_mask(0, list(range(0, 40, 2))), 1, True), 0)
    state.apply(M.Floor(Q, 0, 0, 1), 0)
    d, cfg = switched_to_partition(state, log_end=45)
    tail = drain_round(d, cfg, list(range(0, 20)))  # a round that read only part of it
    assert mask_offsets(tail[0].range.start, tail[0].mask) == list(range(1, 20, 2))
    assert tail[-1] == M.Floor(Q, 0, 20, 2) and hand_over(d, cfg, monkeypatch) == (None, [])
    tail = drain_round(d, cfg, list(range(20, 45)))
    # The hand-outs end at 38: 39 on is the group's.
    assert mask_offsets(tail[0].range.start, tail[0].mask) == list(range(21, 39, 2))
    assert tail[-1] == M.Floor(Q, 0, 39, 2)
    assert hand_over(d, cfg, monkeypatch) == ({0: 39}, [])


def test_a_queue_purged_past_what_went_out_hands_over_without_reading(monkeypatch):
    state = PartitionState(MemoryStore(), MP)
    state.apply(M.Begin(1), 0)
    state.apply(M.Acquire(M.RangeRef(Q, 0, 0, 10), 30_000, M.offsets_mask(0, [0, 5, 9]), 1, True), 0)
    state.apply(M.Floor(Q, 0, 0, 1), 0)
    cfg = QueueConfig(dispatch="partition", ordering="none", handover_pending=True, purged_before={0: 12})
    d = begun(state, cfg)
    part = d._parts[MP]
    part.ready, part.cursors = True, state.cursors()
    wants: dict = {}
    assert give_back.drain_wants(d._ordered, d._parts, SimpleNamespace(get=lambda q: cfg), d.settings, wants) == {}
    assert wants == {}  # nothing to read again: the handover is not held up waiting for a read
    at, _ = hand_over(d, cfg, monkeypatch)
    assert at == {0: 0}  # the group drops what lies below the purge point (kmq/consumer/fetched.py)


def test_a_round_that_read_nothing_writes_nothing():
    state = PartitionState(MemoryStore(), MP)
    state.apply(M.Begin(1), 0)
    state.apply(M.Acquire(M.RangeRef(Q, 0, 0, 10), 30_000, M.offsets_mask(0, [0, 9]), 1, True), 0)
    state.apply(M.Floor(Q, 0, 0, 1), 0)
    d, _ = switched_to_partition(state)
    w = Want(Q, 0, 10, [])
    tail: list = []
    give_back.take_drained(d._ordered, w, 0, d._parts[MP], MP, 10, tail)
    assert tail == [] and d._ordered.unread_from((MP, Q, 0), 0)


class CapturingProducer:
    """What the lane writer produces, in order (no broker)."""

    def __init__(self, config: dict) -> None:
        self.values: list[bytes] = []
        self.callbacks: list = []

    def produce(self, topic, value, key=None, partition=None, on_delivery=None, **kw) -> None:
        self.values.append(value)
        self.callbacks.append(on_delivery)


def test_records_given_back_beyond_one_records_limits_go_out_in_records_of_their_own(monkeypatch):
    """Given back after the round's ACQUIREs: more than one marker record may hold (offsets
    spanned, MAX_RECORD_OFFSETS) raised out of the round, every round, and the handover
    never came. Each ACQUIRE and the RELEASE that gives it back share a record (apart, a
    TICK between them counted a delivery); a record that fails ends the epoch (it raised
    IndexError for want of a batch)."""
    import agents.dispatch.lanes as lanes

    monkeypatch.setattr(lanes, "Producer", CapturingProducer)
    writer = lanes.LaneWriter(Settings(), {}, lambda: math.inf)
    n = MAX_RANGE_LEN
    units = give_back.returned(Q, 0, [0, n - 1, n, 2 * n - 1, 2 * n, 3 * n - 1], 2)  # 3 whole ranges
    units[-1].append(M.Floor(Q, 0, 3 * n, 2))
    floor = M.Floor("other", 1, 7, 2)  # an ordered queue's, in the record of the round's ACQUIREs
    failed = []
    writer.acquire(MP, [], [floor], lambda *a: failed.append(a[:3]), set(), units)
    records = [marker_codec.decode(value) for value in writer.producer.values]
    assert records[0] == [floor] and len(records) == 3  # two pairs fill a record (2 x 2 x 65,536 offsets)
    assert [m for r in records[1:] for m in r] == [m for unit in units for m in unit]
    assert [[type(m).__name__ for m in r] for r in records[1:]] == [["Acquire", "Release"] * 2,
                                                                     ["Acquire", "Release", "Floor"]]
    writer.producer.callbacks[2](KafkaError(KafkaError._MSG_TIMED_OUT), None)  # one fails: the epoch ends
    assert failed == [(MP, 2, [])]


def test_hand_outs_past_the_partitions_end_do_not_hold_a_handover(monkeypatch):
    """A forged ACQUIRE far past the partition's end (security.md: obeyed in its epoch) set
    the bitmap's end there, and the reading-again before the handover waited for it."""
    state = table_after_an_ordered_epoch()  # FLOOR 4, 6 waiting; the partition ends at 10
    state.apply(M.Acquire(M.RangeRef(Q, 0, 10**7, 10**7 + 1), 30_000, 1, 1, True), 0)
    state.apply(M.Floor(Q, 0, 4, 1), 0)
    d, cfg = switched_to_partition(state)
    assert hand_over(d, cfg, monkeypatch) == (None, [])
    drain_round(d, cfg, [4, 5, 6, 7, 8, 9])
    assert hand_over(d, cfg, monkeypatch)[0] == {0: 10}


def test_records_not_given_back_are_read_again_in_a_new_epoch(monkeypatch):
    """Taken out of the dispatcher for the handover and not written (a delivery timeout, not
    covered by the gapless guarantee): before, the next scan found nothing waiting and
    handed over past them."""
    d, current = dispatcher()
    assert round_of(d, ORDERED, range(0, 6), credit=1) == [0]
    cfg = current[0] = QueueConfig(dispatch="partition", ordering="none", handover_pending=True)
    at, _ = hand_over(d, cfg, monkeypatch, write_error=KafkaError(KafkaError._MSG_TIMED_OUT))
    assert at is None and MP not in d._parts  # the tick timer begins it anew from the table
    assert d._ordered.keys_of(MP, Q) == []
