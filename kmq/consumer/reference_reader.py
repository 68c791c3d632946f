"""A shared consumer's reader of ranges delivered by reference, from the queue topic.

Where a queue dominates a range, the dispatcher sends a consumer no copies, only the
range's name (kmq.protocol.deliveries); the consumer reads the range from the queue topic
itself. This reader keeps those ranges in delivery order, reads each one through (on from
where the last one ended, or after a seek), and hands back each range once it is complete,
or once its visibility timeout (the consumer's own, at most) passed with records missing
(gone from the log: what is missing comes back from the tracker when due; or never
written: a forged reference). Which of its records are the consumer's is
decided by the caller (kmq.consumer.referred.ours); this module only reads.

Its librdkafka consumer is made at the first reference, and unassigned when no range
came for ``IDLE_S``: left assigned at a partition's end it fetched every fetch wait, for
nothing (docs/shared-queues.md, "What idle consumers cost").
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Iterator

from confluent_kafka import TopicPartition

from kmq.consumer import referred
from kmq.kafka import profiles
from kmq.kafka.patient_reader import PatientReader
from kmq.protocol import deliveries as D
from kmq.settings import Settings

IDLE_S = 1.0  # with no range to read this long, the reader stops fetching (unassigned)


class ReferenceReader:
    """Referred ranges of one shared consumer, read from the queue topic in delivery order."""

    def __init__(self, settings: Settings, group_id: str, config: dict[str, Any] | None,
                 visibility_s: Callable[[], float] | None = None) -> None:
        self._settings = settings
        # The consumer's own visibility timeout: what it asked deliveries for. A reference
        # claiming longer was not the dispatcher's (a forged one of 12 h past the end of
        # the log held every later delivery of the consumer for 12 h: an audit).
        self._visibility_s = visibility_s
        self._group_id = group_id
        self._config = config  # the caller's librdkafka settings apply to this reader too
        self._waiting: deque[tuple[D.Delivery, float]] = deque()
        self._got: list = []  # the oldest range's records read so far
        self._at: tuple[int, int] | None = None  # (partition, next offset) the reader returns
        self._carry: list = []  # records read past a range, for the next one
        self._since = 0.0  # when reading the oldest range began (monotonic s; 0: not yet)
        self._done_at = 0.0  # when the last range was complete (monotonic s)
        self._assigned = False
        self.incomplete = 0  # ranges handed back with records missing (gone, or never written)
        self.kc: PatientReader | None = None

    def add(self, d: D.Delivery, sent_at: float) -> None:
        """A delivery by reference, in lane order, dispatched at ``sent_at`` (monotonic s)."""
        self._waiting.append((d, sent_at))

    def __bool__(self) -> bool:
        """Whether a referred range waits to be read."""
        return bool(self._waiting)

    def read(self, timeout_s: float) -> Iterator[tuple[D.Delivery, list, float]]:
        """The oldest ranges that are complete (or past their visibility timeout), each with
        its records and dispatch time, in delivery order; stops at the first still on its way."""
        while self._waiting:
            d, sent_at = self._waiting[0]
            r = d.range
            if not self._since:  # a new range: read on where the last ended, or seek
                if self._at != (r.partition, r.start):
                    self._point(r.partition, r.start)
                self._since = time.monotonic()
            # Only what the range still lacks: records read past it belong to other consumers'
            # ranges (as Python objects they would cost as much as our own, for nothing).
            lacking = r.end - (self._got[-1].offset() + 1 if self._got else r.start)
            recs = self._carry or self._reader().consume(min(10_000, max(1, lacking)), timeout_s)
            self._carry = []
            leftover = referred.in_range(recs, r, self._got)
            complete = bool(leftover) or bool(self._got and self._got[-1].offset() == r.end - 1)
            wait_s = d.timeout_ms / 1000
            if self._visibility_s is not None:
                wait_s = min(wait_s, self._visibility_s())
            if not complete and time.monotonic() - self._since <= wait_s:
                return  # the rest is still on its way
            if not complete:
                self.incomplete += 1
            got, self._got = self._got, []
            self._waiting.popleft()
            # The reader goes on after this range: the next one starts there, or it seeks.
            self._carry = leftover
            self._at = (r.partition, r.end) if complete else None
            self._since = 0.0
            self._done_at = time.monotonic()
            yield d, got, sent_at

    def rest_if_idle(self) -> None:
        """Stop fetching once no range came for ``IDLE_S`` (the next one assigns it again)."""
        if self._assigned and not self._waiting and time.monotonic() - self._done_at >= IDLE_S:
            self.kc.unassign()
            self._assigned, self._at, self._carry = False, None, []

    def _point(self, partition: int, offset: int) -> None:
        """Make the reader return ``partition`` from ``offset`` on."""
        self._reader().assign([TopicPartition(self._settings.queue_topic, partition, offset)])
        self._assigned = True
        self._at = (partition, offset)
        self._carry = []

    def _reader(self) -> PatientReader:
        if self.kc is None:
            self.kc = PatientReader({
                **profiles.reader_config(self._settings, self._group_id,
                                         fetch_wait_ms=profiles.reference_fetch_wait_ms(self._settings), eof=False),
                "isolation.level": "read_committed",
                # A referred range is read, then the reader seeks to the next: little read-ahead.
                "max.partition.fetch.bytes": D.REFERENCE_READ_AHEAD_BYTES,
                "queued.max.messages.kbytes": D.REFERENCE_READ_AHEAD_BYTES // 1024,
                **(self._config or {}),
            }, min_records=1)  # paced by user code
        return self.kc

    def close(self) -> None:
        if self.kc is not None:
            self.kc.close()
