"""An ordered queue's records nobody holds, given to the tracker before its handover to
partition mode (docs/ordering.md, "Changing the ordering setting").

The records an ordered queue keeps waiting for their groups, and those its predecessors
did not hand out (a dispatcher that began during an ordered period and has not read them
again), are below where the dispatcher read to: a partition-mode group begins at the
handover, above them. So before the handover they are ACQUIREd and given back uncounted,
and the tracker writes them again past it, where the group reads them. A FLOOR at the
handover follows, so a successor begins there too. Runs on the dispatcher's thread.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from operator import methodcaller

from agents.dispatch import modes
from agents.dispatch.epochs import OwnedPartition
from agents.dispatch.lanes import LaneWriter
from agents.dispatch.ordered import OrderedQueues
from kmq.kafka.backpressure import produce_when_room
from kmq.ops.queues_topic import QueueConfigs
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.dispatch import Want
from kmq.protocol.limits import MAX_RANGE_LEN
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.dispatcher")
ALL_WAITING = 1 << 62
# A given-back ACQUIRE's visibility timeout: its RELEASE, in the same record, makes it due
# at once; should that ever not apply, the tracker redelivers it after this.
BACKSTOP_TIMEOUT_MS = 30_000
DRAIN_READ_RECORDS = 5000  # records of a queue read per round while its predecessors' are read again
_OFFSET = methodcaller("offset")


def returned(queue: str, p: int, offsets: list[int], epoch: int) -> list[list[M.Marker]]:
    """Markers that put ``offsets`` (of ``queue`` on queue partition ``p``, ascending) in the
    tracker's hands at once: ACQUIREd (as an ordered queue's, so a successor knows they
    went out) and given back uncounted, as a closing consumer's read-ahead is; each pair
    to be written in one record (``marker_codec.encode_units``). The tracker writes them
    again as copies at the partition's end; nobody held them."""
    out: list[list[M.Marker]] = []
    i = 0
    while i < len(offsets):
        start = offsets[i]
        j = bisect_left(offsets, start + MAX_RANGE_LEN, i)
        r = M.RangeRef(queue, p, start, offsets[j - 1] + 1)
        mask = M.offsets_mask(start, offsets[i:j])
        out.append([M.Acquire(r, BACKSTOP_TIMEOUT_MS, mask, epoch, True), M.Release(r, mask, 0, counted=False)])
        i = j
    return out


def _then_floor(units: list[list[M.Marker]], floor: M.Floor) -> None:
    """``floor`` in the record of the last of ``units`` (a FLOOR past records given back
    lands with them or not at all), else on its own."""
    if units:
        units[-1] = units[-1] + [floor]
    else:
        units.append([floor])


def give_back_waiting(ordered: OrderedQueues, lanes: LaneWriter, part: OwnedPartition, m: int, queue: str,
                      cursors: dict[tuple[str, int], int]) -> list:
    """At the handover of ``queue``: the records it kept waiting for their groups go to the
    tracker (:func:`returned`), then a FLOOR at their partition's handover (``cursors``).
    Before 2026-11-30 they waited in the dispatcher for as long as partition mode lasted
    (and were lost if it began anew meanwhile). Returns the list the write's error lands
    in (checked once the producer is flushed)."""
    units: list[list[M.Marker]] = []
    for key in ordered.keys_of(m, queue):
        p = key[2]
        waiting = sorted(rec.offset() for rec in ordered.release(key, ALL_WAITING))
        pairs = returned(queue, p, waiting, part.epoch)
        _count(ordered, queue, p, len(waiting))
        # Past them, not elsewhere: a FLOOR sets the cursor, and the table's may be ahead of
        # this view of it (a purged range's STARTs move only the table's).
        if pairs and (queue, p) in cursors:
            _then_floor(pairs, M.Floor(queue, p, cursors[(queue, p)], part.epoch))
        units += pairs
    errors: list = []
    for value in marker_codec.encode_units(units):
        produce_when_room(lanes.producer, lanes.settings.markers_topic, value, None,
                          partition=m, on_delivery=lambda err, _msg: err is not None and errors.append(err))
    return errors


def drain_wants(ordered: OrderedQueues, parts: dict[int, OwnedPartition], configs: QueueConfigs,
                settings: Settings, wants: dict) -> dict[tuple[str, int], tuple[OwnedPartition, int, int]]:
    """Queues awaiting their handover whose predecessors' hand-outs are not read again yet
    (a BEGIN during an ordered period): each is read from its cursor to their end first
    (:func:`take_drained`), else the group began below records handed out and acked (an
    audit: 116 read again). Adds their wants; returns (queue, partition) -> (owned
    partition, markers partition, the end of the hand-outs)."""
    out = {}
    for (m, q, p), end in ordered.unread_hand_outs():
        part = parts.get(m)
        if part is None or not part.ready:
            continue
        cfg = configs.get(q)
        cursor = max(part.cursors.get((q, p), 0), cfg.purged_before.get(p, 0))
        if cursor >= end:  # purged past them: nothing left to read
            ordered.recovered((m, q, p))
        elif modes.awaits_handover(cfg, settings):
            wants.setdefault(p, {})[q.encode()] = Want(q, cursor, DRAIN_READ_RECORDS)
            out[(q, p)] = (part, m, end)
    return out


def take_drained(ordered: OrderedQueues, w: Want, p: int, part: OwnedPartition, m: int, end: int,
                 units: list[list[M.Marker]]) -> None:
    """What a draining queue (:func:`drain_wants`) read below ``end``: the records its
    predecessors did not hand out are given back (:func:`returned`), and a FLOOR at the
    new cursor follows, added to ``units`` (written after the round's ACQUIREs). Its
    records from ``end`` on are the group's: left where they are."""
    k = bisect_left(w.taken, end, key=_OFFSET)
    if k < len(w.taken):
        w.cursor, w.taken = w.taken[k].offset(), w.taken[:k]
    key = (m, w.queue, p)
    offsets = [rec.offset() for rec in ordered.not_handed(key, w.taken)]
    pairs = returned(w.queue, p, offsets, part.epoch)
    _count(ordered, w.queue, p, len(offsets))
    if w.cursor > part.cursors.get((w.queue, p), 0):  # nothing written for a round that read nothing
        _then_floor(pairs, M.Floor(w.queue, p, w.cursor, part.epoch))
        part.cursors[(w.queue, p)] = w.cursor
    units += pairs
    if w.cursor >= end:
        ordered.recovered(key)
    w.taken = []


def _count(ordered: OrderedQueues, queue: str, p: int, n: int) -> None:
    if n:
        ordered.stats["given-back"] += n
        log.info("queue %s/%d: %d records nobody held given to the tracker before its handover", queue, p, n)
