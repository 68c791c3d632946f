"""Receive messages of one logical queue with per-message settlement (the consumer side of KMQ).

The flow (numbers match the README):

2. Fetch a batch from the queue's partitions (consumer group per queue,
   round-robin assignment, only the queue's partitions fetched). Write one
   START marker per fetched partition range, then hand the messages out. Source
   offsets are committed asynchronously once the broker has acknowledged the
   START that covers them: a fetch never waits on a flush.
3. ``ack()``/``release()``/``reject()``/``extend()`` are recorded in memory
   and sent by a background flusher every ``flush_interval_s`` as one marker
   per range (aggregated bit masks). The flusher also keeps prefetched and
   in-process messages invisible (EXTEND) up to ``max_processing_s`` after
   they reach user code, so a slow worker is not mistaken for a dead one,
   and a dead one is noticed within ``visibility_timeout_s``.

At most ``max_in_flight`` messages are held (prefetched or unsettled) at once.

``transactional=True`` (or ``KMQ_TRANSACTIONAL_STARTS=on``) writes STARTs and
commits offsets in one transaction; ``transactional_id`` names this consumer
instance stably across restarts, so a restarted instance ends its dead
predecessor's open transaction at once (see kmq.consumer.marker_writer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, TopicPartition

from kmq.protocol import markers as M
from kmq.kafka import profiles
from kmq.errors import ConfigError, ConsumerClosedError, DeliveryError
from kmq.consumer.held import HeldRange, MessageBatch
from kmq.protocol.masks import mask_of as rels_mask
from kmq.consumer.keepalive import keepalive_round
from kmq.consumer.marker_writer import MarkerWriter, RetryTransaction
from kmq.message import RELEASED, Message
from kmq.protocol.placement import markers_partition, queue_partitions, validate_queue_name
from kmq.queue_config import QueueConfig, QueueConfigs
from kmq.settings import Settings

log = logging.getLogger("kmq.consumer")

MAX_EXTEND_S = M.MAX_TIMEOUT_MS / 1000  # SQS's visibility ceiling, 12 h (the codec's limit)
CONFIG_CHECK_S = 0.5  # how often a consumer picks up its queue's new settings


class Consumer:
    """Receives messages of one queue; see the module docstring for the flow."""

    def __init__(
        self,
        settings: Settings,
        queue: str,
        *,
        queue_topic_partitions: int,
        markers_topic_partitions: int,
        visibility_timeout_s: float | None = None,
        max_in_flight: int = 1000,
        batch_size: int = 1000,
        max_processing_s: float | None = None,
        flush_interval_s: float = 0.02,
        configs: QueueConfigs | None = None,
        transactional: bool | None = None,
        transactional_id: str | None = None,
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
        self.max_in_flight = max_in_flight
        self.batch_size = batch_size
        self.max_delay_s = settings.max_delay_s
        self.flush_interval_s = flush_interval_s

        self._topic = settings.queue_topic
        self._markers_topic = settings.markers_topic
        self._qkey = self.queue.encode()
        self._queue_topic_partitions = queue_topic_partitions
        self._spread = self._queue_config.spread
        self._partitions = frozenset(queue_partitions(queue, queue_topic_partitions, self._spread))
        self._markers_partition = markers_partition(self.queue, markers_topic_partitions)

        self._ready: deque[HeldRange] = deque()        # ranges with messages not yet handed out
        self._acks: deque[Message] = deque()           # appended by Message.ack (any thread)
        self._ack_runs: deque[tuple] = deque()         # (held, lo_rel, hi_rel) from MessageBatch.ack
        self._verbs: deque[tuple[Message, str, Any]] = deque()
        self._held: dict[M.RangeRef, HeldRange] = {}
        self._in_flight = 0
        self._commits: dict[int, deque[list]] = {}     # partition -> [[end, confirmed], ...]
        self._lock = threading.RLock()
        self._closed = False
        self._error: BaseException | None = None
        self._commit_due = False  # a START was confirmed: its offsets can be committed
        self._purge_seen = False  # the queue was purged: drop prefetched messages below the point
        self._assigned: set[int] = set()
        self._group_partitions: list[int] = []  # what the group gave us (all topics' partitions)
        self.stats = {"received": 0, "acked": 0, "released": 0, "rejected": 0, "markers": 0}

        conf = {
            # Group timeouts and security of the profile (kmq.kafka.profiles).
            **profiles.group_consumer_config(settings, settings.group_id(self.queue)),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin",
            # Low fetch wait and queue backoff: the librdkafka defaults stall
            # a queue consumer for up to a second (DESIGN.md).
            "fetch.wait.max.ms": 100,
            "fetch.queue.backoff.ms": 10,
            "enable.partition.eof": False,
            **(config or {}),
        }
        self._kc = KafkaConsumer(conf)
        transactional = settings.transactional_starts == "on" if transactional is None else transactional
        if transactional_id is not None and (not transactional or not isinstance(transactional_id, str)
                                             or not transactional_id.strip()):
            raise ConfigError(f"transactional_id={transactional_id!r} needs transactional=True "
                              "(or KMQ_TRANSACTIONAL_STARTS=on) and a non-empty string")
        self._writer = MarkerWriter(
            settings, self.queue, self._markers_partition, transactional,
            on_error=self._set_error, transactional_id=transactional_id)
        self._producer = self._writer.producer
        self._group_metadata: Any = None  # for transactional offset commits
        self._kc.subscribe([self._topic], on_assign=self._on_assign,
                           on_revoke=self._on_revoke, on_lost=self._on_revoke)
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name=f"kmq-flush-{queue}",
                                         daemon=True)
        self._flusher.start()

    def _apply_config(self, cfg: QueueConfig) -> None:
        """Take the queue's settings where no explicit argument was given."""
        vis = self._explicit_vis if self._explicit_vis is not None else cfg.visibility_s(self._settings)
        if self._explicit_processing is not None:
            processing = self._explicit_processing
        else:  # unset: as long as the visibility timeout (no keepalive in user code)
            processing = max(vis, cfg.max_processing_s or 0.0)
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

    def _follow_config(self, on_receiving_thread: bool = False) -> None:
        if self._configs is None:
            return
        cfg = self._configs.get(self.queue)
        if cfg.updated_at_ms != self._queue_config.updated_at_ms:
            self._queue_config = cfg
            self._apply_config(cfg)
        if self._purged_before != self._dropped_purge or self._spread_changed():
            if on_receiving_thread:
                self._drop_purged()
                self._grow_spread()
            else:
                self._purge_seen = True  # the receiving thread acts on it

    def _spread_changed(self) -> bool:
        return self._queue_config.spread != self._spread

    def _grow_spread(self) -> None:
        """The queue grew onto more partitions: fetch those of ours among them."""
        if not self._spread_changed():
            return
        self._spread = self._queue_config.spread
        self._partitions = frozenset(queue_partitions(self.queue, self._queue_topic_partitions,
                                                      self._spread))
        if self._group_partitions:
            self._assign(self._kc)

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
        if self._commit_due or self._purge_seen:
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
        if self._commit_due or self._purge_seen:
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
                self._stop.wait(min(remaining, self.flush_interval_s))
                continue
            got = self._fetch(max(0.0, min(remaining, 0.5)))
            if got:
                return got
            if deadline is not None and time.monotonic() >= deadline:
                return 0

    def _fetch(self, timeout_s: float) -> int:
        room = min(self.batch_size, self.max_in_flight - self._in_flight)
        if self._commit_due:
            self._commit_confirmed()
        self._follow_config(on_receiving_thread=True)  # once per fetch: cheap
        first = self._kc.poll(timeout_s)
        if first is None:
            return 0
        recs = [first]
        if room > 1:
            recs += self._kc.consume(room - 1, 0)
        qkey = self._qkey
        # Ours by partition, in offset order; everything else (other queues on a
        # shared partition, error events) is rare and handled apart.
        if len(self._assigned) == 1:  # spread 1: every record is from that partition
            ours = [r for r in recs if r.key() == qkey]
            ours_by_part = {next(iter(self._assigned)): ours}
            others = [r for r in recs if r.key() != qkey] if len(ours) != len(recs) else []
        else:
            ours_by_part = {}
            others = []
            for rec in recs:
                if rec.key() == qkey:
                    p = rec.partition()
                    lst = ours_by_part.get(p)
                    if lst is None:
                        ours_by_part[p] = [rec]
                    else:
                        lst.append(rec)
                else:
                    others.append(rec)
        if self._purged_before:
            for p, ours in list(ours_by_part.items()):
                floor = self._purged_before.get(p, 0)
                if ours and ours[0].offset() < floor:
                    # Purged: not delivered, committed like other queues' records.
                    others += [r for r in ours if r.offset() < floor]
                    ours_by_part[p] = [r for r in ours if r.offset() >= floor]
        ends: dict[int, int] = {}
        for rec in others:
            if rec.error() is not None:
                self._on_record_error(rec)
            else:
                ends[rec.partition()] = rec.offset() + 1
        starts: list[M.Marker] = []
        confirm: list[list] = []
        fresh = 0
        with self._lock:
            for p, all_ours in ours_by_part.items():
                chunks = _within_range_len(all_ours)
                for j, ours in enumerate(chunks):
                    first_off = ours[0].offset()
                    last_off = ours[-1].offset()
                    length = last_off + 1 - first_off
                    ref = M.RangeRef(self.queue, p, first_off, last_off + 1)
                    held = HeldRange(ref, self)
                    n = len(ours)
                    held.recs = ours
                    if n == length:
                        held.rels = range(n)
                        mask = ref.full_mask
                    else:
                        held.rels = [r.offset() - first_off for r in ours]
                        mask = rels_mask(held.rels, length)
                    held.outstanding = n
                    self._held[ref] = held
                    self._in_flight += n
                    fresh += n
                    self._ready.append(held)
                    starts.append(M.Start(ref, self._timeout_ms, mask))
                    end = last_off + 1 if j < len(chunks) - 1 else max(last_off + 1, ends.pop(p, 0))
                    entry = [end, False]
                    self._commits.setdefault(p, deque()).append(entry)
                    confirm.append(entry)
            for p, end in ends.items():  # only other queues' records: commit when order allows
                self._commits.setdefault(p, deque()).append([end, True])
            markers = self._collect_settlements() + starts
            if markers:
                self._send(markers, confirm)
        self.stats["received"] += fresh
        return fresh

    def _on_record_error(self, rec: Any) -> None:
        err = rec.error()
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal():
            self._error = DeliveryError(f"consumer of queue {self.queue!r} failed: {err}")
        else:
            log.warning("queue %s: consumer error: %s", self.queue, err)

    # -- settling ----------------------------------------------------------------

    def _collect_settlements(self) -> list[M.Marker]:
        """Turn recorded verbs into per-range markers (lock held)."""
        by_range: dict[HeldRange, list[int]] = {}
        pop = self._acks.popleft
        last_held = None
        rels: list[int] = []
        try:
            while True:
                m = pop()
                held = m[1]
                if held is not last_held:  # acks mostly come in runs of one range
                    rels = by_range.get(held)
                    if rels is None:
                        rels = by_range[held] = []
                    last_held = held
                rels.append(m[2])
        except IndexError:
            pass
        masks: dict[HeldRange, int] = {}
        settled = 0
        for held, rels in by_range.items():
            masks[held] = rels_mask(rels, held.ref.length)
            settled += self._settled_in(held, rels)
        pop = self._ack_runs.popleft
        try:
            while True:  # MessageBatch.ack(): whole runs of offsets at once
                held, lo, hi = pop()
                masks[held] = masks.get(held, 0) | (((1 << (hi - lo)) - 1) << lo)
                settled += self._settled_in(held, range(lo, hi))
        except IndexError:
            pass
        out: list[M.Marker] = [M.Ack(held.ref, mask) for held, mask in masks.items()]
        self.stats["acked"] += settled
        grouped: dict[tuple[HeldRange, str, Any], list[int]] = {}
        pop = self._verbs.popleft
        try:
            while True:
                m, verb, arg = pop()
                grouped.setdefault((m[1], verb, arg), []).append(m[2])
        except IndexError:
            pass
        for (held, verb, arg), rels in grouped.items():
            mask = rels_mask(rels, held.ref.length)
            if verb == "extend":
                out.append(M.Extend(held.ref, mask, arg))
                continue
            if verb == "release":
                out.append(M.Release(held.ref, mask, arg))
                self.stats["released"] += len(rels)
            elif verb == "return":
                out.append(M.Release(held.ref, mask, 0, counted=False))
            else:
                out.append(M.Reject(held.ref, mask, arg))
                self.stats["rejected"] += len(rels)
            settled += self._settled_in(held, rels)
        self._in_flight -= settled
        return out

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
        markers = self._collect_settlements()
        if markers:
            self._send(markers, [])

    def _send(self, markers: list[M.Marker], confirm: list[list]) -> None:
        """Write marker records; once durable, their STARTs' offsets may be committed."""
        self._writer.send(markers, confirm, on_confirmed=self._flag_commit_due)
        self.stats["markers"] += 1

    def _flag_commit_due(self) -> None:
        self._commit_due = True  # picked up by the receiving thread

    def _set_error(self, exc: BaseException) -> None:
        self._error = exc

    def _run_transaction(self) -> None:
        """Transactional mode (lock held): pending markers + the offsets they cover, atomically."""
        def offsets_for():
            offsets, pops = self._committable()
            return offsets, pops
        try:
            self._writer.commit(offsets_for, self._group_metadata)
        except RetryTransaction:
            pass

    def _on_receiving_thread(self) -> None:
        """Work the flusher flagged that only the receiving thread may do."""
        if self._commit_due:
            self._commit_confirmed()
        if self._purge_seen:
            self._purge_seen = False
            self._drop_purged()
            self._grow_spread()

    def _commit_confirmed(self, asynchronous: bool = True) -> None:
        """On the receiving thread: commit what the confirmed STARTs cover."""
        self._commit_due = False
        with self._lock:
            self._advance_commits(asynchronous)

    def _committable(self) -> tuple[list[TopicPartition], Any]:
        """Per assigned partition, the end of the longest run of durable STARTs (not yet
        forgotten), and a function that forgets them once committed."""
        offsets, runs = [], []
        for p, q in self._commits.items():
            n = 0
            while n < len(q) and q[n][1]:
                n += 1
            if n and p in self._assigned:
                offsets.append(TopicPartition(self._topic, p, q[n - 1][0]))
                runs.append((q, n))

        def forget() -> None:
            for q, k in runs:
                for _ in range(k):
                    q.popleft()
        return offsets, forget

    def _advance_commits(self, asynchronous: bool = True) -> None:
        """Commit every partition up to its last offset whose STARTs are all durable."""
        if self._writer.transactional:
            self._run_transaction()
            return
        offsets, forget = self._committable()
        forget()
        if offsets:
            try:
                self._kc.commit(offsets=offsets, asynchronous=asynchronous)
            except Exception as exc:  # a commit lost to a rebalance is refetched, not lost
                log.info("queue %s: commit failed: %s", self.queue, exc)

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
        self.stats["lapsed"] = self.stats.get("lapsed", 0) + lapsed
        for i in range(0, len(out), 1000):
            self._send(out[i:i + 1000], [])

    def _flush_loop(self) -> None:
        next_keepalive = time.monotonic() + self.keepalive_interval_s
        next_config = time.monotonic() + CONFIG_CHECK_S
        while not self._stop.wait(self.flush_interval_s):
            try:
                self._producer.poll(0)
                with self._lock:
                    # No librdkafka *consumer* call here: confluent-kafka lets one
                    # thread at a time into a Consumer (its PR #2322), and the
                    # user thread's polls would starve us. Commits happen on the
                    # polling thread (_fetch, rebalance callbacks, close).
                    self._flush_settlements()
                    if self._writer.transactional and self._writer.has_pending:
                        self._run_transaction()
                    now = time.monotonic()
                    if now >= next_config:
                        next_config = now + CONFIG_CHECK_S
                        self._follow_config()
                    if now >= next_keepalive:
                        next_keepalive = now + self.keepalive_interval_s
                        self._keepalive()
            except Exception as exc:  # surface to the user thread, never die silently
                log.exception("queue %s: flusher failed", self.queue)
                self._error = exc

    def _raise_error(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    # -- group membership --------------------------------------------------------

    def _on_assign(self, kc: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        self._group_partitions = [tp.partition for tp in partitions]
        self._assign(kc)

    def _assign(self, kc: KafkaConsumer) -> None:
        """Fetch only those of the group's partitions that hold this queue.

        The group (round-robin) spreads every partition of the topic over the
        queue's consumers; the queue's consecutive partitions land on different
        members, and each fetches just its share (no reading other queues'
        partitions). A partition the queue grew onto starts where the queue
        began on it, unless the group already committed a position there.
        """
        mine = [TopicPartition(self._topic, p) for p in self._group_partitions if p in self._partitions]
        starts = self._queue_config.partition_starts
        fresh = [tp for tp in mine if tp.partition in starts]
        if fresh:
            for tp in kc.committed(fresh, timeout=10):
                if tp.offset < 0:  # nothing committed yet
                    next(m for m in mine if m.partition == tp.partition).offset = starts[tp.partition]
        with self._lock:
            self._assigned = {tp.partition for tp in mine}
            if self._writer.transactional:
                # Transactional commits carry the group's generation (KIP-447 fencing).
                self._group_metadata = kc.consumer_group_metadata()
        kc.assign(mine)

    def _on_revoke(self, kc: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        # Commit what is durable before another member takes the partitions over.
        with self._lock:
            self._flush_settlements()
        self._producer.flush(5.0)
        with self._lock:
            self._advance_commits(asynchronous=False)
            for tp in partitions:
                self._commits.pop(tp.partition, None)
            revoked = {tp.partition for tp in partitions}
            self._assigned -= revoked
            self._group_partitions = [p for p in self._group_partitions if p not in revoked]
        try:
            kc.unassign()
        except Exception:  # already unassigned by a lost session
            pass

    def flush(self, timeout_s: float = 10.0) -> None:
        """Send the verbs recorded so far and wait until the broker has them.

        Call it from the thread that receives (like every Consumer method but
        the verbs, which any thread may call).

        After this returns, an acked message is never delivered again, even
        if this process dies the next moment: the acks are on the markers
        topic and the source offsets covering them are committed.
        """
        if self._closed:  # close() already sent and committed everything recorded before it
            raise ConsumerClosedError(f"consumer of queue {self.queue!r} is closed: "
                                      "settle messages before close(), which flushes them")
        with self._lock:
            self._flush_settlements()
        left = self._producer.flush(timeout_s)
        if left:
            raise DeliveryError(f"{left} marker records of queue {self.queue!r} not "
                                f"acknowledged within {timeout_s:g} s")
        # Commit what is covered, so a crash now does not refetch what was acked.
        self._commit_confirmed(asynchronous=False)
        self._raise_error()

    # -- closing -----------------------------------------------------------------

    def close(self, timeout_s: float = 10.0) -> None:
        """Send pending settlements, give back held messages, commit, leave the group."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._flusher.join(timeout_s)
        with self._lock:
            for held in list(self._held.values()):
                for i, rel in enumerate(held.rels):
                    if not held.state[rel] and rel not in held.lapsed:
                        # Never handed out: return uncounted; in user code: release.
                        held.state[rel] = RELEASED
                        self._verbs.append((Message((held.recs[i], held, rel)),
                                            "return" if i >= held.handed else "release", 0))
            self._ready.clear()
            self._flush_settlements()
        remaining = self._producer.flush(timeout_s)
        if remaining:
            log.warning("queue %s: %d marker records not confirmed at close", self.queue, remaining)
        with self._lock:
            self._advance_commits(asynchronous=False)
        self._kc.close()
        # Threads and callbacks make this object part of reference cycles; dropping the
        # producer here ends its connections now, not at some later garbage collection.
        self._producer = self._writer.producer = None

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def assignment(self) -> frozenset[int]:
        """Queue-topic partitions this consumer fetches now (its group share holding the queue)."""
        with self._lock:
            return frozenset(self._assigned)

    @property
    def group_share(self) -> frozenset[int]:
        """Every queue-topic partition the group gave this member now, the queue's and
        others' alike; :attr:`assignment` is the part of it this consumer fetches."""
        with self._lock:
            return frozenset(self._group_partitions)

    @property
    def in_flight(self) -> int:
        """Messages held: prefetched or handed out and not yet settled (as last counted)."""
        return self._in_flight


def _check_positive(name: str, value: Any, limit: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= limit:
        raise ConfigError(f"{name}={value!r} must be a number of seconds in (0, {limit:g}]")


def _within_range_len(recs: list) -> list[list]:
    """``recs`` (one partition, offset order) cut where their offsets would span more than one
    range may hold (M.MAX_RANGE_LEN): aborted transactions or other queues' records between them."""
    if not recs:
        return []
    if recs[-1].offset() - recs[0].offset() < M.MAX_RANGE_LEN:
        return [recs]
    out: list[list] = [[]]
    first = recs[0].offset()
    for rec in recs:
        if rec.offset() - first >= M.MAX_RANGE_LEN:
            out.append([])
            first = rec.offset()
        out[-1].append(rec)
    return out
