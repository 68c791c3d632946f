"""Serving a producer's delivery reports on a thread of their own, while anyone waits.

librdkafka hands delivery reports to whoever calls ``poll()`` or ``flush()``. kmq.aio's
``send_and_wait`` needs its record's report soon, without a flush of everything in flight
and without a blocking call on the event loop: while at least one send waits, this thread
polls; when none does, it sleeps on an event (no idle wake-ups).
"""

from __future__ import annotations

import threading
from typing import Any


class DeliveryReports:
    """Serves a producer's delivery reports on one thread while any send waits for its own."""

    POLL_S = 0.05  # poll() returns at once when a report is there; this only bounds close()

    def __init__(self, producer: Any) -> None:
        self._producer = producer  # held: Client.close() drops its own reference
        self._waiting = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="kmq-aio-deliveries", daemon=True)
        self._thread.start()

    def expect(self) -> None:
        """One more sender waits for a report: poll until it is :meth:`done`."""
        with self._lock:
            self._waiting += 1
            self._wake.set()

    def done(self) -> None:
        """A sender got its report (or stopped waiting)."""
        with self._lock:
            self._waiting -= 1

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._closed:
                return
            self._producer.poll(self.POLL_S)
            with self._lock:
                # Under the lock: an expect() or a close() cannot slip in between.
                if self._waiting == 0 and not self._closed:
                    self._wake.clear()

    def close(self) -> None:
        """Stop the thread (after the producer's last flush, which serves what is left)."""
        with self._lock:
            self._closed = True
            self._wake.set()
        self._thread.join()
