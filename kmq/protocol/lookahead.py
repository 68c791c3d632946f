"""What the dispatcher read of one queue partition and did not hand out yet, per queue; pure.

Demand comes in small steps (a consumer acks one message, asks for one more); without
a buffer every step would seek back and read the partition again from that queue's
cursor. One buffer for the whole partition (as before) made every queue on it wait for
the slowest: a neighbour's backlog filled it, a small queue's records in between were
dropped with it, and the reader went back to the backlog's cursor and read it all
again before it reached the small queue's new records (a flooded neighbour put 600 ms
on the small queue's p99, docs/shared-queues.md).

So records are kept **per queue**: :class:`QueueAhead` holds *every* record of its
queue in ``[start, end)``, at most ``max_records`` of them; a backlog that fills its
buffer stops growing there (its ``end``), and only that queue needs the partition read
again from there. The reader reads from the lowest offset a wanting queue *needs*
(:meth:`Lookahead.need`), which is a queue's ``end`` when its cursor is inside what it
holds: a small queue never pulls the reader back, a backlog does only for itself.
All the held records together stay under ``max_bytes``, their values and headers
counted (the queue holding most is cut).

An *index* of every record read (offset, bytes, which queue) over a contiguous window
answers what a consumer's reader would fetch around a range (references, dispatch_lanes;
kmq.protocol.read_index). Nothing here walks the records one by one in Python: a read is
split by queue once (kmq.protocol.chunk) and each queue's part is taken as slices.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import repeat
from typing import Iterable

from kmq.protocol.chunk import Chunk, record_bytes
from kmq.protocol.dispatch import Want, select_own
from kmq.protocol.read_index import OTHER, ReadIndex

QUEUE_AHEAD_RECORDS = 20_000     # records of one queue kept read ahead, at most
AHEAD_BYTES = 32 * 1024 * 1024   # value and header bytes kept read ahead per queue partition, at most
INDEX_RECORDS = 1 << 17          # records of every queue the index spans, at most (28 B each)


class QueueAhead:
    """Every record of one queue at offsets ``[start, end)`` (read, not yet handed out)."""

    __slots__ = ("records", "offsets", "sizes", "start", "end", "bytes")

    def __init__(self, at: int) -> None:
        self.records: list = []
        self.offsets: list[int] = []
        self.sizes: list[int] = []  # each record's value and header bytes (chunk.record_bytes)
        self.start = self.end = at
        self.bytes = 0

    def reset(self, at: int) -> None:
        self.records.clear()
        self.offsets.clear()
        self.sizes.clear()
        self.start = self.end = at
        self.bytes = 0

    def holds(self, cursor: int) -> bool:
        return self.start <= cursor <= self.end

    def trim(self, cursor: int) -> None:
        """Forget records below ``cursor`` (handed out, or the queue looks past them)."""
        if cursor > self.end:
            self.reset(cursor)
            return
        cut = bisect_left(self.offsets, cursor)
        if cut:
            if cut == len(self.records):
                self.bytes = 0
            else:
                self.bytes -= sum(self.sizes[:cut])
            del self.records[:cut]
            del self.offsets[:cut]
            del self.sizes[:cut]
        self.start = max(self.start, cursor)

    def cut_to(self, n: int) -> None:
        """Keep the oldest ``n`` records; ``end`` becomes the first one dropped."""
        if n < len(self.records):
            self.end = self.offsets[n]
            self.bytes -= sum(self.sizes[n:])
            del self.records[n:]
            del self.offsets[n:]
            del self.sizes[n:]


class Lookahead:
    """One queue partition's records read ahead, per queue (see the module docstring)."""

    __slots__ = ("position", "queues", "max_records", "max_bytes", "index", "_ids")

    def __init__(self, max_records: int = QUEUE_AHEAD_RECORDS, max_bytes: int = AHEAD_BYTES,
                 max_index: int = INDEX_RECORDS) -> None:
        self.position: int | None = None  # the next offset the reader returns
        self.queues: dict[bytes, QueueAhead] = {}
        self.max_records, self.max_bytes = max_records, max_bytes
        self.index = ReadIndex(max_index)
        self._ids: dict[bytes, int] = {}  # queue key -> owner id in the index

    # -- where to read ----------------------------------------------------------------------

    def need(self, key: bytes, cursor: int) -> int:
        """The first offset the reader must return for this queue to see past ``cursor``."""
        qa = self.queues.get(key)
        return qa.end if qa is not None and qa.holds(cursor) else cursor

    def plan(self, needs: Iterable[int]) -> int | None:
        """Where the reader must go for these needs: the offset to seek to, or None (on)."""
        start = min(needs, default=None)
        if start is None or start == self.position:
            return None
        self.position = start
        return start

    def held(self, key: bytes, cursor: int) -> tuple[list, int] | None:
        """``key``'s records held from ``cursor`` on and the offset they are complete to."""
        qa = self.queues.get(key)
        if qa is None or not qa.holds(cursor):
            return None
        return qa.records[bisect_left(qa.offsets, cursor):], qa.end

    def serve(self, wants: dict[bytes, Want]) -> tuple[bool, int | None]:
        """Fill each want from what its queue holds; (any demand left, offset to seek to)."""
        needs = []
        for key, w in wants.items():
            if w.demand > 0:
                qa = self.queues.get(key)
                if qa is not None and qa.holds(w.cursor):
                    select_own(w, qa.records, qa.offsets, qa.end)
                if w.demand > 0:
                    needs.append(self.need(key, w.cursor))
        return bool(needs), self.plan(needs)

    def take(self, records: list | Chunk, kept: set[bytes], wants: dict[bytes, Want]) -> None:
        """A chunk read from ``position`` on: kept for the queues with consumers (``kept``
        and the wanting ones), and taken by the wants."""
        chunk = records if isinstance(records, Chunk) else Chunk(records)
        self.add(chunk, kept | set(wants))
        for key, w in wants.items():
            recs, offsets = chunk.own(key)
            select_own(w, recs, offsets, self.position)

    # -- what was read ----------------------------------------------------------------------

    def add(self, records: list | Chunk, wanted: set[bytes], end: int | None = None) -> None:
        """A chunk the reader returned from ``position`` on, in offset order; ``end``: the
        offset after it if known to be more (transaction markers, the partition's end).
        Kept for the ``wanted`` queues only; other queues' held records are dropped."""
        if self.position is None:
            return
        chunk = records if isinstance(records, Chunk) else Chunk(records)
        chunk_start = self.position
        chunk_end = max(chunk.offsets[-1] + 1 if chunk.offsets else chunk_start, end or 0)
        for k in [k for k in self.queues if k not in wanted]:
            del self.queues[k]
        for k in wanted:
            qa = self.queues.get(k)
            if qa is None:
                qa = self.queues[k] = QueueAhead(chunk_start)
            if chunk_start < qa.start or (chunk_start > qa.end and not qa.records):
                qa.reset(chunk_start)  # read again from below it, or after a jump past nothing
            if qa.start <= chunk_start <= qa.end and len(qa.records) < self.max_records:
                self._grow(qa, chunk, k, chunk_end)
        self._index(chunk, chunk_start, chunk_end)
        self.position = chunk_end
        self._keep_within_bytes()

    def _grow(self, qa: QueueAhead, chunk: Chunk, key: bytes, chunk_end: int) -> None:
        """Append ``key``'s records of the chunk past ``qa.end``, up to ``max_records``."""
        recs, offsets = chunk.own(key)
        i = bisect_left(offsets, qa.end)
        room = self.max_records - len(qa.records)
        j = min(len(recs), i + room)
        if j > i:
            sizes = record_bytes(recs[i:j], chunk.sizes[i:j] if recs is chunk.records else None)
            qa.records += recs[i:j]
            qa.offsets += offsets[i:j]
            qa.sizes += sizes
            qa.bytes += sum(sizes)
        # Full: complete up to its first record left out, read again from there.
        qa.end = offsets[j] if j < len(recs) else max(qa.end, chunk_end)

    def _index(self, chunk: Chunk, chunk_start: int, chunk_end: int) -> None:
        ids = self._ids
        for k in self.queues:  # an owner id for every kept queue (others are OTHER)
            if k not in ids:
                ids[k] = len(ids)
        if chunk.single is not None:
            owner = ids.get(chunk.single, OTHER)
            owners: array | list[int] = array("i", [owner]) * len(chunk)
        else:
            owners = list(map(ids.get, chunk.keys, repeat(OTHER)))
        self.index.extend(chunk_start, chunk_end, chunk.offsets, chunk.sizes, owners)

    def trim(self, key: bytes, cursor: int) -> None:
        qa = self.queues.get(key)
        if qa is not None:
            qa.trim(cursor)

    def forget_position(self) -> None:
        """The reader let the partition go: the next :meth:`plan` points it anew."""
        self.position = None
        self.queues.clear()
        self._ids.clear()
        self.index.clear()

    def _keep_within_bytes(self) -> None:
        total = sum(qa.bytes for qa in self.queues.values())
        while total > self.max_bytes:
            qa = max(self.queues.values(), key=lambda q: q.bytes)
            before = qa.bytes
            qa.cut_to(len(qa.records) // 2)
            total -= before - qa.bytes

    # -- what a consumer's reader would fetch (references) -------------------------------

    def indexed(self, start: int) -> bool:
        """The index spans what a reader pointed at ``start`` fetches from there on."""
        return self.index.spans(start)

    def bytes_between(self, lo: int, hi: int) -> int:
        """Payload bytes of every queue's records at offsets ``[lo, hi)`` (as indexed)."""
        return self.index.bytes_between(lo, hi)

    def bytes_from(self, start: int, key: bytes, window_bytes: int) -> tuple[int, int]:
        """Payload bytes of the records indexed from ``start`` on until ``window_bytes`` are
        counted: (those of ``key``'s records, all). What a reader pointed at ``start`` fetches."""
        return self.index.bytes_from(start, self._ids.get(key), window_bytes)
