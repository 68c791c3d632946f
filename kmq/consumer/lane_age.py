"""How long a delivery waited on its lane before this consumer read it (pure: times passed in).

The dispatcher's visibility deadline for a delivery runs from its dispatch, and the
consumer sees it only when it reads the lane. A consumer that stalled (SIGSTOP, a
suspended VM) with deliveries on their way reads them after the stall, when the tracker
may have taken them back and another consumer acked them: counted from their arrival,
they looked fresh and reached user code (kmq.consumer.stale). A delivery header's record
timestamp is its dispatch on the dispatcher's clock, which may differ from ours (skew),
so a delivery's age is measured against the least ``arrival - timestamp`` seen lately
(the skew plus the quickest delivery's latency), not against zero: a constant skew
cancels, and the estimate is never above the true age.

The least difference is kept over the last :data:`WINDOW` to :data:`2 * WINDOW <WINDOW>`
deliveries, counted, not timed, so a stall however long keeps what came before it; a
clock stepped forward (ours, or the dispatcher's back) makes deliveries look older
until that many came after the step.
"""

from __future__ import annotations

WINDOW = 32  # deliveries per bucket of the least-difference window
# A difference beyond this is no clock's skew: never a baseline (a forged timestamp in the
# future made every real delivery look old); measured against the baseline, as a stall
# longer than it is (before, such a delivery was age 0: a 10-minute stall looked fresh).
MAX_SKEW_MS = 10 * 60 * 1000


class LaneAge:
    """The age of deliveries read from one consumer's lanes (see the module docstring)."""

    __slots__ = ("_least", "_older_least", "_seen")

    def __init__(self) -> None:
        self._least: int | None = None        # least difference in the current bucket (ms)
        self._older_least: int | None = None  # ... in the bucket before it
        self._seen = 0                        # deliveries in the current bucket

    def age_s(self, arrived_wall_ms: int, stamped_ms: int | None) -> float:
        """Seconds the delivery stamped ``stamped_ms`` (its header record's timestamp; None:
        it has none) waited before it arrived at ``arrived_wall_ms`` (our wall clock)."""
        if stamped_ms is None or stamped_ms <= 0:
            return 0.0
        diff = arrived_wall_ms - stamped_ms
        if abs(diff) > MAX_SKEW_MS:
            base = self._base()
            return 0.0 if base is None else max(0.0, (diff - base) / 1000)
        if self._seen >= WINDOW:
            self._older_least, self._least, self._seen = self._least, None, 0
        self._seen += 1
        if self._least is None or diff < self._least:
            self._least = diff
        return (diff - self._base()) / 1000

    def _base(self) -> int | None:
        """The least difference over the window (None: no delivery measured yet)."""
        if self._least is None or self._older_least is None:
            return self._least if self._least is not None else self._older_least
        return min(self._least, self._older_least)
