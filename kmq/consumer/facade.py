"""Receive messages of one logical queue with per-message settlement (the consumer side of KMQ).

The flow (numbers match the README):

2. Messages arrive from the queue's *source*: for a ``dispatch="shared"`` queue the
   tracker's dispatcher hands them to any number of consumers as they ask
   (:mod:`kmq.consumer.shared_source`); for a ``dispatch="partition"`` queue the
   consumers form a Kafka group and fetch its partitions, writing one START per fetched
   range (:mod:`kmq.consumer.partition_source`). The queue's mode is a queue setting,
   followed live: the consumer switches source when it changes.
3. ``ack()``/``release()``/``reject()``/``extend()`` are recorded in memory
   (:mod:`kmq.consumer.settlement`) and sent by a background flusher within
   ``flush_interval_s`` (100 ms) of the first one as one marker per range (aggregated
   bit masks); at once when a shared consumer ran out of work (its settlements free the
   room it asks for). Fewer, fuller marker records: every record is an event for the
   tracker. The flusher also
   keeps prefetched and in-process messages invisible (EXTEND) up to
   ``max_processing_s`` after they reach user code (:mod:`kmq.consumer.keepalive`), so a
   slow worker is not mistaken for a dead one, and a dead one is noticed within
   ``visibility_timeout_s``.

At most ``max_in_flight`` messages are held (prefetched or unsettled) at once.

``transactional=True`` (or ``KMQ_TRANSACTIONAL_STARTS=on``) writes STARTs and
commits offsets in one transaction (partition mode); ``transactional_id`` names this
consumer instance stably across restarts, so a restarted instance ends its dead
predecessor's open transaction at once (see kmq.consumer.marker_writer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from kmq.consumer.held import HeldRange, MessageBatch
from kmq.consumer.keepalive import keepalive_round
from kmq.consumer.marker_writer import MarkerWriter
from kmq.consumer.partition_source import PartitionSource
from kmq.consumer.settlement import SettlementLog
from kmq.consumer.shared_source import SharedSource
from kmq.errors import ConfigError, ConsumerClosedError, DeliveryError
from kmq.message import RELEASED, Message, Verb
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition, validate_queue_name
from kmq.queue_config import QueueConfig
from kmq.queues_topic import QueueConfigs
from kmq.settings import Settings

log = logging.getLogger("kmq.consumer")

MAX_EXTEND_S = M.MAX_TIMEOUT_MS / 1000  # SQS's visibility ceiling, 12 h (the codec's limit)
CONFIG_CHECK_S = 0.5  # how often a consumer picks up its queue's new settings
LEAVE_TIMEOUT_S = 2.0  # how long a leaving shared consumer waits for the dispatcher's farewell
FLUSH_TICK_S = 0.02    # how often a receive blocked by max_in_flight looks again
IDLE_WAKE_S = 0.25     # the flusher wakes at least this often (credit heartbeats, checks)


class Consumer:
    """Receives messages of one queue; see the module docstring for the flow."""

    def __init__(
        self,
        settings: Settings,
        queue: str,
        *,
        queue_topic_partitions: int,
        markers_topic_partitions: int,
        deliveries_topic_partitions: int | None = None,
        visibility_timeout_s: float | None = None,
        max_in_flight: int = 1000,
        batch_size: int = 1000,
        max_processing_s: float | None = None,
        flush_interval_s: float = 0.1,
        configs: QueueConfigs | None = None,
        transactional: bool | None = None,
        transactional_id: str | None = None,
        prefetch: int | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.queue = validate_queue_name(queue)
        if visibility_timeout_s is not None:
            _check_positive("visibility_timeout_s", visibility_timeout_s, MAX_EXTEND_S)
        if max_processing_s is not None:
            _check_positive("max_processing_s", max_processing_s, 7 * 24 * 3600.0)
        # Explicit arguments win; otherwise the queue's configuration, followed live.
        self._explicit_vis = visibility_timeout_s
        self._explicit_processing = max_processing_s
        self._configs = configs
        self._queue_config = configs.get(self.queue) if configs else QueueConfig()
        self._settings = settings
        self._apply_config(self._queue_config)
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ConfigError(f"max_in_flight={max_in_flight!r} must be a whole number >= 1")
        if not isinstance(batch_size, int) or not 1 <= batch_size <= M.MAX_BATCH_SIZE:
            raise ConfigError(f"batch_size={batch_size!r} must be a whole number from 1 to "
                              f"{M.MAX_BATCH_SIZE} (what one START marker may cover)")
        if prefetch is not None and (not isinstance(prefetch, int) or isinstance(prefetch, bool)
                                     or not 1 <= prefetch <= max_in_flight):
            raise ConfigError(f"prefetch={prefetch!r} must be a whole number from 1 to "
                              f"max_in_flight={max_in_flight}")
        self.max_in_flight = max_in_flight
        self.batch_size = batch_size
        self._prefetch = prefetch
        self.max_delay_s = settings.max_delay_s
        if isinstance(flush_interval_s, bool) or not isinstance(flush_interval_s, (int, float)) \
                or not 0 < flush_interval_s <= 3600:
            raise ConfigError(f"flush_interval_s={flush_interval_s!r} must be a number of seconds in (0, 3600]")
        self.flush_interval_s = float(flush_interval_s)

        self._qkey = self.queue.encode()
        self._queue_topic_partitions = queue_topic_partitions
        self._deliveries_topic_partitions = deliveries_topic_partitions
        self._markers_partition = markers_partition(self.queue, markers_topic_partitions)
        self._client_config = config

        self._ready: deque[HeldRange] = deque()        # ranges with messages not yet handed out
        self._log = SettlementLog()                    # verbs recorded by any thread
        self._held: dict[M.RangeRef, HeldRange] = {}
        self._in_flight = 0
        self._lock = threading.RLock()
        self._closed = False
        self._error: BaseException | None = None
        self._attention = False  # work only the receiving thread may do (commits, purge, mode)
        self.stats = {"received": 0, "acked": 0, "released": 0, "rejected": 0, "markers": 0}

        transactional = settings.transactional_starts == "on" if transactional is None else transactional
        if transactional_id is not None and (not transactional or not isinstance(transactional_id, str)
                                             or not transactional_id.strip()):
            raise ConfigError(f"transactional_id={transactional_id!r} needs transactional=True "
                              "(or KMQ_TRANSACTIONAL_STARTS=on) and a non-empty string")
        self._writer = MarkerWriter(
            settings, self.queue, self._markers_partition, transactional,
            on_error=self._set_error, transactional_id=transactional_id)
        self._source: PartitionSource | SharedSource = self._new_source(self.mode_wanted())
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name=f"kmq-flush-{queue}",
                                         daemon=True)
        self._flusher.start()

    # -- the queue's settings -----------------------------------------------------

    def _apply_config(self, cfg: QueueConfig) -> None:
        """Take the queue's settings where no explicit argument was given."""
        vis = self._explicit_vis if self._explicit_vis is not None else cfg.visibility_s(self._settings)
        if self._explicit_processing is not None:
            processing = self._explicit_processing
        else:  # unset: the queue's, else KMQ_MAX_PROCESSING_S (5 min), never below the visibility
            processing = max(vis, cfg.max_processing_s or self._settings.max_processing_s)
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
        # Keepalive rounds: often enough that a live consumer's messages never lapse.
        self.keepalive_interval_s = max(0.05, min(vis / 4, 5.0))
        self._purged_before = dict(cfg.purged_before)
        if not hasattr(self, "_dropped_purge"):
            self._dropped_purge = dict(self._purged_before)

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

    def _follow_config(self) -> None:
        if self._configs is None:
            return
        cfg = self._configs.get(self.queue)
        if cfg.updated_at_ms != self._queue_config.updated_at_ms:
            self._queue_config = cfg
            self._apply_config(cfg)
            self._attention = True  # the receiving thread looks at spread, purges and mode

    def _new_source(self, mode: str) -> PartitionSource | SharedSource:
        if mode == "shared":
            if self._deliveries_topic_partitions is None:
                from kmq.kafka.admin import topic_partition_counts
                counts = topic_partition_counts(self._settings)
                if self._settings.deliveries_topic not in counts:
                    raise ConfigError(f"topic {self._settings.deliveries_topic!r} does not exist: "
                                      "create kmq's topics first (`faust -A app create-topics`)")
                self._deliveries_topic_partitions = counts[self._settings.deliveries_topic]
            return SharedSource(self, self._deliveries_topic_partitions, self._client_config, self._prefetch)
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

    def _return_unhanded(self) -> None:
        """Give back (uncounted) every held message not yet handed to user code (lock held)."""
        for held in self._ready:
            for i in range(held.handed, len(held.recs)):
                rel = held.rels[i]
                if not held.state[rel] and rel not in held.lapsed:
                    held.state[rel] = RELEASED
                    self._log.add(Message((held.recs[i], held, rel)), Verb.RETURN, 0)
            held.handed = len(held.recs)
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
                dropped = held.rels[held.handed:k]
                if dropped:
                    held.lapsed.update(dropped)  # no longer ours to settle or extend
                    held.handed = k
                    held.outstanding -= len(dropped)
                    self._in_flight -= len(dropped)
                    if held.outstanding <= 0:
                        self._held.pop(held.ref, None)
            while self._ready and self._ready[0].handed == len(self._ready[0].recs):
                self._ready.popleft()
        self._dropped_purge = dict(floors)

    # -- receiving ---------------------------------------------------------------

    def receive(self, timeout_s: float | None = 1.0) -> Message | None:
        """The next message of this queue, or None after ``timeout_s`` (None: wait forever)."""
        ready = self._ready
        if not ready and not self._receive_into_buffer(timeout_s):
            return None
        if self._attention:
            self._on_receiving_thread()
            if not ready and not self._receive_into_buffer(timeout_s):
                return None
        held = ready[0]
        (m,) = held.hand_out(1)
        if held.handed == len(held.recs):
            ready.popleft()
        return m

    def receive_batch(self, max_messages: int = 500,
                      timeout_s: float | None = 1.0) -> "MessageBatch":
        """Up to ``max_messages`` messages; returns as soon as at least one is available.

        The result is a list of messages whose ``ack()`` settles all of them
        at once (much cheaper than one ``ack()`` per message).
        """
        ready = self._ready
        batch = MessageBatch()
        if not ready and not self._receive_into_buffer(timeout_s):
            return batch
        if self._attention:
            self._on_receiving_thread()
            if not ready and not self._receive_into_buffer(timeout_s):
                return batch
        while ready and len(batch) < max_messages:
            held = ready[0]
            i = held.handed
            batch += held.hand_out(max_messages - len(batch))
            batch._runs.append((held, i, held.handed))
            if held.handed == len(held.recs):
                ready.popleft()
        return batch

    def __iter__(self):
        """Yield messages until close()."""
        while not self._closed:
            m = self.receive(1.0)
            if m is not None:
                yield m

    def _receive_into_buffer(self, timeout_s: float | None) -> int:
        if self._closed:
            raise ConsumerClosedError(f"consumer of queue {self.queue!r} is closed")
        self._source.on_empty()
        self._log.wake.set()  # a shared consumer out of work: its settlements go out now
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self._raise_error()
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
                self.stats["received"] += got
                return got
            if deadline is not None and time.monotonic() >= deadline:
                return 0

    def _hold(self, ref: M.RangeRef, recs: list, rels: range | list[int]) -> HeldRange:
        """Hold fetched or delivered records of one range (lock held): ready to hand out."""
        held = HeldRange(ref, self, self._log)
        held.recs = recs
        held.rels = rels
        held.outstanding = len(recs)
        self._held[ref] = held
        self._in_flight += len(recs)
        self._ready.append(held)
        return held

    # -- settling ----------------------------------------------------------------

    def _drain_settlements(self) -> list[M.Marker]:
        """Turn recorded verbs into per-range markers (lock held)."""
        markers, counts = self._log.drain(self._settled_in)
        self.stats["acked"] += counts["acked"]
        self.stats["released"] += counts["released"]
        self.stats["rejected"] += counts["rejected"]
        self._in_flight -= counts["settled"]
        if counts["settled"]:
            self._source.on_settled(counts["settled"])
        return markers

    def _settled_in(self, held: HeldRange, rels: list[int] | range) -> int:
        """Count settled messages out of ``held``; lapsed ones were counted when they lapsed."""
        n = len(rels)
        if held.lapsed:
            n -= sum(1 for r in held.lapsed if r in rels)
        held.outstanding -= n
        if held.outstanding <= 0:
            self._held.pop(held.ref, None)
        return n

    def _flush_settlements(self) -> None:
        markers = self._drain_settlements()
        if markers:
            self._send(markers)

    def _send(self, markers: list[M.Marker]) -> None:
        for i in range(0, len(markers), 1000):
            self._writer.send(markers[i:i + 1000], [], on_confirmed=_nothing)
            self.stats["markers"] += 1

    def _set_error(self, exc: BaseException) -> None:
        self._error = exc

    def _keepalive(self) -> None:
        """Extend what this consumer still holds; count what lapsed (see kmq.consumer.keepalive)."""
        out, lapsed = keepalive_round(
            list(self._held.values()), now=time.monotonic(), visibility_s=self.visibility_timeout_s,
            max_processing_s=self.max_processing_s, interval_s=self.keepalive_interval_s,
            timeout_ms=self._timeout_ms)
        for held in list(self._held.values()):
            if held.outstanding <= 0:
                self._held.pop(held.ref, None)
        self._in_flight -= lapsed
        if lapsed:
            self._source.on_settled(lapsed)
        self.stats["lapsed"] = self.stats.get("lapsed", 0) + lapsed
        if out:
            self._send(out)

    def _flush_loop(self) -> None:
        """Send settlements within ``flush_interval_s`` of the first one, at once when a shared
        consumer ran out of work; renew credits, extend held messages, follow the settings.

        It sleeps until the next of those is due (woken by the first verb after a flush and
        by a receive that found nothing ready): an idle consumer costs a few wake-ups a second.
        """
        now = time.monotonic()
        next_keepalive = now + self.keepalive_interval_s
        next_config = now + CONFIG_CHECK_S
        flush_at: float | None = None  # when the oldest unsent verb must go out
        log_, wake = self._log, self._log.wake
        while not self._stop.is_set():
            now = time.monotonic()
            until = min(next_keepalive, next_config, now + IDLE_WAKE_S,
                        flush_at if flush_at is not None else now + IDLE_WAKE_S)
            wake.wait(max(0.0, until - now))
            wake.clear()
            if self._stop.is_set():
                return
            try:
                self._writer.producer.poll(0)
                with self._lock:
                    # No librdkafka *consumer* call here: confluent-kafka lets one
                    # thread at a time into a Consumer (its PR #2322), and the
                    # user thread's polls would starve us. Commits happen on the
                    # receiving thread (fetch, rebalance callbacks, close).
                    now = time.monotonic()
                    if log_:
                        if flush_at is None:
                            flush_at = now + self.flush_interval_s
                        if now >= flush_at or self._source.starving():
                            self._flush_settlements()
                            flush_at = None
                    self._source.flusher_work()
                    if now >= next_config:
                        next_config = now + CONFIG_CHECK_S
                        self._follow_config()
                    if now >= next_keepalive:
                        next_keepalive = now + self.keepalive_interval_s
                        self._keepalive()
            except Exception as exc:  # surface to the user thread, never die silently
                log.exception("queue %s: flusher failed", self.queue)
                self._error = exc

    def _stop_flusher(self) -> None:
        """Crash tests: no more settlements, keepalives, credits or transactions of our own."""
        self._stop.set()
        self._log.wake.set()
        self._flusher.join()

    def _vanish(self) -> None:
        """Crash tests: die without a goodbye, as a killed process would (no release, no
        keepalive, no farewell); only the Kafka clients are closed, so a group need not wait
        out this member's session."""
        self._stop_flusher()
        self._source.close()

    def _raise_error(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def flush(self, timeout_s: float = 10.0) -> None:
        """Send the verbs recorded so far and wait until the broker has them.

        Call it from the thread that receives (like every Consumer method but
        the verbs, which any thread may call).

        After this returns, an acked message is never delivered again, even
        if this process dies the next moment: the acks are on the markers
        topic (and, in partition mode, the source offsets covering them are committed).
        """
        if self._closed:  # close() already sent and committed everything recorded before it
            raise ConsumerClosedError(f"consumer of queue {self.queue!r} is closed: "
                                      "settle messages before close(), which flushes them")
        with self._lock:
            self._flush_settlements()
        left = self._writer.flush(timeout_s)
        if left:
            raise DeliveryError(f"{left} marker records of queue {self.queue!r} not "
                                f"acknowledged within {timeout_s:g} s")
        # Commit what is covered, so a crash now does not refetch what was acked.
        self._source.flush()
        self._raise_error()

    # -- closing -----------------------------------------------------------------

    def close(self, timeout_s: float = 10.0) -> None:
        """Send pending settlements, give back held messages, and leave (group or dispatcher)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._log.wake.set()
        self._flusher.join(timeout_s)
        self._source.leave(min(timeout_s, LEAVE_TIMEOUT_S))  # shared: what was on its way is held now
        with self._lock:
            for held in list(self._held.values()):
                for i, rel in enumerate(held.rels):
                    if not held.state[rel] and rel not in held.lapsed:
                        # Never handed out: return uncounted; in user code: release.
                        held.state[rel] = RELEASED
                        self._log.add(Message((held.recs[i], held, rel)),
                                      Verb.RETURN if i >= held.handed else Verb.RELEASE, 0)
            self._ready.clear()
            self._flush_settlements()
        remaining = self._writer.flush(timeout_s)
        if remaining:
            log.warning("queue %s: %d marker records not confirmed at close", self.queue, remaining)
        self._source.close()
        # Threads and callbacks make this object part of reference cycles; dropping the
        # producer here ends its connections now, not at some later garbage collection.
        self._writer.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def assignment(self) -> frozenset[int]:
        """Queue-topic partitions this consumer fetches now (partition mode: its group share
        holding the queue; shared mode: none, the dispatcher reads them)."""
        return self._source.assignment

    @property
    def group_share(self) -> frozenset[int]:
        """Every queue-topic partition the group gave this member now, the queue's and
        others' alike (partition mode); :attr:`assignment` is the part it fetches."""
        return self._source.group_share

    @property
    def in_flight(self) -> int:
        """Messages held: prefetched or handed out and not yet settled (as last counted)."""
        return self._in_flight


def _check_positive(name: str, value: Any, limit: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= limit:
        raise ConfigError(f"{name}={value!r} must be a number of seconds in (0, {limit:g}]")


def _nothing() -> None:
    pass
