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
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, Producer, TopicPartition

from kmq import markers as M
from kmq.errors import ConfigError, ConsumerClosedError, DeliveryError
from kmq.message import Message
from kmq.placement import markers_partition, queue_partitions, validate_queue_name
from kmq.settings import Settings

log = logging.getLogger("kmq.consumer")

MAX_EXTEND_S = 12 * 3600.0  # SQS's visibility ceiling


class HeldRange:
    """Consumer-side view of one fetched range: its messages and how many are unsettled."""

    __slots__ = ("ref", "msgs", "outstanding", "__weakref__")

    def __init__(self, ref: M.RangeRef) -> None:
        self.ref = ref
        self.msgs: list[Message] = []
        self.outstanding = 0


def rels_mask(rels: list[int], length: int) -> int:
    """Bit mask of relative offsets, built in linear time."""
    ba = bytearray((length + 7) >> 3)
    for r in rels:
        ba[r >> 3] |= 1 << (r & 7)
    return int.from_bytes(ba, "little")


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
        spread: int = 1,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.queue = validate_queue_name(queue)
        vis = settings.visibility_timeout_s if visibility_timeout_s is None else visibility_timeout_s
        _check_positive("visibility_timeout_s", vis, MAX_EXTEND_S)
        self.visibility_timeout_s = float(vis)
        self.max_processing_s = float(vis if max_processing_s is None else max_processing_s)
        _check_positive("max_processing_s", self.max_processing_s, 7 * 24 * 3600.0)
        if self.max_processing_s < self.visibility_timeout_s:
            raise ConfigError(
                f"max_processing_s={self.max_processing_s:g} is below visibility_timeout_s="
                f"{self.visibility_timeout_s:g}: give max_processing_s >= visibility_timeout_s")
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ConfigError(f"max_in_flight={max_in_flight!r} must be a whole number >= 1")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} must be a whole number >= 1")
        self.max_in_flight = max_in_flight
        self.batch_size = batch_size
        self.max_delay_s = settings.max_delay_s
        self.max_extend_s = MAX_EXTEND_S
        self.flush_interval_s = flush_interval_s
        # Keepalive rounds: often enough that a live consumer's messages never lapse.
        self.keepalive_interval_s = max(0.05, min(self.visibility_timeout_s / 4, 5.0))

        self._settings = settings
        self._topic = settings.queue_topic
        self._markers_topic = settings.markers_topic
        self._qkey = self.queue.encode()
        self._timeout_ms = int(self.visibility_timeout_s * 1000)
        self._partitions = frozenset(queue_partitions(self.queue, queue_topic_partitions, spread))
        self._markers_partition = markers_partition(self.queue, markers_topic_partitions)

        self._buffer: deque[Message] = deque()
        self._acks: deque[Message] = deque()           # appended by Message.ack (any thread)
        self._verbs: deque[tuple[Message, str, Any]] = deque()
        self._held: dict[M.RangeRef, HeldRange] = {}
        self._in_flight = 0
        self._commits: dict[int, deque[list]] = {}     # partition -> [[end, confirmed], ...]
        self._lock = threading.RLock()
        self._closed = False
        self._error: BaseException | None = None
        self._assigned: set[int] = set()
        self.stats = {"received": 0, "acked": 0, "released": 0, "rejected": 0, "markers": 0}

        session_ms = settings.effective_session_timeout_ms
        conf = {
            **settings.client_config(),
            "group.id": settings.group_id(self.queue),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin",
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": max(100, min(3000, session_ms // 3)),
            "max.poll.interval.ms": max(300000, session_ms + 1000),
            # Low fetch wait and queue backoff: the librdkafka defaults stall
            # a queue consumer for up to a second (DESIGN.md).
            "fetch.wait.max.ms": 100,
            "fetch.queue.backoff.ms": 10,
            "enable.partition.eof": False,
            **(config or {}),
        }
        self._kc = KafkaConsumer(conf)
        self._producer = Producer({
            **settings.client_config(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "partitioner": "murmur2_random",
        })
        self._kc.subscribe([self._topic], on_assign=self._on_assign,
                           on_revoke=self._on_revoke, on_lost=self._on_revoke)
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name=f"kmq-flush-{queue}",
                                         daemon=True)
        self._flusher.start()

    # -- receiving ---------------------------------------------------------------

    def receive(self, timeout_s: float | None = 1.0) -> Message | None:
        """The next message of this queue, or None after ``timeout_s`` (None: wait forever)."""
        try:
            m = self._buffer.popleft()
        except IndexError:
            got = self._receive_into_buffer(timeout_s)
            if not got:
                return None
            m = self._buffer.popleft()
        m._handed_at = time.monotonic()
        return m

    def receive_batch(self, max_messages: int = 500, timeout_s: float | None = 1.0) -> list[Message]:
        """Up to ``max_messages`` messages; returns as soon as at least one is available."""
        buf = self._buffer
        if not buf and not self._receive_into_buffer(timeout_s):
            return []
        n = min(max_messages, len(buf))
        out = [buf.popleft() for _ in range(n)]
        now = time.monotonic()
        for m in out:
            m._handed_at = now
        return out

    def __iter__(self):
        """Yield messages forever (until close())."""
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
                # Held messages must be settled first; keep the group session alive meanwhile.
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
        first = self._kc.poll(timeout_s)
        if first is None:
            return 0
        recs = [first]
        if room > 1:
            recs += self._kc.consume(room - 1, 0)
        qkey = self._qkey
        groups: dict[int, list] = {}
        for rec in recs:
            if rec.error() is not None:
                self._on_record_error(rec)
                continue
            p = rec.partition()
            off = rec.offset()
            g = groups.get(p)
            if g is None:
                g = groups[p] = [off, off, [], []]
            else:
                g[1] = off
            if rec.key() == qkey:
                g[2].append(rec)
                g[3].append(off)
        starts: list[M.Marker] = []
        confirm: list[list] = []
        fresh: list[Message] = []
        with self._lock:
            for p, (first_off, last_off, ours, offs) in groups.items():
                entry = [last_off + 1, not ours]
                self._commits.setdefault(p, deque()).append(entry)
                if not ours:
                    continue  # other queues' records: commit them as soon as order allows
                ref = M.RangeRef(self.queue, p, first_off, last_off + 1)
                length = last_off + 1 - first_off
                mask = ref.full_mask if len(ours) == length else rels_mask(
                    [o - first_off for o in offs], length)
                held = HeldRange(ref)
                held.msgs = [Message(self.queue, rec, held, o - first_off, self)
                             for rec, o in zip(ours, offs)]
                held.outstanding = len(ours)
                self._held[ref] = held
                self._in_flight += len(ours)
                fresh += held.msgs
                starts.append(M.Start(ref, self._timeout_ms, mask))
                confirm.append(entry)
            markers = self._collect_settlements() + starts
            if markers:
                self._send(markers, confirm)
            else:
                self._advance_commits()
        self._buffer.extend(fresh)
        self.stats["received"] += len(fresh)
        return len(fresh)

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
        try:
            while True:
                m = pop()
                got = by_range.get(m._range)
                if got is None:
                    got = by_range[m._range] = [[], 0]
                got[0].append(m._rel)
                if not m._lapsed:  # a lapsed one was uncounted when it lapsed
                    got[1] += 1
        except IndexError:
            pass
        out: list[M.Marker] = []
        settled = 0
        for held, (rels, counted) in by_range.items():
            out.append(M.Ack(held.ref, rels_mask(rels, held.ref.length)))
            settled += self._settled_in(held, counted)
        self.stats["acked"] += settled
        grouped: dict[tuple[HeldRange, str, Any], list] = {}
        pop = self._verbs.popleft
        try:
            while True:
                m, verb, arg = pop()
                got = grouped.setdefault((m._range, verb, arg), [[], 0])
                got[0].append(m._rel)
                if verb != "extend" and not m._lapsed:
                    got[1] += 1
        except IndexError:
            pass
        for (held, verb, arg), (rels, counted) in grouped.items():
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
            settled += self._settled_in(held, counted)
        self._in_flight -= settled
        return out

    def _settled_in(self, held: HeldRange, n: int) -> int:
        held.outstanding -= n
        if held.outstanding <= 0:
            self._held.pop(held.ref, None)
        return n

    def _flush_settlements(self) -> None:
        markers = self._collect_settlements()
        if markers:
            self._send(markers, [])

    def _send(self, markers: list[M.Marker], confirm: list[list]) -> None:
        """Produce one marker record; once durable, its STARTs' offsets may be committed."""
        value = M.encode(markers)

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                self._error = DeliveryError(
                    f"marker record for queue {self.queue!r} was not written: {err}")
                return
            for entry in confirm:
                entry[1] = True

        while True:
            try:
                self._producer.produce(self._markers_topic, value, self._qkey,
                                       partition=self._markers_partition, on_delivery=delivered)
                break
            except BufferError:
                self._producer.poll(0.01)
        self.stats["markers"] += 1

    def _advance_commits(self, asynchronous: bool = True) -> None:
        """Commit every partition up to its last offset whose STARTs are all durable."""
        offsets = []
        for p, q in self._commits.items():
            end = None
            while q and q[0][1]:
                end = q.popleft()[0]
            if end is not None and p in self._assigned:
                offsets.append(TopicPartition(self._topic, p, end))
        if offsets:
            try:
                self._kc.commit(offsets=offsets, asynchronous=asynchronous)
            except Exception as exc:  # a commit lost to a rebalance is refetched, not lost
                log.info("queue %s: commit failed: %s", self.queue, exc)

    def _keepalive(self) -> None:
        """Extend held messages that are prefetched, or in user code within their budget.

        A message in user code is extended while a later round could still be
        needed, so its last extension lands at or after ``handed_at +
        max_processing_s`` (never early, at most one round late). Once that
        deadline has surely passed, the tracker has taken the message back: it
        stops counting against ``max_in_flight``.
        """
        now = time.monotonic()
        vis = self.visibility_timeout_s
        budget = self.max_processing_s - vis + self.keepalive_interval_s
        lapse_after = self.max_processing_s + 2 * self.keepalive_interval_s
        out: list[M.Marker] = []
        lapsed = 0
        for held in list(self._held.values()):
            rels = []
            for m in held.msgs:
                if m._settled is not None or m._lapsed:
                    continue
                if m._handed_at < 0:
                    rels.append(m._rel)
                elif now - max(m._handed_at, m._hold_until - vis) <= budget:
                    if m._hold_until <= now + vis:
                        rels.append(m._rel)
                elif now - max(m._handed_at, m._hold_until - vis) > lapse_after:
                    # Same thread as the drain below: a verb recorded before or
                    # after this point is counted exactly once.
                    m._lapsed = True
                    lapsed += self._settled_in(held, 1)
            if rels:
                out.append(M.Extend(held.ref, rels_mask(rels, held.ref.length), self._timeout_ms))
        self._in_flight -= lapsed
        self.stats["expired"] = self.stats.get("expired", 0) + lapsed
        for i in range(0, len(out), 1000):
            self._send(out[i:i + 1000], [])

    def _flush_loop(self) -> None:
        next_keepalive = time.monotonic() + self.keepalive_interval_s
        while not self._stop.wait(self.flush_interval_s):
            try:
                self._producer.poll(0)
                with self._lock:
                    self._flush_settlements()
                    self._advance_commits()
                    if time.monotonic() >= next_keepalive:
                        next_keepalive = time.monotonic() + self.keepalive_interval_s
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
        # Fetch only the partitions that hold this queue (issue: read amplification).
        mine = [tp for tp in partitions if tp.partition in self._partitions]
        with self._lock:
            self._assigned = {tp.partition for tp in mine}
        kc.assign(mine)

    def _on_revoke(self, kc: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        # Commit what is durable before another member takes the partitions over.
        self._producer.flush(5.0)
        with self._lock:
            self._advance_commits(asynchronous=False)
            for tp in partitions:
                self._commits.pop(tp.partition, None)
            self._assigned -= {tp.partition for tp in partitions}
        try:
            kc.unassign()
        except Exception:  # already unassigned by a lost session
            pass

    def flush(self, timeout_s: float = 10.0) -> None:
        """Send the verbs recorded so far and wait until the broker has them.

        After this returns, an acked message is never delivered again, even
        if this process dies the next moment.
        """
        with self._lock:
            self._flush_settlements()
        left = self._producer.flush(timeout_s)
        if left:
            raise DeliveryError(f"{left} marker records of queue {self.queue!r} not "
                                f"acknowledged within {timeout_s:g} s")
        with self._lock:
            self._advance_commits()
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
                for m in held.msgs:
                    if m._settled is None and not m._lapsed:
                        # Never handed out: return uncounted; in user code: release.
                        m._settled = "released"
                        self._verbs.append((m, "return" if m._handed_at < 0 else "release", 0))
            self._buffer.clear()
            self._flush_settlements()
        remaining = self._producer.flush(timeout_s)
        if remaining:
            log.warning("queue %s: %d marker records not confirmed at close", self.queue, remaining)
        with self._lock:
            self._advance_commits(asynchronous=False)
        self._kc.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def in_flight(self) -> int:
        """Messages held: prefetched or handed out and not yet settled (as last counted)."""
        return self._in_flight


def _check_positive(name: str, value: Any, limit: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= limit:
        raise ConfigError(f"{name}={value!r} must be a number of seconds in (0, {limit:g}]")

