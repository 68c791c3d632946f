"""The dispatcher's side the event loop calls (the markers agent, the tick timer, the runtime).

Everything here only posts an event to the dispatcher thread's inbox, or waits until the
thread has handled one (``quiesce``, ``drain``: blocking, called from an executor); the
thread (agents/dispatch/dispatcher.py) does the work. Kept apart so the thread's module holds one
concept: reading and handing out.
"""

from __future__ import annotations

import queue as queue_mod
import threading

from kmq.protocol import markers as M

QUIESCE_FLUSH_S = 4.0  # how long a revocation waits for the ACQUIREs in flight to land


class DispatcherInbox:
    """Events for the dispatcher thread; its start and stop."""

    _parts: dict  # markers partition -> its epoch and queues' state (the thread's)

    def __init__(self) -> None:
        self._inbox: queue_mod.SimpleQueue = queue_mod.SimpleQueue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._suspended = False  # a rebalance is under way: the tick timer's view is stale
        self._set_up_done = threading.Event()  # the thread has its clients (it may write)

    def _run(self) -> None:  # the thread's body (agents/dispatch/dispatcher.py)
        raise NotImplementedError

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kmq-dispatcher", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def owned(self, partitions: set[int]) -> None:
        """The markers partitions this worker owns now (the tick timer says, every tick)."""
        if not self._suspended and partitions != set(self._parts):
            self._post(("owned", set(partitions)))

    def suspend(self) -> None:
        """A rebalance began (event loop, before awaiting :meth:`quiesce`): until
        :meth:`resume`, the tick timer's partitions are the old assignment's."""
        self._suspended = True

    def resume(self) -> None:
        """The group assigned partitions anew: the tick timer's view holds again."""
        self._suspended = False

    def quiesce(self, timeout_s: float = QUIESCE_FLUSH_S + 1.0) -> bool:
        """Stop dispatching and wait until every ACQUIRE written is in the log (blocking:
        call from an executor). After it returns nothing more reaches the markers topic
        from this dispatcher, so a successor's BEGIN lands after all of it. False if the
        thread did not answer in time (the membership lease still stops its lanes)."""
        self._suspended = True
        return self._handled("quiesce", timeout_s)

    def drain(self, timeout_s: float = QUIESCE_FLUSH_S + 1.0) -> bool:
        """Wait until every event posted before is handled and what was written so far is
        acknowledged (blocking; tests and hand-overs). False if not within ``timeout_s``."""
        return self._handled("drain", timeout_s)

    def _handled(self, kind: str, timeout_s: float) -> bool:
        """Post ``kind`` and wait until the thread has handled it (at once if none runs).
        A quiesce of a thread still setting up is not waited for: it wrote nothing, and it
        handles the event before its first round."""
        if self._thread is None or not self._thread.is_alive():
            return True
        done = threading.Event()
        self._post((kind, done))
        return (kind == "quiesce" and not self._set_up_done.is_set()) or done.wait(timeout_s)

    def on_credit(self, markers_partition: int, credit: M.Credit) -> None:
        self._post(("credit", markers_partition, credit))

    def on_begin(self, markers_partition: int, epoch: int, cursors: dict[tuple[str, int], int],
                 handed: dict | None = None) -> None:
        """BEGIN(epoch) was applied: where to read from, and what ordered queues' predecessors
        handed out above their floors (``PartitionState.handed_outs``)."""
        self._post(("begin", markers_partition, epoch, cursors, handed or {}))

    def on_started(self, markers_partition: int, fetched: M.RangeRef) -> None:
        """A START was applied: the queue's records below ``fetched.end`` were fetched."""
        self._post(("started", markers_partition, fetched))

    def on_ended(self, markers_partition: int, queue: str, partition: int, offsets: list[int],
                 dead_lettered: bool) -> None:
        """Messages of an ordered queue left for good: acked, or dead-lettered."""
        self._post(("ended", markers_partition, queue, partition, offsets, dead_lettered))

    def on_purged(self, markers_partition: int, queue: str, purged_before: dict[int, int]) -> None:
        """``queue`` was purged below ``purged_before``: its groups forget those records."""
        self._post(("purged", markers_partition, queue, dict(purged_before)))

    def _post(self, event: tuple) -> None:
        self._inbox.put(event)
        self._wake.set()
