"""The dispatcher's decisions for shared queues, pure: who may take how many, and which records.

A shared queue's consumers ask for work with CREDIT markers (kmq.protocol.markers.Credit).
The tracker worker that owns the queue's markers partition is its dispatcher: it reads
the queue's partitions once for every consumer and hands each what it asked for.

- :class:`Roster` keeps the live consumers of one queue and how many messages each may
  still take (its *available* credit). A CREDIT says "as of having received delivery
  ``seq`` of dispatcher ``epoch``, I can take ``free`` more": deliveries sent after that
  one are still on their way and count against it, so a consumer never gets more than it
  asked for. A consumer that does not ask again within its lease is dropped; one silent
  past its hand-out window (``kmq.protocol.liveness``) is handed nothing meanwhile.
- :func:`select` takes, from a chunk of one queue partition read in offset order, each
  wanting queue's records at or above its *cursor* (the first offset not yet examined for
  it) while it has demand, and advances the cursors.
- :meth:`Roster.share` splits what was taken fairly (round robin, rotating start) among
  the consumers that have credit; each share becomes one delivery (one ACQUIRE).

Time is an argument (``now_ms``, the dispatcher's monotonic milliseconds).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from kmq.protocol.chunk import Chunk
from kmq.protocol.limits import MAX_CONSUMERS_PER_PARTITION, MAX_CONSUMERS_PER_QUEUE, MAX_RANGE_LEN
from kmq.protocol.liveness import MAX_LEASE_MS, handout_window_ms
from kmq.protocol.markers import Credit


class Record(Protocol):
    """What :func:`select` reads of a queue record (confluent-kafka's Message has these)."""

    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...


@dataclass(slots=True)
class ConsumerSlot:
    """One live consumer of a shared queue, as its dispatcher knows it."""

    consumer_id: str
    lane: int
    timeout_ms: int
    available: int = 0
    lease_until_ms: int = 0
    handout_until_ms: int = 0  # past it (silent since its last CREDIT) it is handed nothing
    silent: bool = False       # as of the last expire()
    next_seq: int = 1
    # (seq, count, sent_ms) of deliveries sent in this epoch that the consumer has not said
    # it received
    unconfirmed: deque = field(default_factory=deque)

    def outstanding(self) -> int:
        return sum(e[1] for e in self.unconfirmed)


class Roster:
    """The live consumers of one shared queue and their credit, for dispatcher ``epoch``."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.slots: dict[str, ConsumerSlot] = {}
        self._turn = 0
        self.now_ms = 0  # the latest time credit() or expire() was given: sent() stamps with it
        self.lapsed_unconfirmed = 0  # deliveries no longer counted against their consumer (see credit)

    def credit(self, c: Credit, now_ms: int) -> ConsumerSlot | None:
        """Fold one CREDIT marker in; returns the consumer's slot (None: it left)."""
        if c.lease_ms == 0:
            self.slots.pop(c.consumer_id, None)
            return None
        slot = self.slots.get(c.consumer_id)
        if slot is None:
            slot = self.slots[c.consumer_id] = ConsumerSlot(c.consumer_id, c.lane, c.timeout_ms)
        slot.lane = c.lane
        slot.timeout_ms = c.timeout_ms
        lease_ms = min(c.lease_ms, MAX_LEASE_MS)
        slot.lease_until_ms = now_ms + lease_ms
        slot.handout_until_ms = now_ms + handout_window_ms(c.timeout_ms, lease_ms)
        slot.silent = False
        self.now_ms = max(self.now_ms, now_ms)
        if c.epoch == self.epoch:
            while slot.unconfirmed and slot.unconfirmed[0][0] <= c.seq:
                slot.unconfirmed.popleft()
        # A delivery sent a visibility timeout ago counts no more: what it carried lapsed at the
        # tracker, and a consumer whose CREDITs never name it (a forged lane header set its
        # receipt back: an audit) would otherwise be handed nothing, for good.
        while slot.unconfirmed and slot.unconfirmed[0][2] + slot.timeout_ms <= now_ms:
            slot.unconfirmed.popleft()
            self.lapsed_unconfirmed += 1
        slot.available = max(0, c.free - slot.outstanding())
        return slot

    def expire(self, now_ms: int) -> list[str]:
        """Drop consumers whose lease ran out, and hand nothing to those silent past their
        hand-out window until they ask again; returns the ids of those dropped."""
        gone = []
        self.now_ms = max(self.now_ms, now_ms)
        for cid, s in self.slots.items():
            if s.lease_until_ms <= now_ms:
                gone.append(cid)
            s.silent = s.handout_until_ms <= now_ms
        for cid in gone:
            del self.slots[cid]
        return gone

    def demand(self) -> int:
        """How many messages the queue's consumers can take now, together."""
        return sum(s.available for s in self.slots.values() if not s.silent)

    def share(self, n: int) -> list[tuple[ConsumerSlot, int]]:
        """Split ``n`` records among consumers with credit: fair shares, rotating start.

        Returns (slot, count) in the order the records are handed out; the counts add up
        to at most ``n`` and never exceed a consumer's available credit.
        """
        takers = [s for s in self.slots.values() if s.available > 0 and not s.silent]
        if not takers or n <= 0:
            return []
        start = self._turn % len(takers)
        self._turn += 1
        takers = takers[start:] + takers[:start]
        given = dict.fromkeys(range(len(takers)), 0)
        left = n
        while left > 0:
            open_ = [i for i, s in enumerate(takers) if s.available - given[i] > 0]
            if not open_:
                break
            fair = -(-left // len(open_))  # ceil
            for i in open_:
                k = min(fair, takers[i].available - given[i], left)
                given[i] += k
                left -= k
                if left == 0:
                    break
        return [(takers[i], k) for i, k in given.items() if k]

    def sent(self, slot: ConsumerSlot, count: int) -> int:
        """Record a delivery of ``count`` messages to ``slot``; returns its sequence number."""
        seq = slot.next_seq
        slot.next_seq += 1
        slot.available -= count
        slot.unconfirmed.append((seq, count, self.now_ms))
        return seq


def admits(queue_consumers: int, partition_consumers: int) -> bool:
    """Whether a dispatcher takes in a consumer it does not know yet, given how many it
    keeps of the queue and of the whole markers partition. Anyone may write a CREDIT with
    any id: without a bound, made-up ids grew its memory and every round without limit
    (kmq.protocol.limits). One refused asks again with its next CREDIT."""
    return queue_consumers < MAX_CONSUMERS_PER_QUEUE and partition_consumers < MAX_CONSUMERS_PER_PARTITION


@dataclass(slots=True)
class Want:
    """One queue's part in reading a partition chunk: where to look from, how many to take."""

    queue: str
    cursor: int
    demand: int
    taken: list = field(default_factory=list)


def select(records: Iterable[Any] | Chunk, chunk_end: int, wants: dict[bytes, Want],
           max_span: int = MAX_RANGE_LEN) -> None:
    """Take, in offset order, each wanting queue's records at or above its cursor.

    ``records`` is one chunk of a queue partition in offset order, ending before
    ``chunk_end`` (the offset after the chunk); ``wants`` maps a queue's key to its
    :class:`Want`. A queue that took all it wanted has its cursor just past its last
    record taken; one that wanted more has seen everything of itself below ``chunk_end``.
    What one queue takes spans fewer than ``max_span`` offsets (one marker range holds
    what is handed out); a record beyond stops the taking there, as if demand ran out.
    """
    chunk = records if isinstance(records, Chunk) else Chunk(list(records))
    for key, w in wants.items():
        recs, offsets = chunk.own(key)
        select_own(w, recs, offsets, chunk_end, max_span)


def select_own(w: Want, recs: list, offsets: list[int], chunk_end: int, max_span: int = MAX_RANGE_LEN) -> None:
    """:func:`select` for one queue: ``recs`` are all of its records in the chunk (offsets
    ``offsets``, ascending). Slices and binary searches: nothing is done per record."""
    if w.demand <= 0:
        return
    i = bisect_left(offsets, w.cursor)
    if i < len(offsets):
        first = w.taken[0].offset() if w.taken else offsets[i]
        span_end = bisect_left(offsets, first + max_span, i)  # records past the span stop it
        n = min(w.demand, span_end - i)
        if n:
            w.taken += recs[i:i + n]
            w.demand -= n
        if w.demand == 0:
            w.cursor = offsets[i + n - 1] + 1
            return
        if span_end < len(offsets):
            w.cursor = offsets[span_end]
            w.demand = 0
            return
    if chunk_end > w.cursor:
        w.cursor = chunk_end


def hand_out(want: Want, roster: Roster) -> list[tuple[ConsumerSlot, int, list]]:
    """Split what ``want`` took among the roster's consumers: (slot, seq, records) in order.

    Each run is recorded as sent (it becomes one delivery). Records no consumer has credit
    for (the credit went to the queue's other partitions) are given up: the want's cursor
    goes back to the first of them, so they are read and handed out again.
    """
    taken = want.taken
    want.taken = []
    runs = []
    i = 0
    for slot, k in roster.share(len(taken)):
        runs.append((slot, roster.sent(slot, k), taken[i:i + k]))
        i += k
    if i < len(taken):
        want.cursor = taken[i].offset()
    return runs


def refer(own_bytes: int, range_bytes: int, min_share: float) -> bool:
    """Hand a range out by reference (the consumer reads it from the queue topic) rather
    than as copies: when the queue's own records are at least ``min_share`` of its bytes."""
    return own_bytes >= min_share * range_bytes
