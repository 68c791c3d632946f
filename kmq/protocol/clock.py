"""The tracker's deadline clock for one markers partition (seed 003).

Deadlines are kept in *marker time*: times the tracker trusts because they
come from one place (the tick records the tracker writes itself, or broker
LogAppendTime stamps), advanced between them by a monotonic clock. A
consumer's wall clock never moves it, so a consumer that is ten minutes
ahead or behind cannot make anything due early or late. The clock never
goes backwards.
"""

from __future__ import annotations

import time
from typing import Callable


class PartitionClock:
    """Trusted marker time plus monotonic time elapsed since it was seen."""

    __slots__ = ("_mono_s", "_base_ms", "_base_mono_s")

    def __init__(self, start_ms: int | None = None,
                 mono_s: Callable[[], float] = time.monotonic) -> None:
        self._mono_s = mono_s
        self._base_ms = int(time.time() * 1000) if start_ms is None else start_ms
        self._base_mono_s = mono_s()

    def now_ms(self) -> int:
        """Current marker time in epoch milliseconds."""
        return self._base_ms + int((self._mono_s() - self._base_mono_s) * 1000)

    def observe(self, trusted_ms: int) -> int:
        """Advance to a trusted time if it is ahead; return the current time."""
        now = self.now_ms()
        if trusted_ms > now:
            self._base_ms = trusted_ms
            self._base_mono_s = self._mono_s()
            return trusted_ms
        return now
