"""Carrying out what came due (5. in the README flow): read back, plan, write, flush.

What each due item becomes is decided by the pure ``kmq.protocol.expiry``
(republish, dead-letter, defer by the backoff, drop what lies past the end);
here that plan is carried out: payloads are read back (``agents.payloads``),
the plan's records written, and everything acknowledged by the broker before
this returns, so the markers agent only forgets what is durable. Before any
write the agent records where each target partition ended (attempt points,
kept here as recent lower bounds), so a tracker killed in between looks there
for what it already wrote instead of writing it twice.

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

from confluent_kafka import KafkaError, KafkaException, Producer

from agents.payloads import PayloadReader
from app.startup import until_done
from kmq.errors import DeliveryError
from kmq.kafka import profiles
from kmq.kafka.backpressure import produce_when_room
from kmq.kafka.offsets import EndLowerBounds, true_end_offsets
from kmq.protocol import expiry
from kmq.protocol.markers import RangeRef
from kmq.protocol.outcomes import Outcome
from kmq.protocol import envelope
from kmq.protocol.limits import DEAD_LETTER_HEADROOM_BYTES
from kmq.protocol.placement import keyed_partition, partition_for_key, queue_partitions
from kmq.protocol.state import Due, DueSend
from kmq.queue_config import QueueConfig
from kmq.ops.queues_topic import QueueConfigs
from kmq.ops.queues_writes import write_configs
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.redeliver")

Counted = tuple[str, Outcome, int]  # (queue, what, count)
# Attempt points may be this stale (a lower bound of a partition's end): it spares two
# ListOffsets round trips on most ticks (measured: ~22 ms of a redelivery's lateness at
# the median on the embedded broker) for at most this much more scanning after a crash.
END_MAX_AGE_S = 1.0


@dataclass
class Execution:
    """What :meth:`Redeliverer.execute` did."""

    outcomes: list[Counted] = field(default_factory=list)
    # range -> [(mask, deadline_ms)]: expired offsets that wait out a backoff
    deferred: dict[RangeRef, list[tuple[int, int]]] = field(default_factory=dict)
    ended: list[tuple[str, int, int, bool]] = field(default_factory=list)  # expiry.Plan.ended


class Redeliverer:
    """Reads expired payloads back and writes them to the queue or dead-letter topic."""

    def __init__(self, settings: Settings, configs: Callable[[], QueueConfigs]) -> None:
        self.settings = settings
        self._configs_factory = configs
        self._configs: QueueConfigs | None = None
        self._configs_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kmq-redeliver")
        self._producer: Producer | None = None
        self.payloads = PayloadReader(settings)
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

    def configs_if_started(self) -> QueueConfigs | None:
        """The queue settings view if something started it already, else None (never blocks)."""
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
        return self.payloads.list_end(topic, partition)  # a lower bound is all we need

    async def warm_up(self) -> None:
        """Create the clients and read the queue configs now (again until it works)."""
        await until_done("the redeliverer's warm-up", self._warm_up, self._executor)

    def _warm_up(self) -> None:
        self._get_producer().list_topics(self.settings.queue_topic, timeout=10)
        self.payloads.consumer()
        self._get_queue_partitions()
        self.config("")  # starts the queue-config view
        self._get_producer().poll(0)

    async def record_purge_points(self, queues: list[str]) -> None:
        """Make the queue topic's current end each queue's purge point (its config): the
        settings read, the ends asked and the configs written once for all of a markers
        record's PURGEs (one at a time, a record of 100 made-up ones took 100 s, stalling
        every partition of the worker: an audit)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._record_purge_points, queues)

    def _record_purge_points(self, queues: list[str]) -> None:
        # The record replaces the whole config: a change written just before the purge
        # must stay (configure_queue() then purge() lost the setting).
        self.configs().catch_up()
        n = self._get_queue_partitions()
        parts_of = {q: list(queue_partitions(q, n, self.config(q).spread)) for q in queues}
        ends = true_end_offsets(self.settings, self.settings.queue_topic,
                                sorted({p for parts in parts_of.values() for p in parts}))
        new = {q: self.config(q).purged({p: ends[p] for p in parts}) for q, parts in parts_of.items()}
        at = write_configs(self.settings, new)
        for q, cfg in new.items():  # where each landed: the view never goes back to an older one
            self._configs.put_local(q, cfg, at.get(q))

    async def read_payloads(self, partition: int, offsets: list[int]) -> expiry.PartitionRead:
        """Records of the queue topic read back on this redeliverer's thread (views).

        One reader, never shared across threads: it runs where the redeliveries run.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.payloads.read, partition, offsets)

    async def end_offsets(self, sends: list[DueSend]) -> dict[DueSend, int]:
        """A lower bound of the end offset of each due send's target partition."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._end_offsets, sends)

    def set_aside(self, key: bytes, value: bytes, headers: list) -> None:
        """Queue a record we could not use (a malformed marker) for the dead-letter topic.

        It does not wait for the broker: a flood of garbage must not cost a round
        trip per record. :meth:`flush_set_aside` (on the next TICK) makes them durable.
        """
        producer = self._get_producer()
        partition = partition_for_key(key, self.settings.dlq_partitions)
        # One over the limit is not offered to the client at all: its refusal (an exception)
        # is not needed to know, and costs a leak when raised inside a handler (track_markers).
        if len(value) > self.settings.max_message_bytes or not self._produce(
                producer, self.settings.dlq_topic, key.decode(), value, partition, headers):
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

    def _end_offsets(self, sends: list[DueSend]) -> dict[DueSend, int]:
        # A lower bound is all the lookup after a crash needs.
        return {d: self._end_lower_bound(self.settings.queue_topic, self._target_partition(d)) for d in sends}

    def _target_partition(self, d: DueSend) -> int:
        """Where a due send is published: by its group or dedup id as the client places a
        direct send (so the two meet one dispatcher's dedup), else the queue's first partition."""
        parts = queue_partitions(d.queue, self._get_queue_partitions(), self.config(d.queue).spread)
        ours, _ = envelope.split(d.headers)
        keyed = keyed_partition(parts, ours.get(envelope.GROUP), ours.get(envelope.DEDUP_ID))
        return parts[0] if keyed is None else keyed

    def _execute(self, due: list[Due], now_ms: int, attempted: dict[DueSend, int],
                 attempted_ranges: dict[RangeRef, tuple[int, int]]) -> Execution:
        reads = {p: self.payloads.read(p, offs, self._end_lower_bound(self.settings.queue_topic, p))
                 for p, offs in expiry.offsets_to_read(due).items()}
        plan = expiry.plan(
            due, reads, now_ms=now_ms, rules=self._rules, target_partition=self._target_partition,
            dlq_partition=self._dlq_partition, max_message_bytes=self.settings.max_message_bytes,
            found=self.payloads.already_written(attempted_ranges, self._dlq_partition),
            found_sends=self.payloads.already_published(attempted, self._target_partition))
        counts, ended = self._carry_out(plan.writes)
        counts.update(plan.counts)
        return Execution([(q, what, n) for (q, what), n in counts.items()], plan.deferred, plan.ended + ended)

    def _rules(self, queue: str) -> expiry.QueueRules:
        cfg = self.config(queue)
        return expiry.QueueRules(cfg.deliveries(self.settings), cfg.backoff, cfg.dead_letter,
                                 cfg.ordering == "group")

    def _carry_out(self, writes: list[expiry.Write]) -> tuple[Counter, list[tuple[str, int, int, bool]]]:
        """Write every record of the plan and wait for the broker: (queue, outcome) -> count, and
        the ordered queues' redeliveries that were dead-lettered instead (``Write.ends``)."""
        producer = self._get_producer()
        topics = {expiry.QUEUE: self.settings.queue_topic, expiry.DLQ: self.settings.dlq_topic}
        counts: Counter = Counter()
        ended = []
        limit = self.settings.max_message_bytes
        for w in writes:
            if not (expiry.fits(w, limit) and self._produce(producer, topics[w.topic], w.queue, w.value,
                                                             w.partition, w.headers)) \
                    and w.if_too_large is not None:  # a poison record must not stop every later write
                if w.ends is not None:
                    ended.append((*w.ends, True))
                w = w.if_too_large
                self._produce(producer, topics[w.topic], w.queue, w.value, w.partition, w.headers)
            counts[(w.queue, w.outcome)] += 1
        self._flush(producer)
        return counts, ended

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
                # What the SDK may send, plus what a dead letter adds (expiry.fits checks
                # each record against its topic's own limit first).
                "message.max.bytes": self.settings.max_message_bytes + DEAD_LETTER_HEADROOM_BYTES,
                "delivery.report.only.error": True,
                "on_delivery": self._on_delivery,
            })
        return self._producer

    def _get_queue_partitions(self) -> int:
        if self._queue_partitions is None:
            md = self._get_producer().list_topics(self.settings.queue_topic, timeout=10)
            self._queue_partitions = len(md.topics[self.settings.queue_topic].partitions)
        return self._queue_partitions
