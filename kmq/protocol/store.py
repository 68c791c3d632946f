"""The state machine's storage seam: :class:`Store`, and :class:`MemoryStore` behind it.

The state machine (:mod:`kmq.protocol.state`) keeps its entries and deadline
index behind this narrow protocol of two ordered key-value maps, so it never
knows what holds them: the tracker backs it with changelogged RocksDB tables
(``tables/store.py``), tests and tools with :class:`MemoryStore`. The write
order that keeps a crash harmless is the state machine's; this module only
says what a store must do.
"""

from __future__ import annotations

import bisect
from typing import Iterator, Protocol

from kmq.protocol import entries as E


class Store(Protocol):
    """Entries (ranges, schedules) and the deadline index, as ordered byte keys.

    The tracker keeps both in one changelogged table, so after a crash the
    state is a prefix of one ordered write log. Writes are ordered so that
    every prefix keeps the invariant *an entry's indexed deadline key
    exists*: a new index key is written before the entry that points at it,
    and the old one deleted after. A prefix can leave an orphan index key;
    :meth:`~kmq.protocol.state.PartitionState.due` reports it and
    :meth:`~kmq.protocol.state.PartitionState.settle` removes it.

    ``writes`` counts the writes (puts and deletes, index ones included) so far: the
    markers agent tells by it whether a record changed anything.
    """

    writes: int

    def get(self, key: bytes) -> bytes | None: ...
    def put(self, key: bytes, value: bytes) -> None: ...
    def delete(self, key: bytes) -> None: ...
    def index_put(self, key: bytes) -> None: ...
    def index_delete(self, key: bytes) -> None: ...
    def index_scan(self, upto_ms: int) -> Iterator[bytes]:
        """Index keys with deadline <= upto_ms, ascending."""
    def index_first(self) -> bytes | None: ...
    def scan_prefix(self, prefix: bytes) -> Iterator[bytes]:
        """Entry keys starting with ``prefix``, ascending."""


class MemoryStore:
    """An in-memory :class:`Store` (tests, tools); same ordering as the RocksDB tables."""

    def __init__(self) -> None:
        self.entries: dict[bytes, bytes] = {}
        self.index: list[bytes] = []
        self.writes = 0

    def get(self, key: bytes) -> bytes | None:
        return self.entries.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.writes += 1
        self.entries[key] = value

    def delete(self, key: bytes) -> None:
        self.writes += 1
        self.entries.pop(key, None)

    def index_put(self, key: bytes) -> None:
        self.writes += 1
        i = bisect.bisect_left(self.index, key)
        if i == len(self.index) or self.index[i] != key:
            self.index.insert(i, key)

    def index_delete(self, key: bytes) -> None:
        self.writes += 1
        i = bisect.bisect_left(self.index, key)
        if i < len(self.index) and self.index[i] == key:
            del self.index[i]

    def index_scan(self, upto_ms: int) -> Iterator[bytes]:
        end = bisect.bisect_left(self.index, E.index_bound(upto_ms))
        return iter(self.index[:end])

    def index_first(self) -> bytes | None:
        return self.index[0] if self.index else None

    def scan_prefix(self, prefix: bytes) -> Iterator[bytes]:
        return iter(sorted(k for k in self.entries if k.startswith(prefix)))
