"""Acting on what came due (5. in the README flow): republish or dead-letter.

An expired offset's payload is read back from the queue topic (DESIGN:
redelivery is rare, and copying payloads into every START would double the
bytes written), then ``kmq.protocol.envelope.after_expiry`` decides: back on the queue
with delivery count + 1, or to the dead-letter topic with the reason. A
scheduled send is published to the queue. Everything is acknowledged by the
broker before this returns, so the markers agent only forgets what is durable.

Blocking librdkafka calls run in one dedicated thread so the event loop (the
other partitions' timers, the web views) keeps going.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kmq.protocol import envelope
from kmq.kafka import profiles
from kmq.kafka.backpressure import produce_when_room
from kmq.errors import DeliveryError
from kmq.protocol.markers import RangeRef, mask_offsets
from kmq.protocol.placement import partition_for_key, queue_partitions
from kmq.kafka.offsets import EndLowerBounds, true_end_offsets
from kmq.queue_config import QueueConfig, QueueConfigs, write_config
from kmq.settings import Settings
from kmq.protocol.state import Due, DueSend, Expiry

log = logging.getLogger("kmq.tracker.redeliver")

SPAN_GAP = 5000  # offsets further apart than this are read in separate spans
Outcome = tuple[str, str, int]  # (queue, what, count)
# Backoff deadlines are rounded up to this share of the delay (and at least
# BACKOFF_GRAIN_MS), so jittered deferrals of one range share a few groups.
BACKOFF_GRAIN_MS = 100
BACKOFF_GRAIN_SHARE = 50
# Attempt points may be this stale (a lower bound of a partition's end): it spares two
# ListOffsets round trips on most ticks (measured: ~22 ms of a redelivery's lateness at
# the median on the embedded broker) for at most this much more scanning after a crash.
END_MAX_AGE_S = 1.0


@dataclass
class Execution:
    """What :meth:`Redeliverer.execute` did."""

    outcomes: list[Outcome] = field(default_factory=list)
    # range -> [(mask, deadline_ms)]: expired offsets that wait out a backoff
    deferred: dict[RangeRef, list[tuple[int, int]]] = field(default_factory=dict)


def _id_and_count(headers) -> tuple[str, int]:
    ours, _ = envelope.split(headers)
    return ((ours.get(envelope.ID) or b"").decode(errors="replace"),
            envelope.int_header(ours, envelope.DELIVERIES, 0))


def _written_key(plan) -> tuple[str, str, int]:
    """How a republished or dead-lettered record of ``plan`` is recognised when found."""
    msg_id, count = _id_and_count(plan.headers)
    return ("dlq" if isinstance(plan, envelope.DeadLetter) else "queue", msg_id, count)


class Redeliverer:
    """Reads expired payloads back and writes them to the queue or dead-letter topic."""

    def __init__(self, settings: Settings, configs: Callable[[], QueueConfigs]) -> None:
        self.settings = settings
        self._configs_factory = configs
        self._configs: QueueConfigs | None = None
        self._configs_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kmq-redeliver")
        self._producer: Producer | None = None
        self._reader: Consumer | None = None
        self._queue_partitions: int | None = None
        self._errors: list[str] = []
        self._producer_lock = threading.Lock()  # set_aside runs on the event loop, the rest here
        self.set_aside_pending = 0
        self._ends = EndLowerBounds(END_MAX_AGE_S)

    def configs(self) -> QueueConfigs:
        """The queue settings view (started on first use, by whichever thread asks first)."""
        with self._configs_lock:
            if self._configs is None:
                self._configs = self._configs_factory()
            return self._configs

    def config(self, queue: str) -> QueueConfig:
        return self.configs().get(queue)

    async def execute(self, due: list[Due], now_ms: int,
                      attempted: dict[DueSend, int] | None = None,
                      attempted_ranges: dict[RangeRef, tuple[int, int]] | None = None) -> Execution:
        """Publish everything in ``due``; raises DeliveryError if any write failed.

        ``attempted`` / ``attempted_ranges``: what an earlier (crashed) tick
        may have written, with the offsets where that attempt began. It is
        looked up there and written only if absent, so a crash between
        writing and forgetting does not write twice.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._execute, due, now_ms, attempted or {},
                                          attempted_ranges or {})

    async def attempt_points(self, ranges: list[RangeRef]) -> dict[RangeRef, tuple[int, int]]:
        """For each range: lower bounds of its queue partition's and dead-letter partition's ends."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._attempt_points, ranges)

    def _attempt_points(self, ranges: list[RangeRef]) -> dict[RangeRef, tuple[int, int]]:
        return {r: (self._end_lower_bound(self.settings.queue_topic, r.partition),
                    self._end_lower_bound(self.settings.dlq_topic, self._dlq_partition(r.queue)))
                for r in ranges}

    def _end_lower_bound(self, topic: str, partition: int) -> int:
        """A lower bound of the partition's end, at most END_MAX_AGE_S old."""
        return self._ends.get(topic, partition, time.monotonic(), self._list_end)

    def _list_end(self, topic: str, partition: int) -> int:
        # ListOffsets may undercount (BROKER.md): a lower bound is all we need.
        _, high = self._get_reader().get_watermark_offsets(TopicPartition(topic, partition), timeout=10.0,
                                                           cached=False)
        return high

    async def warm_up(self) -> None:
        """Create the clients and read the queue configs now."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._warm_up)

    def _warm_up(self) -> None:
        self._get_producer().list_topics(self.settings.queue_topic, timeout=10)
        self._get_reader()
        self._get_queue_partitions()
        self.config("")  # starts the queue-config view
        self._get_producer().poll(0)

    async def record_purge_point(self, queue: str) -> None:
        """Make the queue topic's current end the queue's purge point (its config)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._record_purge_point, queue)

    def _record_purge_point(self, queue: str) -> None:
        cfg = self.config(queue)
        parts = list(queue_partitions(queue, self._get_queue_partitions(), cfg.spread))
        ends = true_end_offsets(self.settings, self.settings.queue_topic, parts)
        new = cfg.purged(ends)
        write_config(self.settings, queue, new)
        self._configs.put_local(queue, new)

    async def end_offsets(self, queues: set[str]) -> dict[str, int]:
        """A lower bound of the end offset of each queue's target partition."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._end_offsets, queues)

    def set_aside(self, key: bytes, value: bytes, headers: list) -> None:
        """Queue a record we could not use (a malformed marker) for the dead-letter topic.

        It does not wait for the broker: a flood of garbage must not cost a round
        trip per record. :meth:`flush_set_aside` (on the next TICK) makes them durable.
        """
        producer = self._get_producer()
        partition = partition_for_key(key, self.settings.dlq_partitions)
        if not self._produce(producer, self.settings.dlq_topic, key.decode(), value, partition, headers):
            self._produce(producer, self.settings.dlq_topic, key.decode(), b"", partition,
                          headers + [("kmq.dlq.size", str(len(value)).encode())])
        self.set_aside_pending += 1
        producer.poll(0)

    async def flush_set_aside(self) -> None:
        """Wait until the records :meth:`set_aside` queued are written (raises DeliveryError)."""
        if self.set_aside_pending:
            self.set_aside_pending = 0
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, self._flush, self._get_producer())

    # -- in the worker thread ------------------------------------------------------

    def _end_offsets(self, queues: set[str]) -> dict[str, int]:
        # A lower bound is all the lookup after a crash needs.
        return {q: self._end_lower_bound(self.settings.queue_topic, self._target_partition(q)) for q in queues}

    def _target_partition(self, queue: str) -> int:
        return queue_partitions(queue, self._get_queue_partitions())[0]

    def _execute(self, due: list[Due], now_ms: int, attempted: dict[DueSend, int],
                 attempted_ranges: dict[RangeRef, tuple[int, int]]) -> Execution:
        s = self.settings
        producer = self._get_producer()
        done = Execution()
        counts: Counter[tuple[str, str]] = Counter()
        wanted: dict[int, set[int]] = {}
        for d in due:
            if isinstance(d, Expiry):
                wanted.setdefault(d.range.partition, set()).update(mask_offsets(d.range.start, d.mask))
        records = {p: self._read(p, sorted(offs)) for p, offs in wanted.items()}
        already = self._already_published(attempted)
        written = self._already_written(attempted_ranges)
        for d in due:
            if isinstance(d, DueSend):
                if (d.queue, d.message_id) in already:
                    counts[(d.queue, "scheduled-found")] += 1
                    continue
                headers = [(envelope.ID, d.message_id.encode()),
                           (envelope.ENQUEUED_MS, str(d.due_ms).encode()), *d.headers]
                if self._produce(producer, s.queue_topic, d.queue, d.value,
                                 self._target_partition(d.queue), headers):
                    counts[(d.queue, "scheduled-delivered")] += 1
                else:
                    self._too_large(producer, d.queue, d.value, headers, -1, -1, d.due_ms, now_ms)
                    counts[(d.queue, "too-large")] += 1
                continue
            queue = d.range.queue
            cfg = self.config(queue)
            have = records[d.range.partition]
            waits: dict[int, int] = {}
            for off in mask_offsets(d.range.start, d.mask):
                rec = have.get(off)
                if rec is None:
                    headers = [(envelope.ID, envelope.derived_id(d.range.partition, off).encode())]
                    headers += envelope.dead_letter_headers(
                        envelope.REASON_PAYLOAD_EXPIRED,
                        "the record left the queue topic before it could be redelivered",
                        d.started_ms, now_ms, d.range.partition, off)
                    self._produce(producer, s.dlq_topic, queue, b"", self._dlq_partition(queue), headers)
                    counts[(queue, "dead-lettered")] += 1
                    counts[(queue, "payload-expired")] += 1
                    continue
                value, rec_headers, ts_ms = rec
                plan = envelope.after_expiry(
                    rec_headers, partition=d.range.partition, offset=off, record_timestamp_ms=ts_ms,
                    cause=d.cause, reason=d.reason, started_ms=d.started_ms, now_ms=now_ms,
                    max_deliveries=cfg.deliveries(s), backoff=cfg.backoff, dead_letter=cfg.dead_letter)
                if isinstance(plan, (envelope.Republish, envelope.DeadLetter)) and written and \
                        _written_key(plan) in written.get(d.range, ()):
                    counts[(queue, "found-after-crash")] += 1
                elif isinstance(plan, (envelope.Republish, envelope.DeadLetter)):
                    republish = isinstance(plan, envelope.Republish)
                    if self._produce(producer, s.queue_topic if republish else s.dlq_topic, queue, value,
                                     d.range.partition if republish else self._dlq_partition(queue),
                                     plan.headers):
                        counts[(queue, "redelivered" if republish else "dead-lettered")] += 1
                    else:  # a poison record must not stop every later redelivery
                        self._too_large(producer, queue, value, plan.headers, d.range.partition, off,
                                        d.started_ms, now_ms)
                        counts[(queue, "too-large")] += 1
                elif isinstance(plan, envelope.Defer):
                    grain = max(BACKOFF_GRAIN_MS, plan.delay_ms // BACKOFF_GRAIN_SHARE)
                    deadline = -(-(now_ms + plan.delay_ms) // grain) * grain
                    waits[deadline] = waits.get(deadline, 0) | (1 << (off - d.range.start))
                    counts[(queue, "backoff")] += 1
                else:
                    counts[(queue, "discarded")] += 1
            if waits:
                done.deferred.setdefault(d.range, []).extend(
                    (mask, deadline) for deadline, mask in waits.items())
        self._flush(producer)
        done.outcomes = [(q, what, n) for (q, what), n in counts.items()]
        return done

    def _already_written(self, attempted: dict[RangeRef, tuple[int, int]]) -> dict[RangeRef, set]:
        """(topic, id, deliveries) written since an earlier attempt began, per attempted range."""
        out: dict[RangeRef, set] = {}
        scanned: dict[tuple[str, int, int], set] = {}
        for r, (queue_from, dlq_from) in attempted.items():
            found: set = set()
            for topic, partition, start in ((self.settings.queue_topic, r.partition, queue_from),
                                            (self.settings.dlq_topic, self._dlq_partition(r.queue),
                                             dlq_from)):
                key = (topic, partition, start)
                if key not in scanned:
                    label = "dlq" if topic == self.settings.dlq_topic else "queue"
                    scanned[key] = {(label,) + _id_and_count(rec.headers())
                                    for _o, rec in self._scan(partition, start, topic)
                                    if rec.key() == r.queue.encode()}
                found |= scanned[key]
            out[r] = found
        return out

    def _already_published(self, attempted: dict[DueSend, int]) -> set[tuple[str, str]]:
        """(queue, id) of attempted scheduled sends found on their partition since the attempt."""
        found: set[tuple[str, str]] = set()
        by_partition: dict[int, dict[str, int]] = {}
        for d, offset in attempted.items():
            by_partition.setdefault(self._target_partition(d.queue), {})[d.message_id] = offset
        for partition, ids in by_partition.items():
            start = min(ids.values())
            for _off, rec in self._scan(partition, start):
                ours, _ = envelope.split(rec.headers())
                msg_id = ours.get(envelope.ID, b"").decode(errors="replace")
                if msg_id in ids and rec.key() is not None:
                    found.add((rec.key().decode(errors="replace"), msg_id))
        return found

    def _dlq_partition(self, queue: str) -> int:
        # One partition per queue: listing a queue's dead letters reads one partition.
        return partition_for_key(queue.encode(), self.settings.dlq_partitions)

    def _produce(self, producer: Producer, topic: str, key: str, value: bytes, partition: int,
                 headers: list) -> bool:
        """Queue one record; False if it is too large to be written (the caller sets it aside)."""
        try:
            produce_when_room(producer, topic, value, key.encode(), partition=partition, headers=headers)
            return True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.MSG_SIZE_TOO_LARGE:
                raise
            return False

    def _too_large(self, producer: Producer, queue: str, value: bytes, headers: list, partition: int,
                   offset: int, started_ms: int, now_ms: int) -> None:
        """Dead-letter a record the broker took but we cannot write again: its headers, no payload."""
        ours, user = envelope.split(headers)
        detail = (f"{len(value)} bytes: above what may be written again (KMQ_MAX_MESSAGE_BYTES="
                  f"{self.settings.max_message_bytes}); the payload stays at the source offset")
        out = [(k, v) for k, v in ours.items() if not k.startswith("kmq.dlq.") and k != envelope.SOURCE]
        out += envelope.dead_letter_headers(envelope.REASON_TOO_LARGE, detail, started_ms, now_ms,
                                            partition, offset) + user
        self._produce(producer, self.settings.dlq_topic, queue, b"", self._dlq_partition(queue), out)

    def _flush(self, producer: Producer, timeout_s: float = 30.0) -> None:
        left = producer.flush(timeout_s)
        if left or self._errors:
            errors, self._errors = self._errors, []
            raise DeliveryError(
                f"redelivery not acknowledged: {left} pending, {len(errors)} failed "
                f"({errors[:1]}); will retry on the next tick")

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    def _get_producer(self) -> Producer:
        with self._producer_lock:
            return self._producer or self._new_producer()

    def _new_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({
                **profiles.producer_config(self.settings),  # acks=all, idempotence
                "linger.ms": 2,
                # What the SDK may send, plus the headers a redelivery adds.
                "message.max.bytes": self.settings.max_message_bytes + 4096,
                "delivery.report.only.error": True,
                "on_delivery": self._on_delivery,
            })
        return self._producer

    def _get_queue_partitions(self) -> int:
        if self._queue_partitions is None:
            md = self._get_producer().list_topics(self.settings.queue_topic, timeout=10)
            self._queue_partitions = len(md.topics[self.settings.queue_topic].partitions)
        return self._queue_partitions

    def _get_reader(self) -> Consumer:
        if self._reader is None:
            self._reader = Consumer({
                **profiles.client_config(self.settings),
                "group.id": f"{self.settings.app_id}-payload-reader",  # never joins or commits
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
                "fetch.wait.max.ms": 10,  # Tansu answers only after the whole wait
                "fetch.queue.backoff.ms": 10,
            })
        return self._reader

    def _scan(self, partition: int, start: int, topic: str | None = None):
        """Every record of a partition (of the queue topic by default) from ``start`` to its true end."""
        reader = self._get_reader()
        topic = topic or self.settings.queue_topic
        reader.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + 60.0
        try:
            while time.monotonic() < deadline:
                batch = reader.consume(10000, 0.2)
                for rec in batch:
                    err = rec.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return
                        if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                            low, _ = reader.get_watermark_offsets(TopicPartition(topic, partition), 5.0)
                            reader.assign([TopicPartition(topic, partition, max(low, start))])
                        continue
                    yield rec.offset(), rec
            raise DeliveryError(f"could not read {topic}[{partition}] to its end within 60 s")
        finally:
            reader.unassign()  # an assigned partition would be prefetched on and on

    def _read(self, partition: int, offsets: list[int]) -> dict[int, tuple[bytes, Any, int]]:
        """Records at ``offsets`` of one queue partition; missing ones have left the log."""
        out: dict[int, tuple[bytes, Any, int]] = {}
        wanted = set(offsets)
        spans = []
        lo = prev = offsets[0]
        for off in offsets[1:]:
            if off - prev > SPAN_GAP:
                spans.append((lo, prev))
                lo = off
            prev = off
        spans.append((lo, prev))
        reader = self._get_reader()
        topic = self.settings.queue_topic
        for lo, hi in spans:
            pos = lo
            reader.assign([TopicPartition(topic, partition, pos)])
            deadline = time.monotonic() + 15.0
            done = False
            while not done and time.monotonic() < deadline:
                for rec in reader.consume(min(10000, hi - pos + 1), 0.2):
                    err = rec.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done = True
                        elif err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                            low, _ = reader.get_watermark_offsets(TopicPartition(topic, partition), 5.0)
                            if low <= pos:
                                done = True
                            else:  # the head of the span is gone; read what is left
                                pos = low
                                reader.assign([TopicPartition(topic, partition, pos)])
                        else:
                            log.warning("reading %s[%d]@%d: %s", topic, partition, pos, err)
                        break
                    off = rec.offset()
                    pos = off + 1
                    if off in wanted:
                        out[off] = (rec.value() or b"", rec.headers(), rec.timestamp()[1])
                    if off >= hi:
                        done = True
                        break
        # Left assigned, the partition (often the busiest) would be prefetched on and
        # on, up to librdkafka's queue bounds, for nothing.
        reader.unassign()
        return out
