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

# A TICK is the tracker's own wall time, written by the partition's owner and read by it (or,
# after a failover, by another tracker host). Anyone who may write the markers topic may write
# one with any time: ahead by more than this (far more than hosts' clocks differ) it is set
# aside, else it made every delayed send and every message in flight of its partition due at
# once (tests/integration/test_forged_tick.py: a send delayed 300 s came 295 s early).
TICK_AHEAD_LIMIT_MS = 60_000


def tick_refused(tick_ms: int, wall_ms: int, marker_ms: int) -> str | None:
    """Why a TICK of time ``tick_ms`` must not move the clock: it is ahead of both this host's
    ``wall_ms`` and the partition's marker time ``marker_ms`` by more than the limit. (A
    tracker's own TICK carries the marker time it was proposed at, never ahead of it: one
    whose broker stamps LogAppendTime ahead of its host still takes its own TICKs.)"""
    ahead_ms = tick_ms - max(wall_ms, marker_ms)
    if ahead_ms > TICK_AHEAD_LIMIT_MS:
        return (f"TICK {ahead_ms} ms ahead of this worker's clock and marker time, more than "
                f"{TICK_AHEAD_LIMIT_MS} ms (not a tracker's; check the hosts' clocks if it is)")
    return None


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


# How far before this worker began owning a partition a record read again may count (see
# applied_at_ms): a previous owner's clock far behind cannot make more than this due at once.
REPLAY_EARLIEST_MS = 60_000


def applied_at_ms(clock_ms: int, stamp_ms: int | None, owned_since_ms: int, trusted_stamp: bool,
                  trackers_own: bool) -> int:
    """The marker time a marker of one record is applied at (its deadlines run from it).

    The clock's time, except for a record written before this worker owned the partition
    (the previous owner's, read again after a takeover) whose stamp can be trusted: a broker
    LogAppendTime, or the create time of a marker only a tracker writes (an ACQUIRE: the
    dispatcher's clock, like a TICK's). That one counts at its stamp, at most
    ``REPLAY_EARLIEST_MS`` before the ownership began: counted from when it was read again,
    a message acquired just before its dispatcher was killed came back up to a visibility
    timeout late (an audit: 11 s after the takeover). Never later than the clock.
    """
    if stamp_ms is None or stamp_ms >= owned_since_ms or not (trusted_stamp or trackers_own):
        return clock_ms
    return min(clock_ms, max(stamp_ms, owned_since_ms - REPLAY_EARLIEST_MS))


def written_at_ms(clock_ms: int, stamp_ms: int | None, owned_since_ms: int) -> int:
    """When a record was written: an ACQUIRE's deadlines run from it (its stamp is a
    dispatcher's clock), and a START after a switch to shared mode is judged by it
    (kmq.protocol.expiry.start_allowed; a consumer's stamp sets no deadline): its stamp (the
    broker's append time or its writer's clock) for a record read after this worker took
    the partition over, at most ``REPLAY_EARLIEST_MS`` before that and never later than
    ``clock_ms``; else the clock's time (read when written). Judged by when it was read, a
    group's STARTs read after a takeover seconds past a switch were dropped. A stamp is
    trusted no further: a writer's clock says nothing of a record read as it comes."""
    return applied_at_ms(clock_ms, stamp_ms, owned_since_ms, True, True)
