"""End offsets that are true even where ListOffsets undercounts.

The embedded broker answers ListOffsets(latest) with the last batch's base
offset + 1 (docs/embedded-broker.md); Apache Kafka answers right. Reading from that answer
minus one to the end of the partition costs one fetch and gives the true end
on both, so everything that reads "up to the end" (purges, Faust's table
recovery) asks here.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kmq.errors import BrokerUnavailableError
from kmq.kafka import profiles
from kmq.kafka.patient_reader import PatientReader
from kmq.settings import Settings


def _reader(settings: Settings) -> PatientReader:
    return PatientReader(profiles.reader_config(settings, f"{settings.app_id}-end-offsets",
                                           fetch_wait_ms=10, eof=True))


def true_end_offsets(settings: Settings, topic: str, partitions: list[int],
                     timeout_s: float = 30.0) -> dict[int, int]:
    """End offsets found by reading to EOF from ListOffsets' answer (which may undercount)."""
    c = _reader(settings)
    try:
        ends = {}
        for p in partitions:
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            ends[p] = max(0, high)
        listed = dict(ends)
        c.assign([TopicPartition(topic, p, max(0, ends[p] - 1)) for p in partitions])
        open_parts = set(partitions)
        deadline = time.monotonic() + timeout_s
        while open_parts:
            if time.monotonic() > deadline:
                stuck = ", ".join(
                    f"[{p}] listed end {listed[p]}, read to {ends[p]}, fetch watermarks "
                    f"{c.get_watermark_offsets(TopicPartition(topic, p), cached=True)}"
                    for p in sorted(open_parts))
                raise BrokerUnavailableError(
                    f"could not find the end of {topic} within {timeout_s:g}s: {stuck}")
            for rec in c.consume(1000, 0.2):
                err = rec.error()
                if err is None:
                    ends[rec.partition()] = max(ends[rec.partition()], rec.offset() + 1)
                elif err.code() == KafkaError._PARTITION_EOF:
                    open_parts.discard(rec.partition())
        return ends
    finally:
        c.close()


def read_to_end(consumer: Consumer | PatientReader, topic: str, partition: int, start: int,
                timeout_s: float = 60.0, round_s: float = 0.2) -> Iterator[tuple[int, Any]]:
    """Every record of one partition from ``start`` to its true end: (offset, message).

    The one way kmq reads "to the end": assign, consume until librdkafka says
    end of partition (``enable.partition.eof`` must be on), never trusting
    ListOffsets (which may undercount, docs/embedded-broker.md). Records gone below the log
    start are skipped. The partition stays assigned: the caller unassigns.
    Raises :class:`BrokerUnavailableError` if the end is not reached in ``timeout_s``.
    ``round_s``: each ``consume()``'s wait (it waits it whole unless its batch fills: a short
    read of a few records, as a settings read-back, wants short rounds).
    """
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for rec in consumer.consume(10000, round_s):
            err = rec.error()
            if err is None:
                yield rec.offset(), rec
            elif err.code() == KafkaError._PARTITION_EOF:
                return
            elif err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), 5.0)
                consumer.assign([TopicPartition(topic, partition, max(low, start))])
            elif err.fatal():
                raise BrokerUnavailableError(f"reading {topic}[{partition}]: {err}")
    raise BrokerUnavailableError(f"could not read {topic}[{partition}] to its end within {timeout_s:g} s")


class EndLowerBounds:
    """Recent end offsets kept as lower bounds of the true ends.

    A partition's end only grows, so an end read a moment ago is still a
    lower bound of it now: where the tracker only needs that (the point a
    redelivery attempt began, looked up from after a crash), an answer up to
    ``max_age_s`` old spares a broker round trip on the redelivery path. The
    price is scanning at most that much more of the partition after a crash.
    """

    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._ends: dict[tuple[str, int], tuple[int, float]] = {}  # -> (end, read at, s)

    def get(self, topic: str, partition: int, now_s: float, read_end) -> int:
        """The cached end if fresh enough, else ``read_end(topic, partition)`` (kept)."""
        hit = self._ends.get((topic, partition))
        if hit is not None and now_s - hit[1] <= self.max_age_s:
            return hit[0]
        end = max(0, read_end(topic, partition))
        self._ends[(topic, partition)] = (end, now_s)
        return end
