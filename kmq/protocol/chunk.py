"""One read of a queue partition, split by queue; pure.

The dispatcher reads every record of the partitions its shared queues live on, and for
each record asks the same few things: its offset, its queue (the record key), its bytes.
Asked one record at a time in Python that cost more than reading it (docs/shared-queues.md,
"Raw throughput without work"); a :class:`Chunk` asks each question once for the whole
read, in C (``map`` over the records' own methods), and hands each queue its records as
slices (a queue alone in what was read gets the read itself, nothing built per record).
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import add, eq, itemgetter
from typing import Any

_NAME, _VALUE = itemgetter(0), itemgetter(1)


class Chunk:
    """Records read from one queue partition, in offset order, with their offsets, keys and
    sizes (computed once, in C) and each queue's own records (computed on first use)."""

    __slots__ = ("records", "offsets", "keys", "_sizes", "_own", "single")

    def __init__(self, records: list) -> None:
        self.records = records
        if records:
            t = type(records[0])  # every record of one read has the same type
            self.offsets: list[int] = list(map(t.offset, records))
            self.keys: list[Any] = list(map(t.key, records))
        else:
            self.offsets, self.keys = [], []
        self._sizes: list[int] | None = None
        self._own: dict[Any, tuple[list, list[int]]] = {}
        first = self.keys[0] if self.keys else None
        # The key of every record, if they all have the same one (the common case: a queue
        # alone on its partition); None otherwise.
        self.single = first if first is not None and self.keys.count(first) == len(self.keys) else None

    def __len__(self) -> int:
        return len(self.records)

    @property
    def sizes(self) -> list[int]:
        """Bytes of each record (what ``len()`` of a record says: its value)."""
        if self._sizes is None:
            self._sizes = list(map(len, self.records))
        return self._sizes

    def own(self, key: Any) -> tuple[list, list[int]]:
        """``key``'s records of this read and their offsets, in offset order."""
        got = self._own.get(key)
        if got is None:
            if key is not None and key == self.single:
                got = (self.records, self.offsets)
            elif self.single is not None:
                got = ([], [])
            else:
                sel = list(map(eq, self.keys, repeat(key)))
                got = (list(compress(self.records, sel)), list(compress(self.offsets, sel)))
            self._own[key] = got
        return got

    def own_sizes(self, key: Any) -> list[int]:
        """Bytes of ``key``'s records of this read (as :meth:`own` orders them)."""
        recs, _ = self.own(key)
        if recs is self.records:
            return self.sizes
        return list(map(len, recs))


def record_bytes(records: list, value_sizes: list[int] | None = None) -> list[int]:
    """Bytes each record holds, its value's and its headers' (names and values): what the
    dispatcher counts of the records it keeps. A record's ``len()`` is its value's only, and
    records carrying a megabyte of headers on a short value held memory nothing counted
    (docs/reliability.md). The common cases (no headers; one header each, ``kmq.id``) are
    asked of all records at once, in C. ``value_sizes``: their ``len()``s, if known."""
    if not records:
        return []
    sizes = list(map(len, records)) if value_sizes is None else value_sizes
    headers = list(map(type(records[0]).headers, records))
    none = headers.count(None)
    if none == len(headers):
        return sizes
    if not none:
        try:
            if set(map(len, headers)) == {1}:
                only = list(map(_NAME, headers))
                return list(map(add, sizes, map(add, map(len, map(_NAME, only)), map(len, map(_VALUE, only)))))
        except TypeError:  # a header without a value
            pass
    return list(map(add, sizes, map(headers_bytes, headers)))


def record_size(record: Any) -> int:
    """:func:`record_bytes` of one record."""
    return len(record) + headers_bytes(record.headers())


def headers_bytes(headers: list | None) -> int:
    return sum(len(k) + len(v or b"") for k, v in headers) if headers else 0
