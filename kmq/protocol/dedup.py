"""Deduplication of one queue partition by ``kmq.dedup-id``, pure (docs/ordering.md, section 3).

The first record of an id opens a window of ``window_ms`` on the records' own timestamps
(so a re-reader of the log decides the same); later records of the id inside it are
duplicates. State is one entry per id within its window, bounded by ``max_entries``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

MAX_DEDUP_ID_BYTES = 128       # SQS's MessageDeduplicationId limit
MAX_DEDUP_ENTRIES = 100_000  # ids remembered per queue partition (~20 MB); the oldest go first beyond
DEFAULT_DEDUP_WINDOW_S = 300.0  # SQS's figure


def valid_dedup_id(raw: bytes | None) -> bytes | None:
    """The dedup id of a record's ``kmq.dedup-id`` header, or None (absent, empty, too long)."""
    if not raw or len(raw) > MAX_DEDUP_ID_BYTES:
        return None
    return bytes(raw)


def dedup_message_id(queue: str, dedup_id: bytes) -> str:
    """The id every send of ``dedup_id`` on ``queue`` gets: the first's, with no round trip."""
    digest = hashlib.sha256(queue.encode() + b"\x00" + dedup_id).hexdigest()
    return "d-" + digest[:24]


class Dedup:
    """Deduplication of one queue partition by ``kmq.dedup-id`` (see the module docstring).

    ``ts_ms`` is the record's timestamp: the log's time, so the decision depends on the log
    only. Entries leave when the largest timestamp seen is past their window, or, beyond
    ``max_entries``, oldest first (counted in ``evicted``). Given the reader's wall clock,
    an entry leaves by the smaller of its timestamp and that clock when it came: one
    stamped years ahead leaves a window later, and does not keep those behind it.
    """

    def __init__(self, window_ms: int, max_entries: int = MAX_DEDUP_ENTRIES) -> None:
        if window_ms <= 0 or max_entries <= 0:
            raise ValueError("window_ms and max_entries must be positive")
        self.window_ms = window_ms
        self.max_entries = max_entries
        # id -> (ts, offset, msg id, leaves by) of the window's first record
        self._first: OrderedDict[bytes, tuple[int, int, str, int]] = OrderedDict()
        self._clock_ms = 0
        self.evicted = 0

    def set_window(self, window_ms: int) -> None:
        """The queue's window changed: the ids seen are kept, judged by the new window from
        now on (a shorter one drops those already past it)."""
        if window_ms <= 0:
            raise ValueError("window_ms must be positive")
        self.window_ms = window_ms
        self._expire()

    def __len__(self) -> int:
        return len(self._first)

    def check(self, dedup_id: bytes, msg_id: str, offset: int, ts_ms: int,
              now_ms: int | None = None) -> str | None:
        """None: the record at ``offset`` is the first of its id in the window (accepted; also
        when that record is read again); else the first record's message id (this one is a
        duplicate, to drop).

        ``now_ms``: the reader's wall clock. Timestamps are the producers' clocks: one ahead
        of it moves the log's time only up to it, so a producer whose clock is years ahead
        cannot expire every id of the partition at once."""
        clock = ts_ms if now_ms is None else min(ts_ms, now_ms)
        if clock > self._clock_ms:
            self._clock_ms = clock
            self._expire()
        first = self._first.get(dedup_id)
        if first is not None and first[1] == offset:
            return None
        if first is not None and abs(ts_ms - first[0]) < self.window_ms:
            return first[2]
        self._first.pop(dedup_id, None)
        self._first[dedup_id] = (ts_ms, offset, msg_id, clock)
        while len(self._first) > self.max_entries:
            self._first.popitem(last=False)
            self.evicted += 1
        return None

    def _expire(self) -> None:
        horizon = self._clock_ms - self.window_ms
        first = self._first
        while first:
            key, (_, _, _, leaves_by) = next(iter(first.items()))
            if leaves_by > horizon:
                return
            del first[key]
