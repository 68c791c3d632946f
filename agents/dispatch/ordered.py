"""The dispatcher's ordered queues and deduplication (docs/ordering.md): records in, heads
of groups out, duplicates dropped.

For each ordered queue partition the dispatcher serves, this keeps the pure
``kmq.protocol.ordering.GroupOrder`` and ``Dedup`` and the records waiting for their
group (so a head is handed out without reading it again). It reads record headers and
counts what it sets aside (records in: ``agents.dispatch.ordered_feed``); every decision
is the pure modules'. Runs in the dispatcher's thread only.
"""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kmq.protocol.chunk import record_size
from kmq.protocol.limits import MAX_RANGE_LEN
from kmq.protocol.dispatch import Roster, Want
from kmq.protocol.dedup import Dedup
from kmq.protocol.ordering import GroupOrder
from agents.dispatch.ordered_dedup import Deduplicating
from agents.dispatch.ordered_feed import Feeding
from agents.dispatch.ordered_recovery import Recovering, _Recovery
from agents.dispatch.ordered_records import InRun, close_runs

log = logging.getLogger("kmq.tracker.dispatcher")

# An ordered queue is read at most this many offsets past its oldest record waiting for
# its group: one ACQUIRE range spans the heads handed out, and state stays bounded.
ORDERED_WINDOW_OFFSETS = MAX_RANGE_LEN - 1
ORDERED_MAX_GAP = 256  # offsets between two heads of one delivery, at most
# Value and header bytes of the records one ordered queue partition keeps waiting for their
# groups, at most: past it the queue is read no further until some go out (as when its
# window is full). Without it, a group stuck behind its head held up to a window of
# records: measured, 100 MiB of 256 KiB records grew the tracker by 105 MiB.
ORDERED_HELD_BYTES = 32 * 1024 * 1024

Key = tuple[int, str, int]  # (markers partition, queue, queue partition)


@dataclass
class _Queue:
    order: GroupOrder = field(default_factory=GroupOrder)
    dedup: Dedup | None = None
    records: dict[int, Any] = field(default_factory=dict)  # waiting offset -> record
    held_bytes: int = 0  # of the waiting records (kmq.protocol.chunk.record_size)
    # waiting offsets, lowest first; taken ones are dropped lazily (the floor is asked for
    # every dispatch round: a min() over the records cost the tracker's GIL per round)
    heap: list[int] = field(default_factory=list)
    ordered: bool = False  # fed as an ordered queue (else only deduplicated)
    recovery: _Recovery | None = None  # what a predecessor handed out (docs/ordering.md)


class OrderedQueues(Feeding, Recovering, Deduplicating):
    """Ordered queue partitions of one dispatcher (see the module docstring)."""

    def __init__(self, wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._queues: dict[Key, _Queue] = {}
        self._wall_ms = wall_ms  # caps record timestamps for dedup (Dedup.check)
        self.stats = {"bad-group": 0, "bad-dedup-id": 0, "deduplicated": 0, "held-heads-let-go": 0,
                      "given-back": 0}

    def _queue(self, key: Key) -> _Queue:
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = _Queue()
        return q

    def _get(self, key: Key, dedup_window_ms: int) -> _Queue:
        q = self._queue(key)
        if q.dedup is None:
            q.dedup = Dedup(dedup_window_ms)
        elif q.dedup.window_ms != dedup_window_ms:
            q.dedup.set_window(dedup_window_ms)  # the ids seen are kept
        return q

    def ended(self, key: Key, offsets: list[int], dead_lettered: bool, dead_letter_head: str) -> None:
        """Messages of an ordered queue left for good: acked, or dead-lettered (its group then
        holds when the queue's ``dead_letter_head`` is "hold")."""
        if dead_lettered:
            self.dead_lettered(key, offsets, dead_letter_head == "hold")
        else:
            self.settled(key, offsets)

    def durable_floor(self, key: Key, read_cursor: int) -> int:
        """Where a successor must read from (FLOOR): the oldest record waiting, or lower, the
        oldest one handed out whose group still waits on it, within one window below."""
        floor = self.floor(key, read_cursor)
        q = self._queues.get(key)
        low = None if q is None else q.order.lowest_handed()
        if low is not None and low < floor:
            floor = max(low, floor - ORDERED_WINDOW_OFFSETS)
        return floor

    def floor(self, key: Key, read_cursor: int) -> int:
        """The oldest offset not handed out: the lowest waiting record, else the read cursor."""
        q = self._queues.get(key)
        if q is None or not q.records:
            return read_cursor
        heap, records = q.heap, q.records
        while heap[0] not in records:
            heapq.heappop(heap)
        return heap[0]

    def room(self, key: Key, read_cursor: int) -> int:
        """How many more offsets may be read past ``read_cursor`` (the window; none while
        the waiting records hold ``ORDERED_HELD_BYTES``)."""
        q = self._queues.get(key)
        if q is not None and q.held_bytes >= ORDERED_HELD_BYTES:
            return 0
        return max(0, self.floor(key, read_cursor) + ORDERED_WINDOW_OFFSETS - read_cursor)

    def any_ready(self) -> bool:
        """Some group has a head to hand out (the dispatcher should not wait on a fetch)."""
        return any(q.order.ready() and (q.recovery is None or not q.recovery.catching_up)
                   for q in self._queues.values())

    def take(self, key: Key, n: int, now_ms: int, run: int = 1, consumer: str | None = None) -> list:
        """Up to ``n`` records for one consumer, in offset order: group heads, or runs of up
        to ``run`` records of a group (``GroupOrder.take``)."""
        return [rec for part in self.take_parts(key, n, now_ms, run, consumer) for rec in part]

    def take_parts(self, key: Key, n: int, now_ms: int, run: int = 1,
                   consumer: str | None = None) -> list[list]:
        """:meth:`take` as the deliveries to write, each record carrying its run's id
        (``kmq.run``): each group's records of two or more, or more of a run going on, on
        their own (so a consumer whose user code holds the run's head can hand out other
        groups' deliveries meanwhile, kmq.consumer.gated_receive), the single records
        together, cut where a gap is wide (:func:`agents.dispatch.ordered_records.close_runs`);
        by first offset."""
        q = self._queues.get(key)
        if q is None or n <= 0:
            return []
        by_group: dict[bytes, list[int]] = {}
        for offset, group in q.order.take(n, now_ms, run, ORDERED_MAX_GAP, consumer):
            by_group.setdefault(group, []).append(offset)
        parts, singles = [], []
        for group, offsets in by_group.items():
            first = q.order.chain(group)
            chain = b"%d" % first  # once per group, not per record
            waited = [q.records.pop(o) for o in offsets]
            q.held_bytes -= sum(map(record_size, waited))
            recs = [InRun(rec, chain) for rec in waited]
            # One more of a run going on waits at the consumer too: among the singles, it held
            # up those behind it (measured: b's head behind a's 11th, a receive of 10 s got None).
            if len(recs) > 1 or offsets[0] != first:
                parts.append(recs)
            else:
                singles += recs
        parts += close_runs(sorted(singles, key=lambda r: r.offset()), ORDERED_MAX_GAP)
        # ACQUIREs in offset order: the first one sets the base of the handed-out bitmap
        # (kmq.protocol.handed), and an offset below the base is not remembered.
        return sorted(parts, key=lambda part: part[0].offset())

    def settled(self, key: Key, offsets: list[int]) -> bool:
        q = self._queues.get(key)
        if q is not None and q.recovery is not None:  # ended before it was read: settled
            q.recovery.pending.difference_update(offsets)
        return q is not None and any([q.order.settled(o) for o in offsets])

    def dead_lettered(self, key: Key, offsets: list[int], hold: bool) -> bool:
        q = self._queues.get(key)
        if q is not None and q.recovery is not None:
            q.recovery.pending.difference_update(offsets)
        return q is not None and any([q.order.dead_lettered(o, hold) for o in offsets])

    def purged(self, markers_partition: int, queue: str, before: dict[int, int]) -> int:
        """``queue`` was purged below ``before`` (queue partition -> purge point): its
        records read and waiting below the point are never handed out, and its groups no
        longer wait for heads from below it (the tracker forgot them; no settle comes).
        Returns how many records and heads were dropped."""
        dropped = 0
        for (m, name, p), q in self._queues.items():
            point = before.get(p, 0)
            if m != markers_partition or name != queue or point <= 0:
                continue
            dropped += q.order.purge_below(point)
            for offset in [o for o in q.records if o < point]:
                q.held_bytes -= record_size(q.records.pop(offset))  # its heap entry goes lazily (floor())
        return dropped

    def waiting(self, key: Key) -> bool:
        """Records of the queue partition wait, read past its cursor: for their groups, or to
        be released (:meth:`release`)."""
        q = self._queues.get(key)
        return q is not None and bool(q.records)

    def release(self, key: Key, n: int) -> list:
        """Of a queue no longer ordered (its ordering set back to "none"): up to ``n`` of the
        records it kept waiting for their groups, lowest first, to go out as any shared
        queue's (below its read cursor: left here, never handed out). Its groups are
        forgotten, its dedup state kept; what is left is fed again if it is ordered again."""
        q = self._queues.get(key)
        if q is None:
            return []
        self.unorder(key)
        out = [q.records.pop(o) for o in sorted(q.records)[:max(0, n)]]
        q.held_bytes -= sum(map(record_size, out))
        if not q.records:
            q.heap = []
        return out

    def unorder(self, key: Key) -> None:
        """The queue partition is handed out unordered from now on (its ordering set back to
        "none", or partition mode): its groups and what they had in flight are forgotten, so
        a later ordered period starts afresh at its cursor. Kept, they held their groups
        back for good (the acks of a queue not ordered do not reach them), and set that
        period's FLOOR back below what was handed out in between: in the mode-switch
        audit's scenario a FLOOR stayed at offset 429 while partition-mode groups and
        unordered rounds handed out 487-996, and after a BEGIN 546 acked messages were
        handed out again. What waits, its dedup state and what predecessors handed out
        (recovery: not_handed) stay."""
        q = self._queues.get(key)
        if q is not None and q.ordered:
            q.order, q.ordered = GroupOrder(), False

    def keys_of(self, markers_partition: int, queue: str) -> list[Key]:
        """The queue partitions of ``queue`` kept here, of markers partition ``markers_partition``."""
        return [k for k in self._queues if k[0] == markers_partition and k[1] == queue]

    def forget(self, key: Key) -> None:
        """Start this queue partition afresh (read again from its floor)."""
        self._queues.pop(key, None)

    def forget_partition(self, markers_partition: int) -> None:
        for key in [k for k in self._queues if k[0] == markers_partition]:
            del self._queues[key]

    def held(self) -> tuple[int, int]:
        """Bytes and records waiting for their groups, in all ordered queue partitions."""
        queues = list(self._queues.values())
        return sum(q.held_bytes for q in queues), sum(len(q.records) for q in queues)

    def gauges(self, now_ms: int) -> dict[str, dict[str, int]]:
        """Per queue: groups waiting, groups in flight, of those held, oldest head age (ms)."""
        out: dict[str, dict[str, int]] = {}
        for (_, queue, _), q in list(self._queues.items()):
            if not q.ordered:
                continue
            g = q.order.gauges(now_ms)
            mine = out.setdefault(queue, {"groups_waiting": 0, "groups_in_flight": 0, "groups_held": 0,
                                          "oldest_head_age_ms": 0})
            for name in ("groups_waiting", "groups_in_flight", "groups_held"):
                mine[name] += g[name]
            mine["oldest_head_age_ms"] = max(mine["oldest_head_age_ms"], g["oldest_head_age_ms"])
        return out

    def hand_out(self, key: Key, w: Want, roster: Roster, dedup_window_ms: int, now_ms: int,
                 dead_letter_head: str | None = None) -> list:
        """What was read of an ordered queue goes to its groups; their heads go out, as
        (slot, seq, records) runs like ``kmq.protocol.dispatch.hand_out``'s. Under
        ``dead_letter_head`` "continue", groups held by a dead-lettered head (set while the
        policy was "hold") go on."""
        q = self._queues.get(key)
        if dead_letter_head == "continue" and q is not None and q.order.held:
            self.stats["held-heads-let-go"] += q.order.release_held()
        taken, w.taken = w.taken, []
        if taken:  # what one ACQUIRE range can span: read no further than the window
            limit = self.floor(key, taken[0].offset()) + ORDERED_WINDOW_OFFSETS
            beyond = next((i for i, r in enumerate(taken) if r.offset() >= limit), None)
            if beyond is not None:
                w.cursor = taken[beyond].offset()
                taken = taken[:beyond]
        self.feed(key, taken, dedup_window_ms, now_ms)
        if not self.caught_up(key, w.cursor):
            return []
        shares = []
        for slot, k in roster.share(roster.demand()):
            # A consumer gets whole runs of a group (it hands them to its user code one at a
            # time, kmq.consumer.group_gate): a group's run is one round trip, not one each.
            # Nothing for one consumer is not nothing for the next: the last of its credit
            # is for another group's head (GroupOrder.take), its runs going on are its own.
            parts = self.take_parts(key, k, now_ms, run=k, consumer=slot.consumer_id)
            shares += [(slot, part) for part in parts]
        # ACQUIREs in offset order across consumers too: the first sets the base of the
        # handed-out bitmap, below which an offset is not remembered (a successor would
        # hand it out again, acked or not).
        shares.sort(key=lambda share: share[1][0].offset())
        return [(slot, roster.sent(slot, len(part)), part) for slot, part in shares]
