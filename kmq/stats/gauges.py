"""Per-queue gauges of one markers partition, kept in memory as the state changes.

The views must answer "how many in flight, how many scheduled, how old is the
oldest" for thousands of queues without scanning the tracker's entries per
request. :class:`GaugedStore` wraps the state machine's
:class:`~kmq.protocol.store.Store` and tells :class:`QueueGauges` about every write,
so the gauges follow the state exactly, whatever marker or tick caused the
write. After a (re)assignment the gauges are rebuilt by one scan of the
partition (:meth:`QueueGauges.rebuild`), then kept up incrementally.

What is counted:

- ``in_flight[queue]``: pending offsets of the queue's range entries
  (delivered and not yet acked, redelivered or dead-lettered; released
  offsets waiting out their delay included).
- ``scheduled[queue]``: delayed sends held (one deadline-index key each).
- ``started_upto[(queue, partition)]``: the highest range end a START (or a
  shared queue's ACQUIRE) reported on that queue-topic partition, or the table's
  cursor there: the queue's records below it were fetched by a consumer (the
  depth scan starts there). The cursor keys make it survive a restart or a
  takeover: ranges settled before are gone from the table, the cursor is not.
- oldest in-flight start per queue (:meth:`oldest_started_ms`), from a heap
  per queue with lazy deletion (entries checked against ``ranges``).
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from typing import Iterable, Iterator

from kmq.protocol import entries as E
from kmq.protocol.store import Store

_HEAP_SLACK = 32


def _pending_and_started(value: bytes) -> tuple[int, int]:
    entry = E.decode_inflight(value)
    return entry.pending.bit_count(), entry.started_ms


class QueueGauges:
    """In-flight, scheduled and oldest-start gauges of the queues of one markers partition."""

    def __init__(self) -> None:
        self.in_flight: Counter[str] = Counter()
        self.scheduled: Counter[str] = Counter()
        self.started_upto: dict[tuple[str, int], int] = {}
        # range key -> (queue, pending offsets, started_ms): the entries' summary
        self.ranges: dict[bytes, tuple[str, int, int]] = {}
        self._range_count: Counter[str] = Counter()
        self._oldest: dict[str, list[tuple[int, bytes]]] = {}

    # -- writes observed ------------------------------------------------------------

    def on_put(self, key: bytes, value: bytes) -> None:
        if not E.is_range_key(key):
            if key[:1] == E.CURSOR_PREFIX:
                self._raise_upto(E.decode_cursor_key(key), E.decode_offset(value))
            return  # scheduled sends are counted by their index key (one per send)
        ref = E.decode_range_key(key)
        pending, started_ms = _pending_and_started(value)
        old = self.ranges.get(key)
        if old is None:
            self._range_count[ref.queue] += 1
            old_pending, old_started = 0, None
        else:
            _, old_pending, old_started = old
        self.ranges[key] = (ref.queue, pending, started_ms)
        self._add(self.in_flight, ref.queue, pending - old_pending)
        if started_ms != old_started:
            heap = self._oldest.setdefault(ref.queue, [])
            heapq.heappush(heap, (started_ms, key))
            if len(heap) > 2 * self._range_count[ref.queue] + _HEAP_SLACK:
                self._compact(ref.queue)
        self._raise_upto((ref.queue, ref.partition), ref.end)

    def _raise_upto(self, upto: tuple[str, int], offset: int) -> None:
        if offset > self.started_upto.get(upto, -1):
            self.started_upto[upto] = offset

    def on_delete(self, key: bytes) -> None:
        old = self.ranges.pop(key, None)
        if old is None:
            return
        queue, pending, _ = old
        self._add(self.in_flight, queue, -pending)
        self._add(self._range_count, queue, -1)

    def on_index_put(self, index_key: bytes) -> None:
        _, entry_key = E.decode_index_key(index_key)
        if entry_key[:1] == b"S":
            self.scheduled[E.decode_schedule_key(entry_key)[0]] += 1

    def on_index_delete(self, index_key: bytes) -> None:
        _, entry_key = E.decode_index_key(index_key)
        if entry_key[:1] == b"S":
            self._add(self.scheduled, E.decode_schedule_key(entry_key)[0], -1)

    @staticmethod
    def _add(counter: Counter, queue: str, delta: int) -> None:
        n = counter.get(queue, 0) + delta
        if n > 0:
            counter[queue] = n
        else:
            counter.pop(queue, None)

    # -- reads ------------------------------------------------------------------------

    def oldest_started_ms(self, queue: str) -> int | None:
        """Start time of the queue's oldest range that still has pending offsets."""
        heap = self._oldest.get(queue)
        while heap:
            started_ms, key = heap[0]
            live = self.ranges.get(key)
            if live is not None and live[2] == started_ms and live[1] > 0:
                return started_ms
            heapq.heappop(heap)
        self._oldest.pop(queue, None)
        return None

    def _compact(self, queue: str) -> None:
        heap = [(s, k) for s, k in self._oldest.get(queue, ())
                if (live := self.ranges.get(k)) is not None and live[2] == s]
        heapq.heapify(heap)
        self._oldest[queue] = heap

    def queue_ranges(self, queue: str) -> list[bytes]:
        """Range keys of one queue (the detail view; O(entries of the partition))."""
        return [k for k, (q, _, _) in self.ranges.items() if q == queue]

    def queues(self) -> set[str]:
        return set(self.in_flight) | set(self.scheduled) | set(self._range_count)

    def knows(self, queue: str) -> bool:
        """Whether the partition's entries hold anything of ``queue`` (O(1))."""
        return queue in self._range_count or queue in self.scheduled

    # -- rebuild ----------------------------------------------------------------------

    def rebuild(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Recount from every (key, value) of the partition (after a (re)assignment)."""
        keep_upto = self.started_upto
        self.__init__()
        # START watermarks are not in the table once a range is settled: keep
        # what this worker saw, the entries below can only raise it.
        self.started_upto = dict(keep_upto)
        for key, value in items:
            if E.is_index_key(key):
                self.on_index_put(key)
            elif E.is_range_key(key) or key[:1] == E.CURSOR_PREFIX:
                self.on_put(key, value)


class GaugedStore:
    """A :class:`~kmq.protocol.store.Store` that reports every write to :class:`QueueGauges`."""

    def __init__(self, store: Store, gauges: QueueGauges) -> None:
        self.store = store
        self.gauges = gauges

    def get(self, key: bytes) -> bytes | None:
        return self.store.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.store.put(key, value)
        self.gauges.on_put(key, value)

    def delete(self, key: bytes) -> None:
        self.store.delete(key)
        self.gauges.on_delete(key)

    def index_put(self, key: bytes) -> None:
        # A scheduled send has one index key: count it once, even when a
        # replay after a crash writes it again.
        counted = key[9:10] == b"S" and not self._has_index(key)
        self.store.index_put(key)
        if counted:
            self.gauges.on_index_put(key)

    def index_delete(self, key: bytes) -> None:
        counted = key[9:10] == b"S" and self._has_index(key)
        self.store.index_delete(key)
        if counted:
            self.gauges.on_index_delete(key)

    def _has_index(self, key: bytes) -> bool:
        index = getattr(self.store, "index", None)
        if isinstance(index, list):  # kmq.protocol.store.MemoryStore keeps index keys apart
            i = bisect.bisect_left(index, key)
            return i < len(index) and index[i] == key
        return self.store.get(key) is not None  # the tracker table holds both

    def index_scan(self, upto_ms: int) -> Iterator[bytes]:
        return self.store.index_scan(upto_ms)

    def index_first(self) -> bytes | None:
        return self.store.index_first()

    def scan_prefix(self, prefix: bytes) -> Iterator[bytes]:
        return self.store.scan_prefix(prefix)

    def __getattr__(self, name: str):
        # floor_ms, partition ... of the wrapped store (tables.store.TableStore)
        return getattr(self.store, name)
