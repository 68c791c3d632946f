"""The dispatcher thread's handling of the events in its inbox (agents.dispatch.inbox): the
markers partitions it owns and their epochs (BEGIN, begun, ended), the cursors the agent
applied, the consumers' CREDITs folded into rosters, a quiesce before a rebalance.

Mixed into :class:`agents.dispatch.dispatcher.Dispatcher`, whose thread alone calls these;
kept apart so that module holds reading and handing out.
"""

from __future__ import annotations

import logging
import queue as queue_mod
import time
from typing import Any, Callable

from agents.dispatch.dedup_replay import replays_at_begin
from agents.dispatch.epochs import Epochs, OwnedPartition
from agents.dispatch.inbox import QUIESCE_FLUSH_S
from agents.dispatch.lanes import LaneWriter
from agents.dispatch.ordered import OrderedQueues
from agents.dispatch.reader import QueueReader
from kmq.ops.queues_topic import QueueConfigs
from kmq.protocol import markers as M
from kmq.protocol.cursor_bounds import bounded_cursors
from kmq.protocol.dispatch import Roster, admits
from kmq.protocol.limits import MAX_CONSUMERS_PER_PARTITION, MAX_CONSUMERS_PER_QUEUE

log = logging.getLogger("kmq.tracker.dispatcher")


class DispatcherEvents:
    """Events in, state changed: nothing here reads a queue or writes a delivery."""

    _inbox: queue_mod.SimpleQueue
    _parts: dict[int, OwnedPartition]
    _epochs: Epochs
    _lanes: LaneWriter
    _reader: QueueReader
    _ordered: OrderedQueues
    _configs: QueueConfigs
    _floors: dict[int, list[M.Floor]]
    _returns: dict[int, list[list[M.Marker]]]
    _queue_parts: int
    settings: Any
    _membership: Callable[[], float]
    stats: dict[str, int]
    trace: bool = False

    def _drain_inbox(self) -> bool:
        got = False
        while True:
            try:
                event = self._inbox.get_nowait()
            except queue_mod.Empty:
                return got
            got = True
            kind = event[0]
            if kind == "credit":
                self._credit(event[1], event[2])
            elif kind == "begin":
                self._begun(event[1], event[2], event[3], event[4])
            elif kind == "started":
                self._started(event[1], event[2])
            elif kind == "owned":
                self._own(event[1])
            elif kind == "ended":
                self._ended(*event[1:])
            elif kind == "purged":
                self._ordered.purged(*event[1:])
            elif kind == "quiesce":
                self._quiesce()
                event[1].set()
            elif kind == "drain":
                self._lanes.settle_writes(self._epochs.with_deliveries(), QUIESCE_FLUSH_S)
                event[1].set()

    def _quiesce(self) -> None:
        # ACQUIREs written so far land (their callbacks run) before anyone else begins;
        # their lanes go out while their epochs are still ours. Then nothing is ours.
        self._lanes.settle_writes(self._epochs.with_deliveries(), QUIESCE_FLUSH_S)
        self._floors.clear()
        self._returns.clear()  # not written: a successor reads them again (give_back)
        for m in self._epochs.forget_all():
            self._ordered.forget_partition(m)

    def _own(self, partitions: set[int]) -> None:
        for m in list(self._parts):
            if m not in partitions:
                self._epochs.end(m)  # revoked: its next owner begins anew
                self._ordered.forget_partition(m)
        if partitions - set(self._parts) and time.monotonic() >= self._membership():
            return  # not certainly a member: the tick timer says again once it is
        for m in partitions:
            if m not in self._parts:
                self._begin(m)

    def _begin(self, m: int) -> None:
        """A new epoch of ``m``, its BEGIN written on the same producer as our ACQUIREs:
        everything we wrote before lands before it."""
        self._lanes.begin(m, self._epochs.begin(m), self._begin_failed)

    def _begin_failed(self, m: int, epoch: int, err: Any) -> None:
        """A BEGIN that was not written is waited for in vain: the next tick begins anew."""
        self.stats["begin-errors"] += 1
        log.warning("markers partition %d: BEGIN not written (%s); beginning anew", m, err)
        self._epochs.end(m, epoch)

    def _begun(self, m: int, epoch: int, cursors: dict[tuple[str, int], int], handed: dict) -> None:
        part = self._parts.get(m)
        if part is not None and part.ready and part.epoch != epoch:
            self._begun_by_another(m, epoch)
            return
        cursors = self._within_topic(m, epoch, cursors)
        if self._epochs.begun(m, epoch, cursors):
            log.info("markers partition %d: dispatching (epoch %d, %d cursors)", m, epoch, len(cursors))
            self._parts[m].replays = replays_at_begin(cursors, int(time.time() * 1000))
            # Every queue partition with a bitmap: its cursor is the FLOOR of when it was
            # ordered, below runs handed out since, whatever its ordering is now.
            ordered = {q for q, _ in handed if self._configs.get(q).ordering == "group"}
            self._ordered.recover_partition(m, handed, self._reader.end_offset, ordered)

    def _within_topic(self, m: int, epoch: int, cursors: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The table's cursors bounded by the queue topic (kmq.protocol.cursor_bounds): one far
        past its partition's end begins at the end, and a FLOOR in the new epoch mends the table."""
        if not self._queue_parts:  # not read yet (the set-up's): nothing to bound them by
            return cursors
        parts = sorted({p for _, p in cursors if 0 <= p < self._queue_parts})
        ends = self._reader.ends_of(self.settings.queue_topic, parts, timeout_s=5) if parts else {}
        got = bounded_cursors(cursors, ends, self._queue_parts)
        for (queue, p), end in got.moved.items():
            self._floors.setdefault(m, []).append(M.Floor(queue, p, end, epoch))
        if got.moved or got.dropped:
            self.stats["cursors-out-of-topic"] += len(got.moved) + len(got.dropped)
            log.warning("markers partition %d: %d cursors past their partition's end (begun at it: %s) and "
                        "%d of partitions the queue topic does not have (dropped): forged ACQUIREs or "
                        "FLOORs", m, len(got.moved), list(got.moved.items())[:3], len(got.dropped))
        return got.cursors

    def _begun_by_another(self, m: int, epoch: int) -> None:
        """A BEGIN not ours after ours, on a partition we own: from it on, the table fences
        every ACQUIRE of ours, and what they hand out is tracked by no one. A successor
        begins only after our revoke, so anyone who may write the markers topic wrote it (an
        audit: one BEGIN left a partition's shared queues without redelivery until its next
        rebalance). Begin anew: dispatching goes on from the table's cursors, so what the
        fenced ACQUIREs handed out is handed out again (at least once). The deliveries of
        our old epoch not yet written are dropped."""
        self.stats["foreign-begins"] += 1
        log.warning("markers partition %d: BEGIN of epoch %d after ours (%d) while we own it: not a "
                    "successor's (it begins after our revoke), a record someone wrote; beginning anew",
                    m, epoch, self._parts[m].epoch)
        self._epochs.end(m)
        self._ordered.forget_partition(m)
        if time.monotonic() < self._membership():  # else the tick timer's next "owned" begins
            self._begin(m)

    def _started(self, m: int, fetched: M.RangeRef) -> None:
        # The cursor the state machine keeps too (BEGIN reads it); kept here from BEGIN on.
        part = self._parts.get(m)
        if part is not None and part.ready:
            key = (fetched.queue, fetched.partition)
            if part.cursors.get(key, 0) < fetched.end:
                part.cursors[key] = fetched.end
            cfg = self._configs.get(fetched.queue)  # a START is a partition-mode group's
            if cfg.ordering != "group" or cfg.dispatch_mode(self.settings) != "shared":
                self._ordered.unorder((m, fetched.queue, fetched.partition))

    def _ended(self, m: int, queue: str, p: int, offsets: list[int], dead_lettered: bool) -> None:
        if m in self._parts:
            self._ordered.ended((m, queue, p), offsets, dead_lettered, self._configs.get(queue).dead_letter_head)

    def _credit(self, m: int, c: M.Credit) -> None:
        part = self._parts.get(m)
        if part is None or not part.ready:
            return  # from before our BEGIN: the consumer asks again within its heartbeat
        if not 0 <= c.lane < self._lanes.layout.count:
            self._lanes.read_layout_again()  # deliveries topics added since we read them?
            if not 0 <= c.lane < self._lanes.layout.count:
                self.stats["bad-credits"] += 1
                return
        self.stats["credits"] += 1
        if self.trace:
            log.info("TRACE credit %s free=%d seq=%d", c.consumer_id[:6], c.free, c.seq)
        roster = part.rosters.get(c.queue)
        slot = None if roster is None else roster.slots.get(c.consumer_id)
        if slot is None and c.lease_ms:  # a consumer new to us
            if not admits(0 if roster is None else len(roster.slots), part.consumers):
                self._refuse_credit(c)
                return
            part.consumers += 1
        if roster is None:
            roster = part.rosters[c.queue] = Roster(part.epoch)
        last_seq = 0 if slot is None else slot.next_seq - 1
        if slot is not None and slot.lane != c.lane:
            # The consumer left its lane (kmq.consumer.lane_choice): it reads the old one
            # until this FAREWELL, after every delivery sent there.
            self.stats["lane-moves"] += 1
            self._lanes.farewell(c.consumer_id, slot.lane, part.epoch, last_seq, self._epochs.with_deliveries())
        lapsed = roster.lapsed_unconfirmed
        if roster.credit(c, int(time.monotonic() * 1000)) is None:
            self._lanes.farewell(c.consumer_id, c.lane, part.epoch, last_seq, self._epochs.with_deliveries())
        if roster.lapsed_unconfirmed != lapsed:
            self.stats["unconfirmed-lapsed"] += roster.lapsed_unconfirmed - lapsed
        if not roster.slots:
            del part.rosters[c.queue]

    def _refuse_credit(self, c: M.Credit) -> None:
        """A new consumer beyond what the dispatcher keeps (kmq.protocol.dispatch.admits):
        counted, logged now and then; its next CREDIT asks again."""
        self.stats["credits-refused"] += 1
        n = self.stats["credits-refused"]
        if n <= 10 or n % 10_000 == 0:
            log.warning("shared queue %r: CREDIT of a new consumer %r refused (%d so far): the dispatcher "
                        "keeps at most %d consumers of a queue and %d of a markers partition",
                        c.queue, c.consumer_id[:64], n, MAX_CONSUMERS_PER_QUEUE, MAX_CONSUMERS_PER_PARTITION)
