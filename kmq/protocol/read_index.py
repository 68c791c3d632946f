"""What a reader pointed at an offset of a queue partition would fetch; pure.

The dispatcher hands a range out by reference only where the queue's own records make up
most of what the consumer's reader fetches for it: the range and the read-ahead after
it (kmq.protocol.deliveries). :class:`ReadIndex` keeps, for every record the dispatcher
read over one contiguous window of a partition, its offset, its bytes and which queue it
belongs to (an owner id; ``OTHER`` for a queue nobody wanted then), plus running byte
totals, so those questions cost a binary search, not a walk over a megabyte of records
(at 100-byte records a walk was 10,000 steps per delivery).

Arrays, not lists: 20 bytes a record, at most ``max_records`` of them.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import accumulate, compress, islice, repeat
from operator import eq

OTHER = -1  # the owner of a record of a queue nobody wants here


class ReadIndex:
    """Offsets, bytes and owners of the records read over ``[start, end)`` (see module)."""

    __slots__ = ("start", "end", "max_records", "offsets", "sizes", "owners", "totals")

    def __init__(self, max_records: int) -> None:
        self.max_records = max_records
        self.start = self.end = 0
        self.offsets = array("q")
        self.sizes = array("i")
        self.owners = array("i")
        self.totals = array("q")  # totals[i]: bytes of every record indexed up to and including i

    def clear(self, at: int = 0) -> None:
        del self.offsets[:], self.sizes[:], self.owners[:], self.totals[:]
        self.start = self.end = at

    def extend(self, chunk_start: int, chunk_end: int, offsets: list[int], sizes: list[int],
               owners: array | list[int]) -> None:
        """A chunk read from ``chunk_start`` to ``chunk_end``: the index goes on with it if it
        spans ``chunk_start``, else starts anew there. Records already indexed are skipped."""
        if not self.start <= chunk_start <= self.end or not self.offsets:
            self.clear(chunk_start)
        i = bisect_left(offsets, self.end)
        if i < len(offsets):
            last = self.totals[-1] if self.totals else 0
            self.offsets.extend(offsets[i:])
            self.sizes.extend(sizes[i:])
            self.owners.extend(owners[i:])
            self.totals.extend(islice(accumulate(sizes[i:], initial=last), 1, None))
        self.end = max(self.end, chunk_end)
        over = len(self.offsets) - self.max_records
        if over > 0:
            del self.offsets[:over], self.sizes[:over], self.owners[:over], self.totals[:over]
            self.start = self.offsets[0]

    def spans(self, start: int) -> bool:
        """The index spans what a reader pointed at ``start`` fetches from there on."""
        return bool(self.offsets) and self.start <= start < self.end

    def _before(self, i: int) -> int:
        """Bytes indexed before entry ``i`` (0 <= i <= len)."""
        if i == 0:
            return self.totals[0] - self.sizes[0] if self.totals else 0
        return self.totals[i - 1]

    def bytes_between(self, lo: int, hi: int) -> int:
        """Payload bytes of every queue's records at offsets ``[lo, hi)`` (as indexed)."""
        i, j = bisect_left(self.offsets, lo), bisect_left(self.offsets, hi)
        return self._before(j) - self._before(i) if j > i else 0

    def bytes_from(self, start: int, owner: int | None, window_bytes: int) -> tuple[int, int]:
        """Bytes of the records indexed from ``start`` on until ``window_bytes`` are counted
        (the record that crosses it included): (``owner``'s, all)."""
        if window_bytes <= 0:
            return 0, 0
        n = len(self.offsets)
        i = bisect_left(self.offsets, start)
        if i >= n:
            return 0, 0
        base = self._before(i)
        j = min(bisect_left(self.totals, base + window_bytes, i) + 1, n)
        total = self._before(j) - base
        if owner is None:
            return 0, total
        owners = self.owners[i:j]
        if owners.count(owner) == j - i:
            return total, total
        return sum(compress(self.sizes[i:j], map(eq, owners, repeat(owner)))), total
