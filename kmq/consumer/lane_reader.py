"""One lane of a shared consumer: its reader, the delivery being assembled, what it read.

A lane (kmq.protocol.lane_layout) carries delivery headers and copies for every consumer
that picked it; this reader keeps the records keyed with its consumer's id and hands them
back as they complete, in lane order: a delivery with its copies, a delivery by reference
(its records are read from the queue topic by kmq.consumer.reference_reader), or the
dispatcher's FAREWELL. It counts the bytes it fetched for its consumer and for others, so
the consumer can leave a lane others fill (kmq.consumer.lane_choice).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, TopicPartition

from kmq.consumer.lane_age import LaneAge
from kmq.kafka import profiles
from kmq.kafka.batch_skips import BatchSkips, unreadable_at
from kmq.kafka.patient_reader import PatientReader
from kmq.protocol import deliveries as D
from kmq.protocol.lane_layout import LaneLayout
from kmq.settings import Settings

log = logging.getLogger("kmq.consumer")

PROBE_QUIET_S = 1.0  # a probe that brought nothing for this long is at the lane's end


@dataclass(slots=True)
class Got:
    """A delivery read from the lane: ``copies`` are its records (None: by reference)."""

    delivery: D.Delivery
    copies: list | None
    age_s: float = 0.0  # how long it waited before its header was read (kmq.consumer.lane_age)


class LaneRecords:
    """One consumer's records among a lane's, assembled into deliveries (pure: records in)."""

    def __init__(self, consumer_id: str, queue: str, lane: int) -> None:
        self.lane = lane
        self._queue = queue
        self._key = consumer_id.encode()
        self._header_key = D.header_key(consumer_id)
        self._pending: D.Delivery | None = None  # a header whose copies are still arriving
        self._pending_age_s = 0.0
        self._copies: list = []
        self._age = LaneAge()
        self.own_bytes = 0  # key + value bytes read: this consumer's records ...
        self.other_bytes = 0  # ... and every other consumer's
        self.fatal: Any = None  # a fatal KafkaError read from the lane
        self.malformed = 0  # records keyed as our delivery headers that are not one (anyone may write a lane)
        self.unreadable: int | None = None  # first offset of a batch librdkafka could not read (last read)

    def assembling(self) -> bool:
        """Whether a delivery's copies are still on their way."""
        return self._pending is not None

    def take(self, records: list, wall_ms: int | None = None) -> list[Got | D.Farewell]:
        """What ``records`` (in lane order, read at ``wall_ms``: our wall clock; None: the
        deliveries' ages are not measured) complete, in lane order."""
        out: list[Got | D.Farewell] = []
        key, header_key = self._key, self._header_key
        own = other = 0
        for rec in records:
            k = rec.key()
            if k == key:
                own += len(k) + len(rec.value() or b"")
                if self._pending is not None:
                    self._copies.append(rec)
                    if len(self._copies) == self._pending.count:
                        out.append(self._complete())
            elif k == header_key:
                value = rec.value()
                own += len(k) + len(value or b"")
                try:
                    d = D.decode(value)
                except D.DeliveryDecodeError as exc:  # counted, and a delivery being assembled goes on
                    self.malformed += 1
                    log.warning("queue %s: lane %d offset %d: %s", self._queue, self.lane, rec.offset(), exc)
                    continue
                if not isinstance(d, D.Farewell) and d.range.queue != self._queue:
                    self.malformed += 1  # ours are all of one queue: forged, the delivery goes on
                    continue
                if self._pending is not None:  # copies lost on the way: hold what came
                    out.append(self._complete())
                if isinstance(d, D.Farewell):
                    out.append(d)
                    continue
                age_s = 0.0 if wall_ms is None else self._age.age_s(wall_ms, _stamp_ms(rec))
                if d.kind == D.REFERENCE:
                    out.append(Got(d, None, age_s))
                else:
                    self._pending, self._pending_age_s, self._copies = d, age_s, []
            elif rec.error() is not None:
                err = rec.error()
                if err.fatal():
                    self.fatal = err
                elif unreadable_at(rec) is not None:
                    self.unreadable = rec.offset()
                elif err.code() != KafkaError._PARTITION_EOF:
                    log.warning("queue %s: lane %d error: %s", self._queue, self.lane, err)
            else:
                other += len(k or b"") + len(rec.value() or b"")
        self.own_bytes += own
        self.other_bytes += other
        return out

    def _complete(self) -> Got:
        got = Got(self._pending, self._copies, self._pending_age_s)
        self._pending, self._copies = None, []
        return got


class LaneReader(LaneRecords):
    """Reads one lane from its end as of now, keeping one consumer's records."""

    def __init__(self, settings: Settings, group_id: str, config: dict[str, Any] | None,
                 layout: LaneLayout, lane: int, consumer_id: str, queue: str) -> None:
        super().__init__(consumer_id, queue, lane)
        self._kc = PatientReader({
            **profiles.reader_config(settings, group_id, fetch_wait_ms=profiles.lane_fetch_wait_ms(settings),
                                     eof=False),
            **(config or {}),
        }, min_records=1)  # paced by user code
        topic, partition = layout.topic(lane), layout.partition(lane)
        # From the lane's end: nothing before it can be ours (our id is new, or we asked for
        # nothing on this lane yet). ListOffsets may undercount (docs/embedded-broker.md): then a few older
        # records are read and skipped.
        _, high = self._kc.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        self._kc.assign([TopicPartition(topic, partition, max(0, high))])
        self._tp = (topic, partition)
        self.skips = BatchSkips(f"queue {queue}: lane {lane}")  # batches of the lane nobody can read
        self._probed_at = 0.0  # when the reader last sought (monotonic s)

    @property
    def kc(self) -> PatientReader:
        return self._kc

    def ends(self, layout: LaneLayout, lanes: list[int]) -> dict[int, int]:
        """Where other lanes end now (lane -> offset; one that does not answer is left out)."""
        out = {}
        for lane in lanes:
            try:
                _, high = self._kc.get_watermark_offsets(TopicPartition(layout.topic(lane), layout.partition(lane)),
                                                         timeout=5, cached=False)
            except KafkaException as exc:
                log.debug("queue %s: end of lane %d: %s", self._queue, lane, exc)
                continue
            out[lane] = high
        return out

    def read(self, timeout_s: float) -> list[Got | D.Farewell]:
        """What came on the lane within ``timeout_s``, complete, in lane order."""
        first = self._kc.poll(timeout_s)
        p = self._tp[1]
        if first is None:
            if self.skips.searching(p) and time.monotonic() - self._probed_at >= PROBE_QUIET_S:
                # Nothing at the probe: it is at the lane's end, past the batch (a batch it
                # fell inside comes back at the first fetch). Waiting for the next record
                # instead, the search waited for the tracker's redelivery of the delivery
                # behind the batch, a visibility timeout later (measured: 30 s).
                self._seek(self.skips.step(p, None, True))
            return []
        records = [first] + self._kc.consume(10_000, 0)
        if self.skips.searching(p):  # what a probe brought: read again once the batch is skipped
            failed = next((o for o in map(unreadable_at, records) if o is not None), None)
            self._seek(self.skips.step(p, failed, any(r.error() is None for r in records)))
            return []
        self.unreadable = None
        got = self.take(records, int(time.time() * 1000))
        if self.unreadable is not None:  # fetched again forever: skipped whole (kmq.kafka.batch_skips)
            self._seek(self.skips.step(p, self.unreadable, False, "a batch that cannot be read"))
        return got

    def _seek(self, offset: int | None) -> None:
        if offset is not None:
            self._kc.seek(TopicPartition(*self._tp, offset))
            self._probed_at = time.monotonic()

    def close(self) -> None:
        self._kc.close()


def _stamp_ms(rec: Any) -> int | None:
    """A record's timestamp (ms), None when it has none."""
    kind, ms = rec.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE else ms
