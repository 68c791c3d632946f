"""Event counts in fixed time buckets over a sliding window, with bounded memory.

The tracker's views show what happened per minute (acked, redelivered,
dead-lettered ...) and a rate chart of the last minutes. Counting since
start cannot give that; keeping every event cannot scale. A
:class:`RateWindow` keeps ``buckets`` buckets of ``bucket_s`` seconds each
(epoch-aligned, so windows of several workers line up when merged), each a
small map ``key -> count``. A bucket holds at most ``max_keys`` keys; further
keys are folded into :data:`OTHER` for their event, so memory stays bounded
whatever the number of queues. Time is an argument: nothing here reads a clock.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Hashable, Iterable

OTHER = "~other"  # the queue name that collects keys past a bucket's key budget


class RateWindow:
    """Counts of ``(queue, what)`` keys per epoch-aligned time bucket."""

    def __init__(self, bucket_s: int = 10, buckets: int = 60, max_keys: int = 20_000) -> None:
        if bucket_s < 1 or buckets < 1 or max_keys < 1:
            raise ValueError("bucket_s, buckets and max_keys must be at least 1")
        self.bucket_s = bucket_s
        self.buckets = buckets
        self.max_keys = max_keys
        self._slots: dict[int, Counter] = {}  # bucket index (epoch s // bucket_s) -> counts

    def _index(self, now_s: float) -> int:
        return int(now_s // self.bucket_s)

    def add(self, key: tuple[str, str], n: int, now_s: float) -> None:
        """Count ``n`` events of ``key`` (a ``(queue, what)`` pair) at ``now_s``."""
        if n <= 0:
            return
        i = self._index(now_s)
        slot = self._slots.get(i)
        if slot is None:
            slot = self._slots[i] = Counter()
            self._expire(i)
        if key not in slot and len(slot) >= self.max_keys:
            key = (OTHER, key[1])
        slot[key] += n

    def _expire(self, current: int) -> None:
        oldest = current - self.buckets + 1
        for i in [i for i in self._slots if i < oldest]:
            del self._slots[i]

    def window(self, window_s: float, now_s: float) -> Counter:
        """Counts per key in the buckets that overlap the last ``window_s`` seconds.

        Buckets are whole: with 10 s buckets, the last 60 s are the current
        (partial) bucket and the 5 before it, so an event is counted for 50
        to 60 seconds.
        """
        current = self._index(now_s)
        first = current - max(1, int(window_s // self.bucket_s)) + 1
        out: Counter = Counter()
        for i, slot in self._slots.items():
            if first <= i <= current:
                out.update(slot)
        return out

    def history(self, now_s: float, keep: Callable[[Hashable], bool] = lambda _k: True,
                group: Callable[[tuple[str, str]], str] = lambda k: k[1]) -> dict[int, Counter]:
        """Per bucket start (epoch seconds): counts summed by ``group(key)`` over kept keys.

        Every bucket of the window is present, empty ones too, so a chart has
        a point per bucket.
        """
        current = self._index(now_s)
        out: dict[int, Counter] = {}
        for i in range(current - self.buckets + 1, current + 1):
            c: Counter = Counter()
            for k, n in self._slots.get(i, {}).items():
                if keep(k):
                    c[group(k)] += n
            out[i * self.bucket_s] = c
        return out

    def keys(self) -> Iterable[tuple[str, str]]:
        """Every key with a count in the window."""
        seen: set = set()
        for slot in self._slots.values():
            seen.update(slot)
        return seen


def merge_histories(histories: Iterable[dict[int, dict[str, int]]]) -> dict[int, Counter]:
    """Sum bucket histories of several workers (buckets are epoch-aligned)."""
    out: dict[int, Counter] = {}
    for h in histories:
        for start, counts in h.items():
            out.setdefault(int(start), Counter()).update(counts)
    return dict(sorted(out.items()))
