"""``kmq.protocol.store.Store`` over the tracker tables, for one markers partition.

Writes go through the Faust tables (so they reach the changelog, on the
current event's partition); ordered scans of the deadline index read the
partition's RocksDB directly, which Faust does not expose: that private
access is confined to :func:`_partition_db`.
"""

from __future__ import annotations

from typing import Any, Iterator

from kmq.protocol import entries as E
from kmq.protocol.placement import markers_partition
from tables.tracker import INDEX_VALUE, tracker_state

_FAUST_KEY_PREFIX = b"__faust"  # Faust keeps its persisted offset in the same DB


def _partition_db(table: Any, partition: int) -> Any:
    """The rocksdict DB of one table partition, or None for a non-RocksDB store."""
    store = table.data
    opener = getattr(store, "_db_for_partition", None)
    return None if opener is None else opener(partition)


def _delete(table: Any, key: bytes) -> None:
    # ``del`` writes the tombstone without reading the value first (pop would).
    try:
        del table[key]
    except KeyError:
        pass


class TableStore:
    """The state machine's store for markers partition ``partition``."""

    def __init__(self, partition: int, num_partitions: int) -> None:
        self.partition = partition
        self.num_partitions = num_partitions
        # Every index key has a deadline >= floor_ms: scans start there, past
        # the tombstones RocksDB keeps for settled deadlines.
        self.floor_ms = 0
        self.writes = 0  # table writes so far (did a record change anything?)

    def get(self, key: bytes) -> bytes | None:
        return tracker_state.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.writes += 1
        tracker_state[key] = value

    def delete(self, key: bytes) -> None:
        self.writes += 1
        _delete(tracker_state, key)

    def index_put(self, key: bytes) -> None:
        deadline_ms, _ = E.decode_index_key(key)
        if deadline_ms < self.floor_ms:
            self.floor_ms = deadline_ms
        self.writes += 1
        tracker_state[key] = INDEX_VALUE

    def index_delete(self, key: bytes) -> None:
        self.writes += 1
        _delete(tracker_state, key)

    def index_scan(self, upto_ms: int) -> Iterator[bytes]:
        db = _partition_db(tracker_state, self.partition)
        if db is None:
            yield from (k for k in sorted(self._memory_keys()) if k < E.index_bound(upto_ms))
            return
        # Collect first: the caller reads entries while we would be iterating.
        bound = E.index_bound(upto_ms)
        it = db.iter()
        it.seek(E.index_key(self.floor_ms, b""))
        keys = []
        while it.valid():
            k = it.key()
            if k >= bound:
                break
            keys.append(k)
            it.next()
        del it
        yield from keys

    def index_first(self) -> bytes | None:
        db = _partition_db(tracker_state, self.partition)
        if db is None:
            keys = sorted(self._memory_keys())
            return keys[0] if keys else None
        it = db.iter()
        it.seek(E.index_key(self.floor_ms, b""))
        first = it.key() if it.valid() else None
        del it
        if first is None or not E.is_index_key(first):
            return None
        self.floor_ms = E.decode_index_key(first)[0]
        return first

    def scan_prefix(self, prefix: bytes) -> Iterator[bytes]:
        db = _partition_db(tracker_state, self.partition)
        if db is None:
            yield from sorted(k for k in tracker_state.keys() if k.startswith(prefix))
            return
        it = db.iter()
        it.seek(prefix)
        keys = []
        while it.valid():
            k = it.key()
            if not k.startswith(prefix):
                break
            keys.append(k)
            it.next()
        del it
        yield from keys

    def _memory_keys(self) -> list[bytes]:
        # memory:// store (agent unit tests): keys of all partitions share one
        # dict; keep this partition's by the queue in the entry key.
        out = []
        for k in tracker_state.keys():
            if not E.is_index_key(k):
                continue
            _, entry_key = E.decode_index_key(k)
            queue = (E.decode_range_key(entry_key).queue if E.is_range_key(entry_key)
                     else E.decode_schedule_key(entry_key)[0])
            if markers_partition(queue, self.num_partitions) == self.partition:
                out.append(k)
        return out


def partition_items(table: Any, partition: int) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of one table partition, in key order (views, checks)."""
    db = _partition_db(table, partition)
    if db is None:
        return iter(())
    return ((k, v) for k, v in db.items() if not k.startswith(_FAUST_KEY_PREFIX))


def tracker_items(partition: int) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of one partition of the tracker table, in key order (gauges, checks)."""
    return partition_items(tracker_state, partition)


def partition_digest(partition: int) -> dict:
    """Counts, the invariant, and a hash of what is in flight (recovery checks).

    ``membership_sha256`` covers which offsets of which ranges are pending and
    the scheduled sends, not deadlines: a replay after a crash may push a
    deadline later, never change what is tracked.
    """
    import hashlib

    h = hashlib.sha256()
    ranges = schedules = pending = 0
    indexed: set[bytes] = set()
    index_keys: set[bytes] = set()
    for k, v in tracker_items(partition):
        if E.is_index_key(k):
            index_keys.add(k)
        elif E.is_range_key(k):
            ranges += 1
            entry = E.decode_inflight(v)
            pending += entry.pending.bit_count()
            h.update(k + entry.pending.to_bytes((entry.pending.bit_length() + 7) // 8, "little"))
            indexed.add(E.index_key(entry.indexed_ms, k))
        elif E.is_schedule_key(k):
            schedules += 1
            h.update(k + v)
            indexed.add(E.index_key(E.decode_scheduled(v).indexed_ms, k))
    return {"ranges": ranges, "scheduled": schedules, "pending": pending,
            "unindexed": len(indexed - index_keys), "orphan_index_keys": len(index_keys - indexed),
            "membership_sha256": h.hexdigest()}
