"""Read-ahead the tracker has surely taken back: never handed to user code.

A consumer's keepalive extends what it holds every ``keepalive_interval_s`` (at most a
quarter of the visibility timeout); each round's EXTEND, once written, sets the range's
``extended_at`` to when the round decided it (an EXTEND never written kept nothing). A
range not extended for longer than the visibility timeout was not kept invisible: the
process stalled (SIGSTOP, a suspended VM, a long pause) and the tracker has taken its
messages back, redelivered them, maybe to a consumer that acked them since. Handed out
after the stall, they reached user code as delivery 1 of a message acked elsewhere
(measured: 7 of 10 held messages, a consumer stopped 20 s on a 5 s visibility timeout).
Dropped instead, they come back as the tracker's redeliveries say. A delivery read from
the lane starts with ``extended_at`` at its dispatch as far as the consumer can tell
(kmq.consumer.lane_age), not its arrival: one that waited out a stall on the lane is
stale when read. :class:`StaleReadAhead`
is mixed into :class:`kmq.consumer.facade.Consumer`; the receiving thread calls it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer
    from kmq.consumer.held import HeldRange


def is_stale(held: "HeldRange", now: float, visibility_s: float) -> bool:
    """Whether ``held`` went unextended past the visibility timeout (pure: time passed in)."""
    return now - held.extended_at > visibility_s


class StaleReadAhead:
    """Drops the stale ranges at the front of the ready ones (see the module docstring)."""

    def _drop_stale_front(self: "Consumer") -> None:
        """Drop the not yet handed messages of stale ranges at the front of ``_ready``: ranges
        arrive and are extended in order, so a fresh one at the front ends the look."""
        ready, now = self._ready, time.monotonic()
        if not ready or not is_stale(ready[0], now, self.visibility_timeout_s):
            return
        dropped = 0
        with self._lock:  # the flusher's keepalive counts lapses under it
            while ready and is_stale(ready[0], now, self.visibility_timeout_s):
                held = ready.popleft()
                dropped += held.drop_unhanded(len(held.recs))
                if held.outstanding <= 0:
                    self._held.pop(held.ref, None)
            self._in_flight -= dropped
            self.stats["stale-dropped"] = self.stats.get("stale-dropped", 0) + dropped
            if dropped:  # under the lock: the flusher counts and resets the same total
                self._source.on_settled(dropped)
