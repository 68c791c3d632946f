"""The receiving thread's wait for more when nothing is ready to hand out.

A receive that finds no ready message reads more within its timeout: from the source (a
partition fetch, or the lane of a shared queue), while ``max_in_flight`` leaves room, and
it ends as soon as another thread closes the consumer. :class:`ReadingMore` is mixed into
:class:`kmq.consumer.facade.Consumer`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kmq.errors import ConsumerClosedError

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer

FLUSH_TICK_S = 0.02    # how often a receive blocked by max_in_flight looks again
# librdkafka waits in whole milliseconds and a poll may end a little early: a receive that
# fetched again with less than this left polled with 0 ms, at once, until its deadline
# (measured: about 180 empty polls ending every timed-out receive(0.1), 9 of an idle
# consumer's 14 ms of CPU a second).
POLL_RESOLUTION_S = 0.001


class ReadingMore:
    """The receiving thread reading more (see the module docstring)."""

    def _read_fresh(self: "Consumer", timeout_s: float | None) -> bool:
        """Read more within ``timeout_s``; whether something fresh is ready (what was read
        may have waited out a stall on its lane: kmq.consumer.lane_age)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._receive_into_buffer(timeout_s):
            self._drop_stale_front()
            if self._ready:
                return True
            if deadline is not None:
                timeout_s = deadline - time.monotonic()
                if timeout_s <= 0:
                    return False
        return False

    def _receive_into_buffer(self: "Consumer", timeout_s: float | None) -> int:
        me = self._wait_begins()
        try:
            return self._wait_into_buffer(timeout_s)
        finally:
            self._wait_ends(me)

    def _check_open(self: "Consumer") -> None:
        if self._closed:
            raise ConsumerClosedError(f"consumer of queue {self.queue!r} is closed")

    def _wait_into_buffer(self: "Consumer", timeout_s: float | None) -> int:
        self._check_open()
        self._source.on_empty()
        self._log.wake.set()  # a shared consumer out of work: its settlements go out now
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self._raise_error()
            self._check_open()  # closed by another thread: what it holds goes back with its close()
            if self._in_flight >= self.max_in_flight:
                with self._lock:
                    self._flush_settlements()
            remaining = 0.1 if deadline is None else deadline - time.monotonic()
            if self._in_flight >= self.max_in_flight:
                # Held messages must be settled first.
                if remaining <= 0:
                    return 0
                self._stop.wait(min(remaining, FLUSH_TICK_S))
                continue
            if self._attention:
                self._on_receiving_thread()
            room = min(self.batch_size, self.max_in_flight - self._in_flight)
            got = self._source.fetch(room, max(0.0, min(remaining, 0.5)))
            if got:
                with self._lock:  # the flusher counts what it reads in the background
                    self.stats["received"] += got
                return got
            if deadline is not None and time.monotonic() >= deadline - POLL_RESOLUTION_S:
                return 0
