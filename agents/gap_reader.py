"""Reads a gap of a markers partition straight from the log (the markers agent, step 4).

The agent was handed offset ``end`` of a partition but not the offsets before it back to
the last it was handed (``kmq.protocol.gaps``): this reads ``[start, end)`` with an
unsubscribed librdkafka consumer, read_committed like the agent's own client, until it
sees a record at ``end`` or later (that record is committed: the agent holds it). Commit
markers and aborted records come back as nothing. One thread of its own: the agent
awaits the read and applies what it found before the record it holds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaError, TopicPartition

from kmq.kafka import profiles
from kmq.kafka.patient_reader import PatientReader
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.markers")

READ_BOUND_S = 60.0   # a gap not read in this long is given up on (counted, logged)
POLL_S = 0.5
LOG_APPEND_TIME = 1   # the agent's (aiokafka's) timestamp type of broker-stamped records


@dataclass(frozen=True)
class GapRecord:
    """A record read from a gap, shaped like the Faust event the agent is handed."""

    partition: int
    offset: int
    timestamp: float | None  # seconds, as Faust gives it
    timestamp_type: int      # aiokafka's: LOG_APPEND_TIME (1) when the broker stamped it
    value: bytes | None

    @property
    def message(self) -> "GapRecord":
        return self


class GapReader:
    """Reads gaps of the markers topic (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kmq-gap-reader")
        self._consumer: PatientReader | None = None

    async def read(self, partition: int, start: int, end: int) -> list[GapRecord] | None:
        """The committed records at offsets ``[start, end)``; None if the log did not answer
        within ``READ_BOUND_S`` (the gap is then given up on)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._read, partition, start, end)

    def _read(self, partition: int, start: int, end: int) -> list[GapRecord] | None:
        c = self._get_consumer()
        c.assign([TopicPartition(self.settings.markers_topic, partition, start)])
        out: list[GapRecord] = []
        deadline = time.monotonic() + READ_BOUND_S
        try:
            while time.monotonic() < deadline:
                # One record at a time: a batch consume waits its whole timeout for a full
                # batch, and a gap is mostly one commit marker before the record we hold.
                rec = c.poll(POLL_S)
                if rec is None:
                    continue
                err = rec.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        log.warning("markers partition %d: reading offsets %d..%d: %s", partition, start, end - 1, err)
                    continue
                if rec.offset() >= end:
                    return out
                if rec.offset() >= start:
                    out.append(_gap_record(rec))
            return None
        finally:
            c.unassign()

    def _get_consumer(self) -> PatientReader:
        if self._consumer is None:
            self._consumer = PatientReader({
                **profiles.reader_config(self.settings, f"{self.settings.app_id}-gap-reader",
                                         fetch_wait_ms=10, eof=True),
                "isolation.level": "read_committed",  # as the agent reads: aborted records are no gap's
                "auto.offset.reset": "earliest",  # a gap below the log's start: what is left of it
            })
        return self._consumer


def _gap_record(rec) -> GapRecord:
    ts_type, ts_ms = rec.timestamp()
    return GapRecord(rec.partition(), rec.offset(), ts_ms / 1000 if ts_ms > 0 else None,
                     LOG_APPEND_TIME if ts_type == TIMESTAMP_LOG_APPEND_TIME else 0, rec.value())
