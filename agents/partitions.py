"""What a worker knows about each markers partition it owns (in memory, not state).

The durable state is in the tables; this holds the partition's deadline
clock, the earliest deadline (so the tick timer never touches RocksDB), the
tick handshake between timer and agent, and counters for the views.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field

from kmq.protocol import entries as E
from kmq.protocol.clock import PartitionClock
from kmq.protocol.gaps import Gaps
from kmq.protocol.outcomes import SET_ASIDE, Outcome
from kmq.protocol.tick_proposals import TickProposals
from kmq.stats.gauges import GaugedStore, QueueGauges
from kmq.stats.rates import RateWindow
from kmq.protocol.state import PartitionState
from tables.store import TableStore, tracker_items

_SET_ASIDE_NAMES = frozenset(o.value for o in SET_ASIDE)


@dataclass
class OwnedPartition:
    """Runtime companion of one markers partition."""

    partition: int
    state: PartitionState
    clock: PartitionClock = field(default_factory=PartitionClock)
    # When this worker began owning it (wall ms): records stamped before are the previous owner's
    owned_since_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    next_deadline_ms: int | None = 0  # 0: unknown yet, so the first tick goes out at once
    ticks: TickProposals = field(default_factory=TickProposals)  # the timer's TICKs on their way
    malformed: int = 0
    tick_failures: int = 0  # TICKs whose redelivery raised (retried by the next TICK)
    counters: Counter = field(default_factory=Counter)  # (queue, what) -> messages
    # Set aside for a queue this worker knows nothing else of: what -> messages (see count)
    unattributed: Counter = field(default_factory=Counter)
    named: set = field(default_factory=set)  # queues with a counter entry
    # Views (web/queue_stats.py): gauges follow every table write; rates per time bucket.
    gauges: QueueGauges = field(default_factory=QueueGauges)
    rates: RateWindow = field(default_factory=RateWindow)
    gauges_built: bool = False  # rebuilt from the table on the first event after assignment
    # (messages due, seconds) of recent ticks that had something due (benchmarks, views)
    tick_costs: deque = field(default_factory=lambda: deque(maxlen=256))
    applied_offset: int | None = None  # cached from the table; None: read it first
    replayed: int = 0  # marker records skipped because the table already held their changes

    def applied_upto(self) -> int:
        """Offset of the last markers record whose changes the table holds (-1: none)."""
        if self.applied_offset is None:
            raw = self.state.store.get(E.applied_key(self.partition))
            self.applied_offset = -1 if raw is None else E.decode_offset(raw)
        return self.applied_offset

    def mark_applied(self, offset: int) -> None:
        """Record, after a record's changes, that the table holds them (same changelog)."""
        self.state.store.put(E.applied_key(self.partition), E.encode_offset(offset))
        self.applied_offset = offset

    def build_gauges(self) -> None:
        """Rebuild the gauges by one scan of the partition's table entries (after assignment)."""
        self.gauges.rebuild(tracker_items(self.partition))
        self.gauges_built = True

    def count(self, queue: str, what: str, n: int) -> None:
        """Count ``n`` messages of ``queue`` that ``what`` happened to (counters and rates).

        Something set aside for a queue the partition knows nothing else of is
        counted without its name: any name that fits QUEUE_NAME_RE got a
        permanent counter entry, listed in the views as a queue (one forged
        ACK per name).
        """
        if what in _SET_ASIDE_NAMES and not self.knows(queue):
            self.unattributed[what] += n
            return
        self.counters[(queue, what)] += n
        self.named.add(queue)
        self.rates.add((queue, what), n, time.time())

    def knows(self, queue: str) -> bool:
        """Whether ``queue`` has entries in the partition's table or was counted before."""
        return queue in self.named or self.gauges.knows(queue)


class OwnedPartitions(dict):
    """partition -> OwnedPartition, created on first use."""

    def __init__(self, num_partitions: int) -> None:
        super().__init__()
        self.num_partitions = num_partitions
        self.gaps = Gaps()  # offsets the agent was not handed: read from the log

    def get_or_create(self, partition: int) -> OwnedPartition:
        part = self.get(partition)
        if part is None:
            store = TableStore(partition, self.num_partitions)
            gauges = QueueGauges()
            part = self[partition] = OwnedPartition(
                partition, PartitionState(GaugedStore(store, gauges), partition), gauges=gauges)
        return part

    def assigned_anew(self) -> None:
        """After a rebalance: another worker may have changed a partition while it was not
        ours, so gauges are rebuilt on its next event and its applied offset read again
        from the (recovered) table."""
        self.gaps.forget()
        for part in list(self.values()):
            part.gauges_built = False
            part.applied_offset = None

    def totals(self) -> Counter:
        """Counters summed over owned partitions: (queue, what) -> messages."""
        out: Counter = Counter()
        for part in self.values():
            out.update(part.counters)
        return out

    def set_aside(self) -> dict[str, int]:
        """Counts of what was set aside, by reason, on the owned partitions since assignment."""
        # Besides malformed records and markers: a marker for a range the tracker does not hold,
        # a START naming a queue-topic partition that does not exist, offsets past a partition's
        # end, a payload gone from the queue topic or too large to be written again.
        out = dict.fromkeys((o.value for o in SET_ASIDE), 0)
        out[Outcome.MALFORMED_MARKER.value] = sum(p.malformed for p in self.values())
        for (_queue, what), n in self.totals().items():
            if what in out:
                out[what] += n
        for part in self.values():
            for what, n in part.unattributed.items():
                out[what] += n
        return out
