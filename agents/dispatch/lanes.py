"""The dispatcher's writes: BEGIN and ACQUIRE records to the markers topic, and the
deliveries they open on the consumers' lanes (agents/dispatch/dispatcher.py, steps 1, 3 and 4).

One idempotent producer, in the dispatcher's thread, so everything it writes to a
markers partition lands in the order written (a BEGIN after the ACQUIREs before it).
A delivery is written only once the broker has its ACQUIRE, and only if no successor
can have begun before that ACQUIRE landed: its epoch is still this worker's and the
broker acknowledged it inside the worker's membership lease (app/membership.py).
Otherwise the messages stay in flight with nobody holding them and time out.

No gaps: the cursor a successor begins from is the highest ACQUIRE applied, so an
ACQUIRE that failed (a message timeout in a broker outage) while a later one of the
same partition was written would leave records below the cursor that nobody has:
lost. librdkafka's idempotent producer writes on after such a failure unless
``enable.gapless.guarantee`` is set; with it, the failure is fatal and every later
write fails too, so the epoch ends (``Dispatcher._failed``) with nothing skipped, and
the dispatcher starts a new writer (:attr:`LaneWriter.fatal`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from confluent_kafka import KafkaException, Producer

from kmq.kafka import profiles
from kmq.kafka.admin import existing_lanes, partition_counts
from kmq.kafka.backpressure import produce_when_room
from kmq.protocol import deliveries as D
from kmq.protocol import envelope
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.dispatch import ConsumerSlot, refer
from kmq.protocol.lane_layout import LaneLayout
from kmq.protocol.lookahead import Lookahead
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.dispatcher")

MAX_ACQUIRES_PER_RECORD = 1000
LANES_REREAD_S = 10.0  # how often a CREDIT for an unknown lane may make us read the topics again


@dataclass
class Batch:
    """One share of one queue: ACQUIREd, then written to the consumer's lane."""

    consumer_id: str
    lane: int
    delivery: D.Delivery
    records: list  # copies to write; empty for a delivery by reference
    # The copies carry a kmq.run header no dispatcher wrote (an unordered queue's records,
    # from a plain producer): written without it, else it switched the consumer's group
    # gate on for an unordered queue (an audit: a group's messages waited behind the first).
    strip_run: bool = False


def delivery_of(run: list, queue: str, p: int, epoch: int, slot: ConsumerSlot, seq: int,
                ahead: Lookahead, copy: bool = False, consumers: int = 1,
                max_copy_bytes: int | None = None) -> Batch:
    """One consumer's share (``run``, records of ``queue`` on partition ``p`` in offset order)
    as a delivery: by reference where what the consumer's reader would fetch for it (the
    range and its read-ahead) is mostly its own, else, or if ``copy`` (an ordered queue's:
    its records carry their run's id, docs/ordering.md), as copies. The queue's records
    after the range go to all its ``consumers`` in turn: this one's part of them is one
    in ``consumers`` (32 consumers of one queue each read the queue's next 1 MiB for
    every small range they were referred to: the broker's busiest work at N = 32).
    A run holding a record whose value alone is over ``max_copy_bytes`` (a plain producer's,
    taken by a broker that allows more than kmq's writers) is referred: no lane takes its copy."""
    start, end = run[0].offset(), run[-1].offset() + 1
    ref = M.RangeRef(queue, p, start, end)
    contiguous = len(run) == end - start
    mask = ref.full_mask if contiguous else M.offsets_mask(start, list(map(type(run[0]).offset, run)))
    # The consumer's reader fetches past the range (its read-ahead): a queue's short
    # contiguous run among other tenants' records is copied, not referred.
    run_bytes = sum(map(len, run))
    range_bytes = run_bytes if contiguous else ahead.bytes_between(start, end)
    own_after, all_after = ahead.bytes_from(end, run[0].key(), D.REFERENCE_READ_AHEAD_BYTES - range_bytes)
    # Records of the range the read-ahead's index no longer spans cannot be counted: copy.
    held = not copy and ahead.indexed(start)
    by_ref = held and refer(run_bytes + own_after // max(1, consumers), range_bytes + all_after,
                            D.REFERENCE_MIN_SHARE)
    if not copy and max_copy_bytes is not None and run_bytes > max_copy_bytes:
        by_ref = by_ref or max(map(len, run)) > max_copy_bytes
    d = D.Delivery(D.REFERENCE if by_ref else D.COPY, epoch, seq, slot.timeout_ms, ref, mask)
    return Batch(slot.consumer_id, slot.lane, d, [] if by_ref else run)


class LaneWriter:
    """Writes BEGINs, ACQUIREs (with FLOORs) and, once acknowledged, their deliveries."""

    def __init__(self, settings: Settings, stats: dict, membership: Callable[[], float],
                 trace: bool = False) -> None:
        self.settings = settings
        self.stats = stats
        self._membership = membership
        self._trace = trace
        self.fatal = False  # the producer failed for good: replace this writer
        # The deliveries topics as they exist (set by the dispatcher once it has read them)
        self.layout = LaneLayout(settings.deliveries_topic, 1, 0)
        self._layout_read_at = 0.0  # monotonic s
        self.producer = Producer({
            **profiles.producer_config(settings),
            "linger.ms": 1,
            "message.max.bytes": settings.max_message_bytes + 4096,
            "queue.buffering.max.kbytes": 256 * 1024,
            "enable.gapless.guarantee": True,  # see the module docstring
            "error_cb": self._note,  # a fatal error, whichever write it came from
        })
        # ACQUIRE records the broker took (when, monotonic s; their batches): lanes to write
        self._acked: list[tuple[float, list[Batch]]] = []
        self._acquires_in_flight = 0  # ACQUIRE records written, not yet acknowledged or failed

    def read_layout(self) -> None:
        """The deliveries topics as they exist, not as the settings say: what consumers
        pick their lanes from (kmq.protocol.lane_layout)."""
        counts = partition_counts(self.producer.list_topics(timeout=10))
        self.layout, self._layout_read_at = existing_lanes(self.settings, counts), time.monotonic()

    def read_layout_again(self) -> None:
        """For a consumer that picked a lane beyond the layout (deliveries topics added since
        they were read): read them again, at most every ``LANES_REREAD_S``."""
        if time.monotonic() < self._layout_read_at + LANES_REREAD_S:
            return
        before = self.layout.count
        try:
            self.read_layout()
        except Exception as exc:  # the broker not answering: the consumer asks again
            log.warning("could not read the deliveries topics again: %s", exc)
            self._layout_read_at = time.monotonic()
            return
        if self.layout.count != before:
            log.info("deliveries topics read again: %d lanes (were %d)", self.layout.count, before)

    def adopt(self, old: "LaneWriter") -> None:
        """Take over the lanes a failed writer still owed (their ACQUIREs are in the log)."""
        self._acked = old._acked + self._acked
        old._acked = []
        self.layout, self._layout_read_at = old.layout, old._layout_read_at

    def _note(self, err: Any) -> None:
        if err is not None and err.fatal():
            self.fatal = True

    @property
    def lanes_waiting(self) -> bool:
        """ACQUIREs are on their way to the broker, or acknowledged with lanes to write."""
        return bool(self._acked) or self._acquires_in_flight > 0

    def begin(self, m: int, epoch: int, on_error: Callable[[int, int, Any], None]) -> None:
        """BEGIN(epoch) on markers partition ``m``, after everything written before."""
        produce_when_room(self.producer, self.settings.markers_topic, marker_codec.encode([M.Begin(epoch)]), None,
                          partition=m,
                          on_delivery=lambda err, _msg: None if err is None else self._begin_failed(
                              m, epoch, err, on_error))

    def _begin_failed(self, m: int, epoch: int, err: Any, on_error: Callable[[int, int, Any], None]) -> None:
        self._note(err)
        on_error(m, epoch, err)

    def acquire(self, m: int, batches: list[Batch], floors: list[M.Floor],
                on_failed: Callable[[int, int | None, list[Batch], Any], None], ordered: set[str],
                returns: list[list[M.Marker]] = ()) -> None:
        """Marker records of ACQUIREs, the FLOORs after them in the same record (an ordered
        queue's; an unordered one's past dropped duplicates), then records given back
        (agents.dispatch.give_back: ``returns``, groups never split across records); their
        lanes are written by :meth:`write_lanes` once the broker has them. ``ordered``: the
        queues with ordering="group". ``on_failed(m, epoch, batches, err)``: a record not written."""
        if self._trace:
            log.info("TRACE acquire %s", [(b.delivery.range.start, b.delivery.count) for b in batches])
        records: list[tuple[bytes, list[Batch]]] = []
        chunks = _record_chunks(batches) or [[]]
        for i, chunk in enumerate(chunks):
            tail = list(floors) if i == len(chunks) - 1 else []
            acquires = [M.Acquire(b.delivery.range, b.delivery.timeout_ms, b.delivery.mask, b.delivery.epoch,
                                  b.delivery.range.queue in ordered) for b in chunk]
            if acquires or tail:
                records.append((marker_codec.encode(acquires + tail), chunk))
        records += [(value, []) for value in marker_codec.encode_units(returns)]
        epoch = batches[0].delivery.epoch if batches else next(  # the partition's epoch, for on_failed
            (mk.epoch for mk in [*floors, *(mk for unit in returns for mk in unit)] if hasattr(mk, "epoch")), None)
        for value, chunk in records:
            def done(err: Any, _msg: Any, chunk: list[Batch] = chunk) -> None:
                self._acquires_in_flight -= 1
                if err is None:
                    self._acked.append((time.monotonic(), chunk))
                else:
                    self._note(err)
                    on_failed(m, epoch, chunk, err)

            produce_when_room(self.producer, self.settings.markers_topic, value, None, partition=m,
                              on_delivery=done)
            self._acquires_in_flight += 1

    def write_lanes(self, epochs: set[int]) -> bool:
        """Write the deliveries of acknowledged ACQUIREs of ``epochs`` (still this worker's)."""
        if not self._acked:
            return False
        acked, self._acked = self._acked, []
        if self._trace:
            log.info("TRACE lanes %d", sum(len(c) for _, c in acked))
        layout = self.layout
        member_until = self._membership()
        for acked_at, chunk in acked:
            if chunk and (chunk[0].delivery.epoch not in epochs or acked_at >= member_until):
                # Maybe fenced by a successor's BEGIN: its messages time out and go out again.
                n = sum(b.delivery.count for b in chunk)
                self.stats["lanes-withheld"] += n
                log.warning("%d messages acquired but not delivered: the ACQUIRE landed after this "
                            "worker's ownership could end (they time out and go out again)", n)
                continue
            for b in chunk:
                # A lane write that fails loses nothing (the messages time out), but it ends
                # this producer all the same (no gaps; error_cb notes it): counted per delivery.
                topic, lane_partition = layout.topic(b.lane), layout.partition(b.lane)
                produce_when_room(self.producer, topic, D.encode(b.delivery), D.header_key(b.consumer_id),
                                  partition=lane_partition, on_delivery=self._lane_written)
                key = b.consumer_id.encode()
                for rec in b.records:
                    ts = rec.timestamp()[1]
                    headers = rec.headers()
                    if b.strip_run and headers:
                        headers = [h for h in headers if h[0] != envelope.RUN]
                    try:
                        produce_when_room(self.producer, topic, rec.value(), key, partition=lane_partition,
                                          headers=headers, timestamp=ts if ts > 0 else 0)
                    except KafkaException as exc:
                        self._copy_refused(b.delivery.range, rec.offset(), exc)
                        break  # the consumer pairs copies with offsets by order: none after a gap
                self.stats["dispatched"] += b.delivery.count
                self.stats["deliveries"] += 1
        self.producer.poll(0)
        return True

    def _copy_refused(self, r: M.RangeRef, offset: int, exc: KafkaException) -> None:
        """A copy the producer refused at once (a record larger than it may write: a plain
        producer's, on a broker that allows more): it and the delivery's copies after it stay
        in flight and time out; the redeliverer sets a record too large to write aside."""
        self.stats["too-large-to-copy"] = self.stats.get("too-large-to-copy", 0) + 1
        log.warning("queue %s partition %d offset %d: not copied to a lane (%s); it and the rest of "
                    "its delivery come back after their visibility timeout", r.queue, r.partition, offset, exc)

    def _lane_written(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.stats["lane-errors"] += 1
            self._note(err)

    def farewell(self, consumer_id: str, lane: int, epoch: int, last_seq: int, epochs: set[int]) -> None:
        """Answer a goodbye on its lane, after every delivery already sent to it."""
        self.producer.flush(10)  # our ACQUIREs are acknowledged, their callbacks queued
        self.write_lanes(epochs)
        produce_when_room(self.producer, self.layout.topic(lane),
                          D.encode_farewell(D.Farewell(epoch, last_seq)), D.header_key(consumer_id),
                          partition=self.layout.partition(lane), on_delivery=self._lane_written)

    def settle_writes(self, epochs: set[int], timeout_s: float) -> None:
        """Wait until everything written is acknowledged; write the lanes that opened."""
        self.producer.flush(timeout_s)
        self.write_lanes(epochs)


def _record_chunks(batches: list[Batch]) -> list[list[Batch]]:
    """Batches cut so that each chunk's ACQUIREs fit one marker record (the codec's limits)."""
    out: list[list[Batch]] = []
    offsets = M.MAX_RECORD_OFFSETS + 1
    for b in batches:
        n = b.delivery.range.length
        if offsets + n > M.MAX_RECORD_OFFSETS or len(out[-1]) >= MAX_ACQUIRES_PER_RECORD:
            out.append([])
            offsets = 0
        out[-1].append(b)
        offsets += n
    return out
