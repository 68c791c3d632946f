"""A queue set back from ordering="group" whose dispatcher begins anew (agents.dispatch.events,
``_begun``; docs/ordering.md, "Failover").

An ordered queue's durable cursor is its FLOOR, below runs handed out since; the offsets
handed out above it are in the table's bitmap. Before, a dispatcher that began while the
queue was no longer ordered took only the cursor: it read from the floor and handed out
again what its predecessor had handed out and consumers had acked (an audit: mode flips
partition / shared / ordered while a second tracker worker was killed every 25 s; 262
deliveries of the same id and delivery count, e.g. one acked 14 s before)."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from agents.dispatch.dispatcher import Dispatcher
from agents.dispatch.epochs import OwnedPartition
from agents.dispatch.reader import NO_END
from kmq.protocol import envelope as V
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.dispatch import Roster, Want
from kmq.protocol.lookahead import Lookahead
from kmq.protocol.masks import mask_offsets
from kmq.protocol.placement import markers_partition
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore
from kmq.queue_config import QueueConfig
from kmq.settings import Settings

Q, MP = "orders", 3


class Rec:
    """A record of the queue as the dispatcher reads it (one group per record's parity)."""

    def __init__(self, offset: int):
        self._o = offset
        self._h = [(V.ID, b"m%d" % offset), (V.GROUP, b"g%d" % (offset % 2))]

    def offset(self):
        return self._o

    def key(self):
        return Q.encode()

    def headers(self):
        return self._h

    def timestamp(self):
        return (1, 1000)

    def __len__(self):
        return 10


@pytest.fixture(autouse=True)
def quiet():
    logging.getLogger("kmq.tracker.dispatcher").setLevel(logging.ERROR)
    yield
    logging.getLogger("kmq.tracker.dispatcher").setLevel(logging.NOTSET)


def table_after_an_ordered_epoch(runs=((0, [0, 1]), (2, [2, 3]), (4, [4, 5])), floor: int = 4) -> PartitionState:
    """Epoch 1 handed out ``runs`` of the ordered queue ((first offset, offsets) each; all
    acked but 4, in flight) and wrote its FLOOR. By default it handed out offsets 0-5
    and held 6 back for its group: FLOOR 4, the lowest in flight."""
    state = PartitionState(MemoryStore(), MP)
    state.apply(M.Begin(1), 0)
    for start, offsets in runs:
        r = M.RangeRef(Q, 0, start, offsets[-1] + 1)
        state.apply(M.Acquire(r, 30_000, M.offsets_mask(start, offsets), 1, True), 0)
        for o in offsets:
            if o != 4:
                state.apply(M.Ack(r, 1 << (o - start)), 0)
    state.apply(M.Floor(Q, 0, floor, 1), 0)
    return state


def begun(state: PartitionState, cfg: QueueConfig, log_end: int = 10) -> Dispatcher:
    """A successor (epoch 2) begun from the table, the queue configured as ``cfg``; the
    queue partition ends at ``log_end``."""
    state.apply(M.Begin(2), 0)
    d = Dispatcher(Settings(), configs=lambda: None)
    d._configs = SimpleNamespace(get=lambda q: cfg)
    d._reader = SimpleNamespace(end_offset=lambda p, default: max(log_end, default))
    d._settings_cover = lambda *a: NO_END  # the settings view is current
    d._parts[MP] = OwnedPartition(2)
    d._begun(MP, 2, state.cursors(), state.handed_outs())
    d._parts[MP].replays = {}  # the dedup ids sent before BEGIN read back (dedup_replay)
    return d


def handed_out_now(d: Dispatcher, cfg: QueueConfig, records: list[Rec]) -> tuple[list[int], Want]:
    """One unordered dispatch round of ``records`` (read from the cursor) for one consumer."""
    part = d._parts[MP]
    roster = part.rosters[Q] = Roster(part.epoch)
    roster.credit(M.Credit(Q, "c1", 0, 0, 0, 20, 30_000, 30_000), int(time.monotonic() * 1000))
    w = Want(Q, records[-1].offset() + 1, 20, list(records))
    out: dict = {}
    d._take(0, {Q.encode(): w}, {Q: (part, MP, cfg)}, out, Lookahead())
    return sorted(o for b in out.get(MP, []) for o in mask_offsets(b.delivery.range.start, b.delivery.mask)), w


def test_a_queue_no_longer_ordered_skips_what_its_predecessor_handed_out():
    state = table_after_an_ordered_epoch()
    assert state.cursors()[(Q, 0)] == 4  # the floor, below 5 (acked)
    cfg = QueueConfig(dispatch="shared", ordering="none")
    d = begun(state, cfg)
    got, w = handed_out_now(d, cfg, [Rec(o) for o in range(4, 10)])
    # 4 is in flight (the tracker redelivers it when it times out), 5 was acked: only 6-9 go out.
    assert got == [6, 7, 8, 9]
    # A FLOOR after the round's ACQUIREs moves the durable cursor past what was skipped.
    assert [(f.queue, f.offset) for f in d._floors[MP]] == [(Q, w.cursor)] and w.cursor == 10
    # Read past the predecessor's hand-outs, it is forgotten: nothing further is skipped.
    got, _ = handed_out_now(d, cfg, [Rec(o) for o in range(10, 12)])
    assert got == [10, 11]


def test_one_set_back_from_ordered_after_its_begin_still_skips_them():
    state = table_after_an_ordered_epoch()
    d = begun(state, QueueConfig(dispatch="shared", ordering="group"))
    key = (MP, Q, 0)
    d._ordered.feed(key, [Rec(4)], 300_000, 0)  # read as an ordered queue: 4 adopted in flight
    d._ordered.release(key, 10)  # ordering set back to "none"
    cfg = QueueConfig(dispatch="shared", ordering="none")
    got, _ = handed_out_now(d, cfg, [Rec(o) for o in range(5, 8)])
    assert got == [6, 7]


def hand_over(d: Dispatcher, cfg: QueueConfig, monkeypatch, write_error=None) -> tuple[dict | None, list[M.Marker]]:
    """One handover scan of the queue, set to ``cfg``: (the handover written, or None if it
    waits; the markers given back). ``write_error``: what writing them fails with."""
    import agents.dispatch.give_back as give_back
    import agents.dispatch.handover as handover

    written, markers = {}, []
    monkeypatch.setattr(handover, "latest_config", lambda s, configs, q: (cfg, (0, 0)))
    monkeypatch.setattr(handover, "write_reconciled",
                        lambda s, configs, q, base, new, since: written.setdefault(q, new))
    def produce(producer, topic, value, key, partition, on_delivery):
        markers.extend(marker_codec.decode(value))
        on_delivery(write_error, None)

    monkeypatch.setattr(give_back, "produce_when_room", produce)
    lanes = SimpleNamespace(settle_writes=lambda *a: None, producer=SimpleNamespace(flush=lambda t: 0),
                            settings=Settings())
    configs = SimpleNamespace(queues=lambda: [Q], get=lambda q: cfg)
    settings = Settings(markers_partitions=13)  # the queue's markers partition is MP there
    assert markers_partition(Q, settings.markers_partitions) == MP
    failed = handover.hand_over_switched(settings, configs, d._epochs, lanes, 1, d._ordered)
    assert failed == (write_error is not None)
    return (written[Q].handover if Q in written else None), markers


def switched_to_partition(state: PartitionState, log_end: int = 10) -> tuple[Dispatcher, QueueConfig]:
    """A successor begun from ``state`` after the queue was switched to partition mode,
    before it read the queue again; and the queue's settings."""
    cfg = QueueConfig(dispatch="partition", ordering="none", handover_pending=True)
    d = begun(state, cfg, log_end)
    part = d._parts[MP]
    part.ready, part.cursors = True, state.cursors()
    return d, cfg


def drain_round(d: Dispatcher, cfg: QueueConfig, read: list[int]) -> list[M.Marker]:
    """One dispatch round of a queue awaiting its handover that reads again what its
    predecessors handed out (agents.dispatch.give_back): ``read`` its records read from
    its cursor; returns the markers to give back after the round's ACQUIREs."""
    from agents.dispatch.give_back import drain_wants

    wants: dict = {}
    d._draining = drain_wants(d._ordered, d._parts, SimpleNamespace(get=lambda q: cfg), d.settings, wants)
    (w,) = wants[0].values()
    assert w.cursor == read[0]
    w.taken, w.cursor = [Rec(o) for o in read], read[-1] + 1
    d._take(0, wants[0], {}, {}, Lookahead())
    return [m for unit in d._returns.pop(MP, []) for m in unit]


def test_a_switch_to_partition_mode_after_such_a_begin_hands_over_past_what_went_out(monkeypatch):
    # The same table, the queue switched to partition mode before its successor read it: the
    # handover was the FLOOR (4), so the group read 5 again, acked (an audit: 116 acked
    # messages delivered again). Now the successor reads them first, and hands over past them.
    d, cfg = switched_to_partition(table_after_an_ordered_epoch())
    assert hand_over(d, cfg, monkeypatch) == (None, [])  # it waits for the read
    # 4 is in flight (the tracker's), 5 acked: nothing to give back; 6 is the group's
    assert drain_round(d, cfg, [4, 5, 6, 7]) == [M.Floor(Q, 0, 6, 2)]
    assert hand_over(d, cfg, monkeypatch) == ({0: 6}, [])
