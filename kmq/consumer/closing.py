"""A consumer's ``flush()`` and ``close()``: its verbs made durable, then leaving.

``flush()`` returns once the broker has every verb recorded so far (and, with
transactional STARTs, once their transaction committed), so an acked message is never
delivered again; ``close()`` also gives back what the consumer holds and leaves its group
or its dispatcher. Mixed into :class:`kmq.consumer.facade.Consumer`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kmq.consumer.arguments import wait_s
from kmq.consumer.live_settings import LEAVE_TIMEOUT_S
from kmq.consumer.marker_writer import MarkerWriter
from kmq.errors import ConsumerClosedError, DeliveryError

log = logging.getLogger("kmq.consumer")

RECEIVERS_POLL_S = 0.005  # how often close() looks whether another thread's receive ended


class Closing:
    """``flush()``, ``close()`` and the context manager of :class:`~kmq.consumer.facade.Consumer`."""

    queue: str
    _closed: bool
    _lock: Any
    _writer: MarkerWriter
    _source: Any
    _stop: threading.Event
    _log: Any
    _flusher: threading.Thread
    _receiving: set[int]

    # -- flushing ----------------------------------------------------------------

    def flush(self, timeout_s: float = 10.0) -> None:
        """Send the verbs recorded so far and wait until the broker has them.

        Call it from the thread that receives (like every Consumer method but
        the verbs and close(), which any thread may call).

        After this returns, an acked message is never delivered again, even
        if this process dies the next moment: the acks are on the markers
        topic (and, in partition mode, the source offsets covering them are committed).
        """
        timeout_s = wait_s(timeout_s, "flush()")
        if self._closed:  # close() already sent and committed everything recorded before it
            raise ConsumerClosedError(f"consumer of queue {self.queue!r} is closed: "
                                      "settle messages before close(), which flushes them")
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._flush_settlements()
        left = self._writer.flush(timeout_s)
        if left:
            raise DeliveryError(f"{left} marker records of queue {self.queue!r} not "
                                f"acknowledged within {timeout_s:g} s")
        # Commit what is covered, so a crash now does not refetch what was acked.
        if not self._writer.wait_committed(self._source.flush, deadline):
            raise DeliveryError(f"the marker transaction of queue {self.queue!r} was not committed "
                                f"within {timeout_s:g} s; its verbs are kept for the next one")
        self._raise_error()

    # -- closing -----------------------------------------------------------------

    def close(self, timeout_s: float = 10.0) -> None:
        """Send pending settlements, give back held messages, and leave (group or dispatcher).

        Any thread may call it (a supervisor, a signal handler): a receive waiting on another
        thread then ends (``for msg in consumer`` stops, ``receive()`` raises
        ConsumerClosedError) and nothing is handed out once it began."""
        timeout_s = wait_s(timeout_s, "close()")  # before anything: a consumer half closed lost its verbs
        if self._closed:
            return
        deadline = time.monotonic() + timeout_s
        self._closed = True
        self._stop.set()
        self._log.wake.set()
        self._flusher.join(timeout_s)
        self._receivers_out(deadline)
        self._source.leave(min(timeout_s, LEAVE_TIMEOUT_S))  # shared: what was on its way is held now
        with self._lock:
            self._give_back_held()
            self._flush_settlements()
        remaining = self._writer.flush(timeout_s)
        if remaining:
            log.warning("queue %s: %d marker records not confirmed at close", self.queue, remaining)
        if self._writer.transactional and not self._writer.wait_committed(self._source.flush, deadline):
            log.warning("queue %s: marker transaction not committed at close: its verbs are not "
                        "sent, their messages come again", self.queue)
        self._source.close()
        # Threads and callbacks make this object part of reference cycles; dropping the
        # producer here ends its connections now, not at some later garbage collection.
        self._writer.close()

    def _receivers_out(self, deadline: float) -> None:
        """Closed from another thread: its receive ends its fetch (at most half a second) and
        sees the close, so what it read is held before the give-back, not handed out after."""
        while self._receiving and time.monotonic() < deadline:
            time.sleep(RECEIVERS_POLL_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
