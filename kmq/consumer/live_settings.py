"""A consumer's queue settings, followed live: new values, dispatch-mode switches, purges.

A queue's settings change at run time (``client.configure_queue``), and a consumer
picks them up without a restart: explicit arguments win, the rest comes from the
queue's :class:`~kmq.queue_config.QueueConfig`. A change of dispatch mode swaps the
consumer's source (what was not handed out is given back first; what user code
holds is settled as before), and a purge drops prefetched messages below the purge
point. The flusher notices a change (:mod:`kmq.consumer.flusher`); the receiving
thread acts on it, since only it may touch the sources' Kafka consumers.

:class:`LiveSettings` is mixed into :class:`kmq.consumer.facade.Consumer` and works
on its state; it stands apart because it is what a consumer does when its queue
changes, not what it does per message.
"""

from __future__ import annotations

import logging

from kmq.consumer.arguments import MAX_EXTEND_S
from kmq.consumer.keepalive import keepalive_interval_s
from kmq.consumer.partition_source import PartitionSource
from kmq.consumer.shared_source import SharedSource
from kmq.errors import ConfigError
from kmq.message import RELEASED, Message, Verb
from kmq.queue_config import QueueConfig

log = logging.getLogger("kmq.consumer")

LEAVE_TIMEOUT_S = 2.0  # how long a leaving shared consumer waits for the dispatcher's farewell


class LiveSettings:
    """The queue's settings a consumer applies, and what it does when they change."""

    def _apply_config(self, cfg: QueueConfig, live: bool = False) -> None:
        """Take the queue's settings where no explicit argument was given. ``live``: a change
        while the consumer runs, which may not fail (the flusher applies it)."""
        vis = self._explicit_vis if self._explicit_vis is not None else cfg.visibility_s(self._settings)
        if self._explicit_processing is not None:
            processing = self._explicit_processing
        else:  # unset: the queue's, else KMQ_MAX_PROCESSING_S (5 min), never below the visibility
            processing = max(vis, cfg.max_processing_s or self._settings.max_processing_s)
        if processing < vis and live:
            # The explicit argument wins: the queue's new visibility only up to it. Raising
            # here left the consumer half on the old settings and the new ones unapplied.
            log.warning("queue %s: visibility_timeout_s is now %g, above this consumer's "
                        "max_processing_s=%g: it takes %g (give max_processing_s >= %g to take "
                        "the queue's)", self.queue, vis, processing, processing, vis)
            vis = processing
        if processing < vis:
            raise ConfigError(
                f"max_processing_s={processing:g} is below visibility_timeout_s={vis:g}: "
                "give max_processing_s >= visibility_timeout_s")
        self.visibility_timeout_s = float(vis)
        self.max_processing_s = float(processing)
        # extend() is bounded by the queue's max_processing_s where one is set
        # (its operators' bound on processing), else by SQS's 12 hours.
        self.max_extend_s = min(MAX_EXTEND_S, cfg.max_processing_s or MAX_EXTEND_S)
        self._timeout_ms = int(vis * 1000)
        self.keepalive_interval_s = keepalive_interval_s(vis)
        self._purged_before = dict(cfg.purged_before)
        if not hasattr(self, "_dropped_purge"):
            self._dropped_purge = dict(self._purged_before)
        self._follow_ordering()

    @property
    def config(self) -> QueueConfig:
        """The queue's settings this consumer currently applies."""
        return self._queue_config

    def mode_wanted(self) -> str:
        """The queue's dispatch mode as its settings say now: "shared" or "partition"."""
        return self._queue_config.dispatch_mode(self._settings)

    @property
    def mode(self) -> str:
        """The dispatch mode this consumer receives in now: "shared" or "partition"."""
        return self._source.mode

    def follow_config_now(self) -> None:
        """Take the queue's settings as the client's view has them now (any thread; the
        flusher does it every 0.5 s): a purge() of this client returns only after this, so
        no receive after it hands out what was read ahead below the purge point."""
        with self._lock:
            self._follow_config()

    def _follow_config(self) -> None:
        if self._configs is None:
            return
        cfg = self._configs.get(self.queue)
        if cfg.updated_at_ms != self._queue_config.updated_at_ms:
            self._queue_config = cfg
            self._apply_config(cfg, live=True)
            self._attention = True  # the receiving thread looks at spread, purges and mode

    def _new_source(self, mode: str) -> PartitionSource | SharedSource:
        if mode == "shared":
            if self._lane_layout is None:
                from kmq.kafka.admin import existing_lanes
                self._lane_layout = existing_lanes(self._settings)
            return SharedSource(self, self._lane_layout, self._client_config, self._prefetch)
        return PartitionSource(self, self._client_config)

    def _on_receiving_thread(self) -> None:
        """Work the flusher flagged that only the receiving thread may do."""
        self._attention = False
        self._source.on_receiving_thread()
        if self._purged_before != self._dropped_purge:
            self._drop_purged()
        if self.mode_wanted() != self._source.mode:
            self._switch_source(self.mode_wanted())
        self._source.config_changed()

    def _switch_source(self, mode: str) -> None:
        """The queue changed mode: give back what was not handed out, then take the other source.

        What user code holds stays held and is settled as before (the markers are the
        same in both modes).
        """
        self._source.leave(LEAVE_TIMEOUT_S)
        with self._lock:
            self._return_unhanded()
            self._flush_settlements()
        self._writer.flush(10.0)
        self._source.close()
        log.info("queue %s: dispatch mode %s -> %s", self.queue, self._source.mode, mode)
        self._source = self._new_source(mode)

    def _return_unhanded(self) -> int:
        """Give back (uncounted) every held message not yet handed to user code (lock held);
        returns how many."""
        returned = 0
        for held in tuple(self._ready):  # a copy: the receiving thread pops without the lock
            for i in range(held.handed, len(held.recs)):
                rel = held.rels[i]
                if not held.state[rel] and rel not in held.lapsed:
                    held.state[rel] = RELEASED
                    self._log.add(Message((held.recs[i], held, rel)), Verb.RETURN, 0)
                    returned += 1
            held.handed = len(held.recs)
        self._ready.clear()
        return returned

    def _give_back_held(self) -> None:
        """Closing: give back every held message (lock held); never handed out: uncounted,
        in user code: released."""
        for held in list(self._held.values()):
            for i, rel in enumerate(held.rels):
                if not held.state[rel] and rel not in held.lapsed:
                    held.state[rel] = RELEASED
                    self._log.add(Message((held.recs[i], held, rel)),
                                  Verb.RETURN if i >= held.handed else Verb.RELEASE, 0)
        self._ready.clear()

    def _drop_purged(self) -> None:
        """A purge happened: prefetched messages below the purge point are gone."""
        floors = self._purged_before
        with self._lock:
            for held in self._ready:
                floor = floors.get(held.ref.partition, 0)
                k = held.handed
                while k < len(held.recs) and held.ref.start + held.rels[k] < floor:
                    k += 1
                if k > held.handed:
                    self._in_flight -= held.drop_unhanded(k)
                    if held.outstanding <= 0:
                        self._held.pop(held.ref, None)
            while self._ready and self._ready[0].handed == len(self._ready[0].recs):
                self._ready.popleft()
        self._dropped_purge = dict(floors)
