"""Time spent in Python's cyclic garbage collector, per generation.

A process that holds many records (a tracker's dispatcher read-ahead, a consumer's
messages in flight) pays for them in collections: with Python's default threshold
(700 allocations between young collections) the tracker spent a quarter of its CPU
there in a shared drain (docs/shared-queues.md). :class:`GcClock` measures it,
through ``gc.callbacks``; the tracker shows it in ``/kmq/health`` and ``/metrics``,
and the throughput benchmark per loop.

The times are wall time between a collection's start and its end, so they include
any time the thread was descheduled meanwhile.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable

GENERATIONS = 3


class GcClock:
    """Collections, seconds and the longest pause, per generation, while installed."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.collections = [0] * GENERATIONS
        self.seconds = [0.0] * GENERATIONS
        self.longest_s = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """The ``gc.callbacks`` hook: ``phase`` is "start" or "stop"."""
        now = self._clock()
        if phase == "start":
            self._started = now
            return
        took = now - self._started
        g = info["generation"]
        self.collections[g] += 1
        self.seconds[g] += took
        self.longest_s = max(self.longest_s, took)

    @property
    def total_s(self) -> float:
        return sum(self.seconds)

    def install(self) -> "GcClock":
        if self not in gc.callbacks:
            gc.callbacks.append(self)
        return self

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)

    def __enter__(self) -> "GcClock":
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def as_json(self) -> dict[str, Any]:
        return {"threshold": list(gc.get_threshold()), "collections": list(self.collections),
                "seconds": [round(s, 3) for s in self.seconds], "longest_pause_ms": round(self.longest_s * 1000, 1)}


_process_clock: GcClock | None = None


def process_clock() -> GcClock:
    """The process's clock, installed on the first call (the collector is process-wide too)."""
    global _process_clock
    if _process_clock is None:
        _process_clock = GcClock().install()
    return _process_clock


def set_young_threshold(allocations: int) -> None:
    """Collect the young generation every ``allocations`` net allocations (Python: 700);
    the older generations' thresholds are kept."""
    gc.set_threshold(allocations, *gc.get_threshold()[1:])
