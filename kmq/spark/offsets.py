"""Which offsets a batch read covers: topic discovery, true end offsets, splitting.

Runs on the driver side (the data source's ``partitions()``), with
confluent-kafka only. The end of a partition is the high watermark a fetch
reports, not ListOffsets(latest) alone: some brokers (the embedded Tansu one)
answer ListOffsets with the last batch's base offset + 1. We assign a
consumer at the listed offset and read the end from its end-of-partition
event: on Apache Kafka that is immediate, elsewhere it moves at most one
batch of records.
"""

from __future__ import annotations

import heapq
import time
import uuid
from dataclasses import dataclass

from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.spark.options import EARLIEST, LATEST, ReadOptions


class DataLossError(ConfigError):
    """Requested offsets are no longer (or not yet) in Kafka and failOnDataLoss is true."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def consumer_config(opts: ReadOptions) -> dict[str, object]:
    """librdkafka settings of the source's consumers (the user's ``kafka.*`` first)."""
    conf: dict[str, object] = {
        # The official source uses Java clients, which read uncommitted by default.
        "isolation.level": "read_uncommitted",
        "group.id": f"kmq-spark-{uuid.uuid4().hex[:12]}",  # never joins or commits
        # librdkafka's 1 s default backoff stalls the end of a bounded read.
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 50,
        "max.partition.fetch.bytes": 4 * 1024 * 1024,
    }
    conf.update(opts.kafka)
    conf.update({"enable.auto.commit": False, "enable.partition.eof": True,
                 "auto.offset.reset": "error"})
    return conf


def _clients(opts: ReadOptions):
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka.admin import AdminClient

    conf = consumer_config(opts)
    try:
        consumer = Consumer({**conf, "auto.offset.reset": "latest"})
        admin = AdminClient({k: v for k, v in conf.items() if k in opts.kafka or k == "bootstrap.servers"})
    except KafkaException as exc:
        raise ConfigError(f"a kafka.* option was refused by the client: {exc}") from exc
    return consumer, admin


def discover(opts: ReadOptions, consumer, timeout_s: float) -> list[tuple[str, int]]:
    """The (topic, partition) pairs the options select, sorted."""
    from confluent_kafka import KafkaException

    try:
        md = consumer.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerUnavailableError(
            f"no Kafka broker answered at {opts.kafka['bootstrap.servers']} within {timeout_s:g}s "
            f"(option kafka.bootstrap.servers): {exc}") from exc
    found = {name: sorted(t.partitions) for name, t in md.topics.items()
             if t.error is None and opts.topic_matches(name)}
    if opts.assign:
        out = []
        for topic, parts in opts.assign.items():
            missing = sorted(set(parts) - set(found.get(topic, ())))
            if missing:
                raise ConfigError(f"option assign names {topic} partitions {missing}, "
                                  f"which do not exist")
            out += [(topic, p) for p in parts]
        return sorted(out)
    if opts.subscribe:
        absent = [t for t in opts.subscribe if t not in found]
        if absent:
            raise ConfigError(f"option subscribe names topics that do not exist: {', '.join(absent)}")
    return sorted((t, p) for t, parts in found.items() for p in parts)


def watermarks(admin, consumer, tps: list[tuple[str, int]], timeout_s: float
               ) -> dict[tuple[str, int], tuple[int, int]]:
    """(earliest, true end) of each partition; the end from the fetch high watermark."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    if not tps:
        return {}

    def listed(spec) -> dict[tuple[str, int], int]:
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                     request_timeout=timeout_s)
        try:
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        except KafkaException as exc:
            raise BrokerUnavailableError(f"ListOffsets failed: {exc}") from exc

    low = listed(OffsetSpec.earliest())
    latest = listed(OffsetSpec.latest())
    consumer.assign([TopicPartition(t, p, latest[(t, p)]) for t, p in tps])
    end: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout_s
    while len(end) < len(tps):
        if time.monotonic() > deadline:
            waiting = sorted(set(tps) - set(end))
            raise BrokerUnavailableError(
                f"no end-of-partition from the broker within {timeout_s:g}s for {waiting[:5]}")
        for m in consumer.consume(10_000, 0.05):
            err = m.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                end[(m.topic(), m.partition())] = m.offset()
    return {tp: (low[tp], max(end[tp], latest[tp])) for tp in tps}


def plan(opts: ReadOptions) -> list[OffsetRange]:
    """The offset ranges to read, one per selected partition (empty ones included)."""
    timeout_s = min(opts.poll_timeout_ms / 1000, 60.0)
    consumer, admin = _clients(opts)
    try:
        tps = discover(opts, consumer, timeout_s)
        check_named_partitions(opts, tps)
        marks = watermarks(admin, consumer, tps, timeout_s)
    finally:
        consumer.close()
    return [resolve(opts, tp, *marks[tp]) for tp in tps]


def check_named_partitions(opts: ReadOptions, tps: list[tuple[str, int]]) -> None:
    """Refuse JSON offsets for partitions the read does not cover (as the official source
    does): a typo'd topic or partition would otherwise be ignored without a word."""
    read = set(tps)
    for name, spec in (("startingOffsets", opts.starting), ("endingOffsets", opts.ending)):
        if isinstance(spec, dict):
            extra = sorted(set(spec) - read)
            if extra:
                raise ConfigError(
                    f"option {name} names partitions the read does not cover: "
                    f"{', '.join(f'{t}/{p}' for t, p in extra)}; name only the partitions of "
                    "subscribe/subscribePattern/assign")


def resolve(opts: ReadOptions, tp: tuple[str, int], low: int, high: int) -> OffsetRange:
    """Apply startingOffsets/endingOffsets to one partition whose log holds ``[low, high)``."""
    topic, partition = tp
    start = _pick(opts.starting, tp, "startingOffsets", low, high)
    end = _pick(opts.ending, tp, "endingOffsets", low, high)
    where = f"{topic}/{partition}"
    if start < low:
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{where}: startingOffsets {start} is below the earliest offset {low} (deleted by "
                f"retention); set failOnDataLoss=false to read from {low}")
        start = low
    if end > high:
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{where}: endingOffsets {end} is past the end {high}; "
                f"set failOnDataLoss=false to stop at {high}")
        end = high
    if start > end:
        if opts.fail_on_data_loss or start <= high:
            raise ConfigError(f"{where}: startingOffsets {start} is after endingOffsets {end}")
        start = end
    return OffsetRange(topic, partition, start, end)


def _pick(spec, tp: tuple[str, int], name: str, low: int, high: int) -> int:
    if spec == "earliest":
        return low
    if spec == "latest":
        return high
    if tp not in spec:
        # The special offset this option takes (an audit: both were offered, and the other
        # one is refused in a batch read).
        special = "-1 latest" if name == "endingOffsets" else "-2 earliest"
        raise ConfigError(f"option {name} has no offset for {tp[0]}/{tp[1]}: give every "
                          f"partition read (an offset, or {special})")
    off = spec[tp]
    return low if off == EARLIEST else high if off == LATEST else off


def split(ranges: list[OffsetRange], min_partitions: int | None = None,
          max_records: int | None = None) -> list[OffsetRange]:
    """Split ranges into contiguous pieces: none above ``max_records``, at least
    ``min_partitions`` pieces when there are enough offsets. Empty ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    counts = [1 if max_records is None else -(-r.size // max_records) for r in ranges]
    if min_partitions is not None and sum(counts) < min_partitions:
        # Give the next piece to the range whose pieces are biggest, until there are enough.
        heap = [(-r.size / k, i) for i, (r, k) in enumerate(zip(ranges, counts)) if r.size > k]
        heapq.heapify(heap)
        total = sum(counts)
        while heap and total < min_partitions:
            _, i = heapq.heappop(heap)
            counts[i] += 1
            total += 1
            if ranges[i].size > counts[i]:
                heapq.heappush(heap, (-ranges[i].size / counts[i], i))
    out = []
    for r, k in zip(ranges, counts):
        bounds = [r.start + (r.size * j) // k for j in range(k + 1)]
        out += [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:])]
    return out
