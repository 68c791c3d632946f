"""Two settings of Faust's worker consumer that faust-streaming 0.15.3 hard-codes.

- ``fetch_max_wait_ms`` is fixed at 1500 ms. The embedded broker answers a
  fetch only when that wait is over (docs/embedded-broker.md), so a TICK would sit up to
  1.5 s before the markers agent saw it; we set it from
  ``KMQ_TRACKER_FETCH_WAIT_MS``. On Apache Kafka a fetch returns as soon as
  records arrive, so the value only bounds idle polling.
- ``isolation_level`` is read_committed only under Faust's exactly_once. kmq
  consumers may write START markers in transactions (with their offset
  commit): the tracker must never act on an aborted one.

Both are private attributes of aiokafka's consumer, read when it starts.

And table recovery: Faust reads a changelog up to ListOffsets' end, which
the embedded broker undercounts for multi-record batches (docs/embedded-broker.md:
39,994 of 40,000 keys restored). ``highwaters`` is made to answer the true
end (``kmq.kafka.offsets``), so recovery is exact with normal changelog batching.

And unreadable batches: a markers record batch aiokafka cannot read (a codec it
has no library for or does not know, a payload that does not decompress) raised
out of the worker's fetch, which crash-looped it; such batches are skipped and
counted (``app.unreadable``).

And heartbeats: aiokafka keeps no record of when its group membership was last
confirmed; the dispatcher of shared queues needs it (``app.membership``), so each
heartbeat answered with no error is noted there.

And changelog records Faust fetched and dropped (a standby replica lost its first
fetch so): fetched again; and those handed on are no longer thrown away by a flow resume
before recovery took them (``app.changelog_refetch``).

And table partitions coming back to this worker: Faust resumes each from its
RocksDB, however old; one last written longer ago than the changelog keeps
tombstones is dropped first (``app.data_dir``), so Faust restores it.

And the fetch wait grows while fetches come back empty though records wait past
them (``app.fetch_wait``: the embedded broker on partitions of many small batches).

And each fetched record is handed to its stream without mode's four tasks when the
stream's buffer has room (``app.drain_fast_path``).

This module is the one place that reaches into Faust's internals.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from app import changelog_refetch, data_dir, drain_fast_path, fetch_wait, membership
from app.unreadable import unreadable_batches
from kmq.kafka.offsets import true_end_offsets
from kmq.settings import Settings

RECOVERY_END_TIMEOUT_S = 300.0


def apply(settings: Settings) -> None:
    """Patch Faust's worker-consumer factory once per process."""
    from faust.transport.drivers import aiokafka as driver

    thread_cls = driver.AIOKafkaConsumerThread
    if getattr(thread_cls, "_kmq_tuned", False):
        return
    original = thread_cls._create_worker_consumer

    def _create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = settings.effective_tracker_fetch_wait_ms
        consumer._isolation_level = "read_committed"
        return consumer

    original_highwaters = thread_cls._highwaters

    async def _highwaters(self: Any, partitions: list) -> Any:
        ends = dict(await original_highwaters(self, partitions))
        loop = asyncio.get_running_loop()
        by_topic: dict[str, list] = {}
        for tp in ends:
            by_topic.setdefault(tp.topic, []).append(tp)
        for topic, tps in by_topic.items():
            # A long timeout: a recovery that gives up crashes the worker, and
            # a big changelog on a loaded broker took over 30 s to answer
            # (bench/tracker_scale, 100k entries).
            true = await loop.run_in_executor(
                None, true_end_offsets, settings, topic, [tp.partition for tp in tps],
                RECOVERY_END_TIMEOUT_S)
            for tp in tps:
                ends[tp] = max(ends[tp] or 0, true[tp.partition])
        return ends

    thread_cls._create_worker_consumer = _create_worker_consumer
    thread_cls._highwaters = _highwaters
    thread_cls._kmq_tuned = True
    _note_heartbeats()
    _rebuild_stale_partitions()
    skip_unreadable_batches(settings.markers_topic)
    changelog_refetch.install()
    fetch_wait.install()
    drain_fast_path.install()


class _LastBatch:
    """aiokafka's MemoryRecords, remembering the batch it handed out last."""

    def __init__(self, records: Any) -> None:
        self._records = records
        self.last: Any = None

    def has_next(self) -> bool:
        return self._records.has_next()

    def next_batch(self) -> Any:
        self.last = None  # a batch that does not even frame is not skipped: its end is unknown
        self.last = self._records.next_batch()
        return self.last


def skip_unreadable_batches(topic: str) -> None:
    """Skip and count (``app.unreadable``) batches of ``topic`` aiokafka cannot read."""
    from aiokafka.consumer.fetcher import PartitionRecords

    topics = PartitionRecords.__dict__.get("_kmq_skip_topics")
    if topics is not None:
        topics.add(topic)
        return
    topics = PartitionRecords._kmq_skip_topics = {topic}
    original = PartitionRecords._kmq_unpack_records = PartitionRecords._unpack_records  # (kept: test_dependencies)

    def _unpack_records(self: Any) -> Any:
        if self._tp.topic not in topics:
            yield from original(self)
            return
        records = self._records = _LastBatch(self._records)
        while True:
            try:
                yield from original(self)  # goes on from the next batch after a skip
                return
            except Exception as exc:
                batch = records.last
                if batch is None:
                    raise
                if not unreadable_batches().should_skip(self._tp.topic, self._tp.partition,
                                                        batch.base_offset, batch.next_offset, exc):
                    return  # the position stays before the batch: it is fetched again
                self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                records.last = None

    PartitionRecords._unpack_records = _unpack_records


def _note_heartbeats() -> None:
    """Note each heartbeat the coordinator answered with no error (app.membership)."""
    from aiokafka.consumer.group_coordinator import GroupCoordinator
    from aiokafka.protocol.group import HeartbeatRequest

    original_send = GroupCoordinator._send_req

    async def _send_req(self: Any, request: Any) -> Any:
        sent_at = time.monotonic()
        resp = await original_send(self, request)
        # Only "no error": "rebalance in progress" is answered while the member may be
        # on its way out (it has the rebalance timeout to rejoin, app/membership.py).
        if isinstance(request, HeartbeatRequest) and resp.error_code == 0:
            membership.of_group(self.group_id).heartbeat_ok(
                sent_at, self._session_timeout_ms, self._rebalance_timeout_ms)
        return resp

    GroupCoordinator._send_req = _send_req


def _rebuild_stale_partitions() -> None:
    """Check a table partition's age each time Faust opens its RocksDB (``app.data_dir``).

    The changelog's tombstone retention is the app's ``tombstones_kept_ms``, known once the
    start-up checks ran (before any table opens); until then nothing is dropped.
    """
    from faust.stores.rocksdb import Store

    original_open = Store._open_for_partition

    def _open_for_partition(self: Any, partition: int) -> Any:
        kept_ms = getattr(self.app, "tombstones_kept_ms", None)
        if kept_ms is not None:
            data_dir.rebuild_partition_if_stale(self.partition_path(partition), time.time(), kept_ms)
        return original_open(self, partition)

    Store._open_for_partition = _open_for_partition
