"""The dispatcher thread's Kafka clients, and what it does when the broker fails them: set
up until the broker answers; an ACQUIRE not written ends its partition's epoch; a producer
failed for good is replaced, its partitions begun anew (docs/shared-queues.md, "Dispatcher
handover"). Mixed into :class:`agents.dispatch.dispatcher.Dispatcher`, whose thread alone
calls these.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agents.dispatch.inbox import QUIESCE_FLUSH_S
from agents.dispatch.lanes import Batch, LaneWriter
from agents.dispatch.reader import QueueReader
from app import startup
from kmq.backoff import compute_backoff

if TYPE_CHECKING:  # pragma: no cover
    from agents.dispatch.dispatcher import Dispatcher

log = logging.getLogger("kmq.tracker.dispatcher")


class DispatcherClients:
    """:meth:`_set_up`, :meth:`_failed` and :meth:`_replace_writer` of
    :class:`~agents.dispatch.dispatcher.Dispatcher`."""

    def _set_up(self: "Dispatcher") -> bool:
        """The thread's clients and views, tried again until the broker answers (a thread
        that died here left the worker's shared queues without a dispatcher for good).
        False if stopped first."""
        attempt = 0
        while not self._stop.is_set():
            attempt += 1
            try:
                if self._lanes is None:
                    self._lanes = LaneWriter(self.settings, self.stats, self._membership, self.trace)
                if self._reader is None:
                    self._reader = QueueReader(self.settings, self.trace, self.stats)
                self._configs = self._configs_factory()
                self._queue_parts = self._partitions(self.settings.queue_topic)
                # The topics as they exist, not the settings: what consumers pick lanes from.
                self._lanes.read_layout()
                self._set_up_done.set()
                return True
            except Exception as exc:  # the broker not answering yet: anything it raises
                pause_s = compute_backoff(startup.RETRY, attempt)
                log.warning("dispatcher start-up failed (attempt %d: %s); trying again in %.1f s",
                            attempt, exc, pause_s)
                self._stop.wait(pause_s)
        return False

    def _partitions(self: "Dispatcher", topic: str) -> int:
        return len(self._lanes.producer.list_topics(topic, timeout=10).topics[topic].partitions)

    def _failed(self: "Dispatcher", m: int, epoch: int | None, batches: list[Batch], err: Any) -> None:
        """An ACQUIRE record of ``epoch`` was not written (or one of FLOORs and records given
        back, ``batches`` empty): its records were not handed out.

        Rewinding the cursor to them would hand out again what later ACQUIREs (written)
        already did. Instead this epoch ends: the tick timer sees the partition missing and
        BEGINs anew, from the cursors the table keeps (every ACQUIRE that reached the log,
        none that did not). ACQUIREs of the old epoch went out before that BEGIN on this
        producer: they are applied and their lanes written (``Epochs.with_deliveries``).
        """
        self.stats["acquire-errors"] += 1
        if self.stats["acquire-errors"] <= 10 or self.stats["acquire-errors"] % 1000 == 0:
            log.warning("markers partition %d: an ACQUIRE record of %d deliveries was not written (%s); "
                        "dispatching begins anew", m, len(batches), err)
        if self._epochs.end(m, epoch, deliveries_owed=True):
            self._ordered.forget_partition(m)  # the new epoch starts from the FLOORs in the table

    def _replace_writer(self: "Dispatcher") -> None:
        """The producer failed for good: every write after the failure failed too, so each
        partition's epoch ended (``_failed``); a new producer begins them anew."""
        old = self._lanes
        old.producer.flush(QUIESCE_FLUSH_S)  # its last callbacks: failures, or lanes owed
        self.stats["writers-replaced"] += 1
        log.warning("the dispatcher's producer failed for good; its partitions begin anew on a new one")
        for m in list(self._parts):  # begun anew, after everything old
            self._epochs.end(m, deliveries_owed=True)
            self._ordered.forget_partition(m)
        self._lanes = LaneWriter(self.settings, self.stats, self._membership, self.trace)
        self._lanes.adopt(old)
