"""Reading records back for redelivery: expired payloads, and what an attempt before a crash wrote.

An expired offset's payload is read back from the queue topic (DESIGN:
redelivery is rare, and copying payloads into every START would double the
bytes written). One librdkafka consumer, used from the redeliverer's one
worker thread, never joins a group or commits; it is unassigned after each
read (left assigned, the partition, often the busiest, would be prefetched
on and on up to librdkafka's queue bounds, for nothing).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator

from confluent_kafka import KafkaError, TopicPartition

from kmq.errors import BrokerUnavailableError, DeliveryError
from kmq.kafka import profiles
from kmq.kafka.patient_reader import PatientReader
from kmq.kafka.offsets import read_to_end
from kmq.protocol import envelope
from kmq.protocol.expiry import DLQ, QUEUE, PartitionRead, Record, written_key
from kmq.protocol.markers import RangeRef
from kmq.protocol.state import DueSend
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.payloads")

SPAN_GAP = 5000  # offsets further apart than this are read in separate spans
SPAN_TIMEOUT_S = 15.0
SCAN_TIMEOUT_S = 60.0


class PayloadReader:
    """Reads queue-topic records at given offsets, and partitions from a point to their end."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._consumer: PatientReader | None = None

    def consumer(self) -> PatientReader:
        """The reader's consumer (created on first use)."""
        if self._consumer is None:
            self._consumer = PatientReader({
                **profiles.reader_config(self.settings, f"{self.settings.app_id}-payload-reader",
                                         fetch_wait_ms=10, eof=True),
                "auto.offset.reset": "error",
            })
        return self._consumer

    def list_end(self, topic: str, partition: int) -> int:
        """ListOffsets' end of a partition: it may undercount (docs/embedded-broker.md), a lower bound."""
        _, high = self.consumer().get_watermark_offsets(TopicPartition(topic, partition), timeout=10.0,
                                                        cached=False)
        return high

    def read(self, partition: int, offsets: list[int], end_lower_bound: int = -1) -> PartitionRead:
        """Records at ``offsets`` (ascending) of one queue partition; missing ones have left the
        log, or lie at or past ``end`` when the read reached the partition's end.

        ``end_lower_bound``: a known lower bound of the partition's end (-1: none). A
        span at or past it is read from inside the log (just below ListOffsets' end,
        which may undercount) to the true end: a fetch past the end gets no answer.
        """
        out: dict[int, Record] = {}
        end: int | None = None
        wanted = set(offsets)
        reader = self.consumer()
        topic = self.settings.queue_topic
        bound = end_lower_bound
        for lo, hi in _spans(offsets):
            if end is not None:
                break  # past the end already: later spans are too
            pos = lo
            if lo >= bound:  # maybe past the end: ask, and start inside the log if so
                bound = self.list_end(topic, partition)
                pos = lo if lo < bound else max(0, bound - 1)
            reader.assign([TopicPartition(topic, partition, pos)])
            deadline = time.monotonic() + SPAN_TIMEOUT_S
            done = False
            while not done and time.monotonic() < deadline:
                for rec in reader.consume(min(10000, hi - pos + 1), 0.2):
                    err = rec.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done, end = True, pos
                        elif err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                            low, _ = reader.get_watermark_offsets(TopicPartition(topic, partition), 5.0)
                            if pos < low:  # the head of the span is gone; read what is left
                                pos = low
                                reader.assign([TopicPartition(topic, partition, pos)])
                            else:  # past the log's end
                                done, end = True, pos
                        else:
                            log.warning("reading %s[%d]@%d: %s", topic, partition, pos, err)
                        break
                    off = rec.offset()
                    pos = off + 1
                    if off in wanted:
                        out[off] = Record(rec.value() or b"", rec.headers(), rec.timestamp()[1], rec.key())
                    if off >= hi:
                        done = True
                        break
        reader.unassign()
        return PartitionRead(out, end)

    def scan(self, partition: int, start: int, topic: str | None = None) -> Iterator[tuple[int, object]]:
        """Every record of a partition (of the queue topic by default) from ``start`` to its true end."""
        topic = topic or self.settings.queue_topic
        try:
            yield from read_to_end(self.consumer(), topic, partition, start, SCAN_TIMEOUT_S)
        except BrokerUnavailableError as exc:
            raise DeliveryError(str(exc)) from exc  # the tick retries
        finally:
            self.consumer().unassign()

    def already_written(self, attempted: dict[RangeRef, tuple[int, int]],
                        dlq_partition: Callable[[str], int]) -> dict[RangeRef, set]:
        """Per attempted range: the ``written_key`` of what was written since the attempt began
        (its queue and dead-letter partitions, read from where each ended then)."""
        out: dict[RangeRef, set] = {}
        scanned: dict[tuple[str, int, int], set] = {}
        for r, (queue_from, dlq_from) in attempted.items():
            found: set = set()
            for label, topic, partition, start in (
                    (QUEUE, self.settings.queue_topic, r.partition, queue_from),
                    (DLQ, self.settings.dlq_topic, dlq_partition(r.queue), dlq_from)):
                key = (topic, partition, start)
                if key not in scanned:
                    scanned[key] = {written_key(label, rec.headers())
                                    for _o, rec in self.scan(partition, start, topic)
                                    if rec.key() == r.queue.encode()}
                found |= scanned[key]
            out[r] = found
        return out

    def already_published(self, attempted: dict[DueSend, int],
                          target_partition: Callable[[DueSend], int]) -> set[tuple[str, str]]:
        """(queue, id) of attempted scheduled sends found on their partition since the attempt."""
        found: set[tuple[str, str]] = set()
        by_partition: dict[int, dict[str, int]] = {}
        for d, offset in attempted.items():
            by_partition.setdefault(target_partition(d), {})[d.message_id] = offset
        for partition, ids in by_partition.items():
            for _off, rec in self.scan(partition, min(ids.values())):
                ours, _ = envelope.split(rec.headers())
                msg_id = ours.get(envelope.ID, b"").decode(errors="replace")
                if msg_id in ids and rec.key() is not None:
                    found.add((rec.key().decode(errors="replace"), msg_id))
        return found


def _spans(offsets: list[int]) -> list[tuple[int, int]]:
    """Ascending offsets grouped into (first, last) spans with gaps of at most SPAN_GAP."""
    spans = []
    lo = prev = offsets[0]
    for off in offsets[1:]:
        if off - prev > SPAN_GAP:
            spans.append((lo, prev))
            lo = off
        prev = off
    spans.append((lo, prev))
    return spans
