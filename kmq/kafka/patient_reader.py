"""A librdkafka reader whose fetch wait grows while fetches come back empty in vain.

``kmq.kafka.fetch_wait`` says when (and why: the embedded broker on partitions of
many small batches). librdkafka reads ``fetch.wait.max.ms`` only when a consumer is
created, so a raise replaces the consumer with one that waits longer, assigned
where the old one stood: what the old one had fetched and not yet handed out is
fetched again, nothing is skipped.

A partition counts as behind at a look when the end reported a look before lies past
the position: what was there then was not read since. A reader whose caller reads as
fast as it can is raised when fewer than ``min_records`` (and 1 MiB) came in ``stall_s``
while behind (a crawl, as ``FetchWait`` says); one paced by its caller (a few records
at a time, as user code asks) passes ``min_records=1``: raised only when nothing came.

For readers that assign their partitions and never join a group or commit
(``profiles.reader_config``); every other call goes to the current consumer.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition

from kmq.kafka.fetch_wait import MIN_RECORDS, FetchWait

log = logging.getLogger("kmq.kafka.fetch_wait")

LOOK_EVERY_S = 0.1  # how often the positions are compared with the partitions' ends

_raised: dict[str, int] = {}  # reader name -> the fetch wait it was raised to (this process)


def raised_fetch_waits() -> dict[str, int]:
    """This process's readers whose fetch wait was raised, and to what (ms): /kmq/health."""
    return dict(_raised)


def note_raised(name: str, wait_ms: int) -> None:
    _raised[name] = wait_ms


class PatientReader:
    """A ``confluent_kafka.Consumer`` for assigned partitions, with a rising fetch wait."""

    def __init__(self, config: dict[str, Any], min_records: int = MIN_RECORDS) -> None:
        self._config = dict(config)
        self.name = str(config.get("group.id", "reader"))
        self.fetch_wait = FetchWait.starting_at(int(self._config["fetch.wait.max.ms"]), min_records)
        self._ends: dict[tuple[str, int], int] = {}  # -> end as of the last look
        self._read_bytes = 0  # values handed out, all partitions
        self._consumer = Consumer(self._config)
        self._assigned: dict[tuple[str, int], int] = {}  # -> offset assigned or sought (<0: logical)
        self._looked_at = time.monotonic()

    @property
    def fetch_wait_ms(self) -> int:
        return self.fetch_wait.wait_ms

    # -- what the wait depends on: where each partition is read from ---------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._consumer.assign(partitions)
        self._assigned = {(tp.topic, tp.partition): tp.offset for tp in partitions}
        self._forget_all()

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._consumer.incremental_assign(partitions)
        for tp in partitions:
            self._assigned[(tp.topic, tp.partition)] = tp.offset
            self._forget((tp.topic, tp.partition))

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._consumer.incremental_unassign(partitions)
        for tp in partitions:
            self._drop((tp.topic, tp.partition))

    def unassign(self) -> None:
        self._consumer.unassign()
        self._assigned.clear()
        self._forget_all()

    def seek(self, partition: TopicPartition) -> None:
        self._consumer.seek(partition)
        key = (partition.topic, partition.partition)
        self._assigned[key] = partition.offset
        self._forget(key)

    def _drop(self, key: tuple[str, int]) -> None:
        self._assigned.pop(key, None)
        self._forget(key)

    def _forget(self, key: tuple[str, int]) -> None:
        self._ends.pop(key, None)
        self.fetch_wait.forget(key)

    def _forget_all(self) -> None:
        self._ends.clear()
        self.fetch_wait.forget_all()

    # -- reading -----------------------------------------------------------------

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list:
        records = self._consumer.consume(num_messages, timeout)
        self._read_bytes += sum(map(len, records))  # a value's length (0: none, or an event)
        self._look()
        return records

    def poll(self, timeout: float = -1) -> Any:
        record = self._consumer.poll(timeout)
        if record is not None:
            self._read_bytes += len(record)
        self._look()
        return record

    def close(self) -> None:
        self._consumer.close()

    def __getattr__(self, name: str) -> Any:  # only for names this class does not have
        if name == "_consumer":  # not made (its constructor raised): no recursion
            raise AttributeError(name)
        return getattr(self._consumer, name)

    def _positions(self) -> dict[tuple[str, int], int]:
        """Each assigned partition's next offset to hand out, where known."""
        keys = list(self._assigned)
        known = self._consumer.position([TopicPartition(t, p) for t, p in keys])
        out = {}
        for key, tp in zip(keys, known):
            at = tp.offset if tp.offset >= 0 else self._assigned[key]  # nothing handed out yet
            if at >= 0:
                out[key] = at
        return out

    def _look(self) -> None:
        now = time.monotonic()
        if now - self._looked_at < LOOK_EVERY_S or not self._assigned:
            return
        self._looked_at = now
        raised = None
        for key, at in self._positions().items():
            before = self._ends.get(key, OFFSET_INVALID)
            _low, self._ends[key] = self._consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
            if self.fetch_wait.observe(now, key, behind=before > at, position=at, read_bytes=self._read_bytes):
                raised = (key, at, before)
        if raised is not None:
            (topic, partition), at, end = raised
            log.warning("%s, %s[%d]: %s", self.name, topic, partition, self.fetch_wait.why(end, at))
            note_raised(self.name, self.fetch_wait.wait_ms)
            self._replace_consumer()

    def _replace_consumer(self) -> None:
        """A consumer with the new wait, reading every partition from where the old one stood."""
        positions = self._positions()
        where = [TopicPartition(t, p, positions.get((t, p), offset)) for (t, p), offset in self._assigned.items()]
        old = self._consumer
        self._config["fetch.wait.max.ms"] = self.fetch_wait.wait_ms
        self._consumer = Consumer(self._config)
        if where:
            self._consumer.incremental_assign(where)
        old.close()
