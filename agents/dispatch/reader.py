"""The dispatcher's reader of the queue topic: each queue partition read once for every
shared queue that wants records from it (agents/dispatch/dispatcher.py, step 3).

One unsubscribed librdkafka consumer, in the dispatcher's thread. Per queue partition a
:class:`~kmq.protocol.lookahead.Lookahead` keeps what was read and not yet taken, per
queue, so a small credit does not seek back and a neighbour's backlog does not hold a
small queue up; a partition nobody wanted for a while is let go.
What each queue takes of the records is decided by ``kmq.protocol.dispatch.select``.

A batch librdkafka cannot read (anyone may write the queue topic: a payload that does not
decompress, a zstd bomb) comes back as the same error at its first offset at every fetch,
and the partition went no further for any queue on it: it is skipped whole, its end found
by seeking (``kmq.protocol.batch_end``), and counted (``unreadable-batches``,
``unreadable-offsets``).
"""

from __future__ import annotations

import logging
import time
from itertools import compress, repeat
from operator import eq, not_

from confluent_kafka import KafkaError, TopicPartition

from kmq.kafka import profiles
from kmq.kafka.batch_skips import REMEMBERED, UNREADABLE, BatchSkips
from kmq.kafka.patient_reader import PatientReader
from kmq.protocol.chunk import Chunk
from kmq.protocol.dispatch import Want, select_own
from kmq.protocol.lookahead import Lookahead
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.dispatcher")

CHUNK_RECORDS = 20_000    # records read per round (all partitions), at most
IDLE_UNASSIGN_S = 2.0     # a queue partition nobody wanted this long is no longer read
NO_END = 1 << 62          # a partition whose end was not seen yet


class QueueReader:
    """Reads the queue partitions shared queues want, from the lowest wanting cursor."""

    def __init__(self, settings: Settings, trace: bool = False, stats: dict | None = None) -> None:
        self.settings = settings
        self.stats = stats if stats is not None else {}  # the dispatcher's counters
        self._trace = trace
        self._consumer = PatientReader({
            **profiles.reader_config(settings, f"{settings.app_id}-dispatcher",
                                     fetch_wait_ms=profiles.dispatcher_fetch_wait_ms(settings), eof=True),
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 5,
            "queued.max.messages.kbytes": 16 * 1024,
        })
        self.ahead: dict[int, Lookahead] = {}  # queue partition -> records read, not yet taken
        self._idle_since: dict[int, float] = {}  # assigned queue partitions without demand
        self._assigned: set[int] = set()
        self._ends: dict[int, int] = {}  # queue partition -> its end, as last read (EOF)
        self._unreadable: dict[int, int] = {}  # partition -> where a batch failed, in this read
        self._eofs: dict[int, int] = {}  # partition -> its end, if this read reached it
        self._last_error: dict[int, str] = {}  # partition -> that batch's error, as librdkafka said it
        # Batches it cannot read: the search for their ends, those skipped (not searched again)
        self._skips = BatchSkips("queue reader", remember=REMEMBERED)

    def close(self) -> None:
        self._consumer.close()

    def read(self, wants: dict[int, dict[bytes, Want]], ordered: set[str], lanes_waiting: bool,
             kept: dict[int, set[bytes]] | None = None) -> int:
        """Fill each Want from what was read ahead, then from one fetch; returns records read.

        ``kept``: per partition, the queues whose records are kept read ahead (those with
        consumers; the wanting ones are added). ``ordered`` names the queues with
        ordering="group": one read to the partition's end waits for acks, not records, so
        it does not make the fetch wait. ``lanes_waiting``: acknowledged ACQUIREs wait for
        their lanes; wait briefly.
        """
        hungry = block = False
        for p, ws in wants.items():  # first from what was read ahead
            ahead = self.ahead.setdefault(p, Lookahead())
            wanting, seek_to = ahead.serve(ws)
            if not wanting:
                continue  # served from what was held, or only ordered queues with a full window
            if seek_to is not None:
                self._skips.forget(p)  # read from elsewhere: a batch still unreadable fails again
                self._point(p, seek_to)
            hungry = True
            block |= any(w.demand > 0 and (w.queue not in ordered or w.cursor < self._ends.get(p, NO_END))
                         for w in ws.values())
        if not hungry:
            return 0
        # Heads of ordered groups freed by an ack go out now, not after a fetch wait; an
        # ACQUIRE's lanes go out when it is acknowledged, not after one either.
        wait_s = 0.0 if not block else 0.005 if lanes_waiting else 0.05
        # What is there now, else the first record to come: librdkafka's batch consume waits
        # the whole timeout for a full chunk (a backlog's tail waited 50 ms a round).
        records = self._consumer.consume(CHUNK_RECORDS, 0)
        if not records and wait_s > 0:
            records = self._consumer.consume(1, wait_s)
            if records:
                records += self._consumer.consume(CHUNK_RECORDS - 1, 0)
        if self._trace:
            log.info("TRACE read %d %s", len(records), {p: (a.position, {k: (q.start, q.end, len(q.records))
                                                                          for k, q in a.queues.items()})
                                                         for p, a in self.ahead.items()})
        self._unreadable, self._eofs = {}, {}
        by_part = self._by_partition(records)
        probed = {p: by_part.pop(p, None) for p in list(self.ahead) if self._skips.searching(p)}  # read again after
        for p, recs in by_part.items():
            ahead = self.ahead.get(p)
            if ahead is None or ahead.position is None or recs[0].offset() < ahead.position:
                continue  # fetched before a seek
            # read ahead, also for the queues without demand this moment
            ahead.take(recs, (kept or {}).get(p, set()), wants.get(p, {}))
        for p in set(self._unreadable) | set(probed):  # after the records before the batch
            self._skip_unreadable(p, probed.get(p), (kept or {}).get(p, set()), wants.get(p, {}))
        return len(records)

    def _skip_unreadable(self, p: int, recs: list | None, kept: set[bytes], wants: dict[bytes, Want]) -> None:
        """Partition ``p`` met a batch it cannot read, or searches for its end: one step.
        Records read meanwhile (``recs``) only say the probe was past it; read again after."""
        ahead = self.ahead.get(p)
        if ahead is None or ahead.position is None:
            self._skips.forget(p)
            return
        eof = self._eofs.get(p)  # an end before the probe: it is past too
        to = self._skips.step(p, self._unreadable.get(p), bool(recs) or eof is not None, self._last_error.get(p),
                              position=ahead.position, end=self._ends.get(p), next_batch=eof)
        if to is None:
            return
        if self._skips.searching(p):
            self._point(p, to)
            return
        if self._skips.batches:
            self.stats["unreadable-batches"] = self._skips.batches
            self.stats["unreadable-offsets"] = self._skips.offsets
        self._past_unreadable(p, ahead, to, kept, wants)

    def _past_unreadable(self, p: int, ahead: Lookahead, end: int, kept: set[bytes],
                         wants: dict[bytes, Want]) -> None:
        """Nothing of any queue lies below ``end``: the cursors move past it, the reader reads on there."""
        ahead.add(Chunk([]), kept | set(wants), end)
        for w in wants.values():
            select_own(w, [], [], ahead.position)
        self._point(p, end)

    def _by_partition(self, records: list) -> dict[int, list]:
        """The records read, per partition, in offset order; the partitions' ends noted.

        Each question is asked of all records at once (C-level ``map``)."""
        if not records:
            return {}
        t = type(records[0])
        errors = list(map(t.error, records))
        if any(errors):  # ends of partitions among them (a record's end is noted below)
            for rec in compress(records, errors):
                code = rec.error().code()
                if code == KafkaError._PARTITION_EOF:
                    self._ends[rec.partition()] = self._eofs[rec.partition()] = rec.offset()
                elif code in UNREADABLE and rec.offset() >= 0:
                    self._unreadable[rec.partition()] = rec.offset()
                    self._last_error[rec.partition()] = str(rec.error())
            records = list(compress(records, map(not_, errors)))
            if not records:
                return {}
        parts = list(map(t.partition, records))
        if parts.count(parts[0]) == len(parts):
            by_part = {parts[0]: records}
        else:
            by_part = {p: list(compress(records, map(eq, parts, repeat(p)))) for p in set(parts)}
        for p, recs in by_part.items():
            last = recs[-1].offset()
            if last >= self._ends.get(p, 0):
                self._ends[p] = last + 1
        return by_part

    def trim(self, p: int, ws: dict[bytes, Want]) -> None:
        """What each queue handed out (below its cursor) is no longer kept."""
        ahead = self.ahead.get(p)
        if ahead is not None:
            for key, w in ws.items():
                ahead.trim(key, w.cursor)

    def end_offset(self, p: int, default: int) -> int:
        """Partition ``p``'s end now (a broker round trip), or ``default`` if not known
        (a broker blip: what is known is read at least)."""
        ends = self.ends_of(self.settings.queue_topic, [p], timeout_s=5)
        return default if ends is None else max(ends[p], default)

    def read_to(self) -> dict[int, int]:
        """Queue partition -> the offset below which every record was in the log when read
        (the highest read + 1, or the end the broker said)."""
        return dict(self._ends)

    def ends_of(self, topic: str, partitions: list[int], timeout_s: float = 2) -> dict[int, int] | None:
        """Each partition's end as ListOffsets says it now (a broker round trip each), or
        None if the broker does not answer."""
        try:
            return {p: max(0, self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s,
                                                                   cached=False)[1]) for p in partitions}
        except Exception as exc:  # KafkaException: a broker blip; asked again next round
            log.warning("%s: ends not known (%s)", topic, exc)
            return None

    def offset_at(self, p: int, wall_ms: int) -> int:
        """Partition ``p``'s first offset stamped at or after ``wall_ms`` (``NO_END`` if
        none is); 0 if the broker does not say (the embedded one always says 0)."""
        try:
            (tp,) = self._consumer.offsets_for_times(
                [TopicPartition(self.settings.queue_topic, p, max(0, wall_ms))], timeout=5)
        except Exception as exc:  # KafkaException: a broker blip; read back as far as allowed
            log.warning("queue partition %d: no offset for time %d (%s)", p, wall_ms, exc)
            return 0
        if tp.error is not None:
            return 0
        return NO_END if tp.offset < 0 else tp.offset

    def release_idle(self, wants: dict[int, dict[bytes, Want]]) -> None:
        """Partitions nobody wanted for a while are let go (no prefetching for nothing).

        Unassigned rather than paused: librdkafka resumed a paused partition's fetching
        only after about a second here (measured: 20k msgs/s against 95k without pausing),
        and not at the first moment without demand, which comes between every two credits.
        """
        now = time.monotonic()
        for p in wants:
            self._idle_since.pop(p, None)
        idle = []
        for p in self._assigned:
            if p not in wants and now - self._idle_since.setdefault(p, now) >= IDLE_UNASSIGN_S:
                idle.append(p)
        if idle:
            self._consumer.incremental_unassign([TopicPartition(self.settings.queue_topic, p) for p in idle])
            self._assigned.difference_update(idle)
            for p in idle:
                self._idle_since.pop(p, None)
                self._skips.forget(p)
                ahead = self.ahead.get(p)
                if ahead is not None:
                    ahead.forget_position()

    def _point(self, p: int, offset: int) -> None:
        """Make the consumer return partition ``p`` from ``offset`` on."""
        tp = TopicPartition(self.settings.queue_topic, p, offset)
        if p not in self._assigned:
            self._consumer.incremental_assign([tp])
            self._assigned.add(p)
        else:
            self._consumer.seek(tp)
