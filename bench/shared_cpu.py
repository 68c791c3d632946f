"""CPU seconds of the benchmark's processes over a window, sampled in a thread (bench.shared)."""

from __future__ import annotations

import threading
import time

import psutil


def cpu_s(procs: list[psutil.Process]) -> float:
    """User + system CPU seconds of ``procs`` so far (a process gone counts as 0)."""
    total = 0.0
    for p in procs:
        try:
            c = p.cpu_times()
            total += c.user + c.system
        except psutil.NoSuchProcess:
            pass
    return total


class CpuSampler:
    """CPU seconds of named process groups, sampled every ``every_s`` in a thread."""

    def __init__(self, procs: dict[str, list[psutil.Process]], every_s: float = 0.02) -> None:
        self.procs, self.every_s = procs, every_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), {k: cpu_s(v) for k, v in self.procs.items()}))
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds per group from the last sample at or before t0 to the first at or after t1."""
        a = max((s for s in self.samples if s[0] <= t0), key=lambda s: s[0], default=self.samples[0])
        b = min((s for s in self.samples if s[0] >= t1), key=lambda s: s[0], default=self.samples[-1])
        return {k: b[1][k] - a[1][k] for k in a[1]}
