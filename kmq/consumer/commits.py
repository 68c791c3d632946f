"""The commit ledger of a partition-owned consumer: which source offsets may be committed.

A consumer of a ``dispatch="partition"`` queue commits a queue-topic offset only once
the START marker covering everything below it is durable (step 2 of the README flow):
a fetch never waits for that, so the ledger keeps, per partition and in fetch order,
``[end, durable]`` entries and hands out the end of the longest durable run. Records of
other queues on a shared partition are durable at once (there is nothing to START).
Pure: no Kafka.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable


class CommitLedger:
    """partition -> deque of ``[end_offset, durable]`` entries, oldest first."""

    __slots__ = ("_by_partition",)

    def __init__(self) -> None:
        self._by_partition: dict[int, deque[list]] = {}

    def add(self, partition: int, end: int, durable: bool) -> list:
        """Record a fetch of ``partition`` up to ``end``; returns its entry (its writer marks
        ``entry[1] = True`` once the START covering it is durable)."""
        entry = [end, durable]
        self._by_partition.setdefault(partition, deque()).append(entry)
        return entry

    def committable(self, assigned: Iterable[int]) -> tuple[dict[int, int], Callable[[], None]]:
        """Per assigned partition, the end of the longest run of durable entries, and a
        function that forgets those entries once they are committed."""
        assigned = set(assigned)
        offsets: dict[int, int] = {}
        runs = []
        for p, q in self._by_partition.items():
            n = 0
            while n < len(q) and q[n][1]:
                n += 1
            if n and p in assigned:
                offsets[p] = q[n - 1][0]
                runs.append((q, n))

        def forget() -> None:
            for q, k in runs:
                for _ in range(k):
                    q.popleft()
        return offsets, forget

    def drop(self, partitions: Iterable[int]) -> None:
        """Forget revoked partitions (their next owner starts from what was committed)."""
        for p in partitions:
            self._by_partition.pop(p, None)
