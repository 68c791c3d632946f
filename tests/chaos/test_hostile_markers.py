"""Hostile marker records on a live tracker: each is set aside, memory stays bounded, redelivery goes on.

Issue 12: three gzip records of 1,200 full-mask STARTs of 4M offsets took a
worker from ~80 MB to 872 MB RSS; a RELEASE with delay 2**63-1 raised in the
state machine; STARTs past a partition's end turned into fake payload-expired
dead letters; unknown queue names added counters.
"""

from __future__ import annotations

import struct

import psutil
from confluent_kafka import Producer

import kmq
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition, queue_partitions
from tests.chaos.conftest import get_json
from tests.conftest import partition_mode, wait_for
from tests.integration.dlq import letters_of

ISSUE_12_STARTS = 1200
WIDE_RECORDS = 3  # records of MAX_RECORD_OFFSETS offsets past the end, each 4 widest STARTs


def raw_start(queue: str, partition: int, start: int, end: int) -> bytes:
    q = queue.encode()
    return (struct.pack(">BH", marker_codec.MarkerType.START, len(q)) + q + struct.pack(">Iqq", partition, start, end)
            + struct.pack(">II", 1000, 0))


def raw_release(r: M.RangeRef, delay_ms: int) -> bytes:
    q = r.queue.encode()
    return (struct.pack(">BH", marker_codec.MarkerType.RELEASE, len(q)) + q + struct.pack(">Iqq", r.partition, r.start, r.end)
            + struct.pack(">IB", 1, 1) + struct.pack(">qB", delay_ms, 1))


def record(bodies: list[bytes]) -> bytes:
    return struct.pack(">BH", marker_codec.VERSION, len(bodies)) + b"".join(bodies)


def test_records_beyond_the_limits_are_set_aside_memory_stays_bounded_and_redelivery_goes_on(own_tracker, queue):
    settings = own_tracker.settings
    worker = psutil.Process(own_tracker.process.pid)
    client = kmq.Client(settings=settings)
    raw = Producer({**settings.client_config(), "compression.type": "gzip", "linger.ms": 5,
                    "message.max.bytes": 10_000_000})
    try:
        partition_mode(client, queue)  # consumers' STARTs are tracked (a shared queue sets them aside)
        msg_id = client.send(queue, b"behind the hostile records")
        client.flush()
        consumer = client.consumer(queue, visibility_timeout_s=3)
        first = wait_for(lambda: consumer.receive(0.2), 30, what="the first delivery")
        rss_before = worker.memory_info().rss
        before = get_json(own_tracker.url + "/kmq/health")
        part = queue_partitions(queue, settings.queue_partitions)[0]
        mp = markers_partition(queue, settings.markers_partitions)
        bad = [record([raw_start(queue, part, (k * ISSUE_12_STARTS + i) << 22, ((k * ISSUE_12_STARTS + i + 1) << 22))
                       for i in range(ISSUE_12_STARTS)]) for k in range(3)]
        r = M.RangeRef(queue, part, 10**9, 10**9 + 8)
        bad.append(record([raw_release(r, 2**63 - 1)]))                         # struct.error before
        bad.append(marker_codec.encode([M.Tick(1)])[:3] + b"\x08\x00\x0bbad name!!!")       # a PURGE of no queue id
        L = M.MAX_RANGE_LEN
        wide = [marker_codec.encode([M.Start(M.RangeRef(queue, part, 10**9 + (4 * k + i) * L, 10**9 + (4 * k + i + 1) * L),
                                             1000, (1 << L) - 1) for i in range(4)]) for k in range(WIDE_RECORDS)]
        for value in bad + wide:
            raw.produce(settings.markers_topic, value, queue.encode(), partition=mp)
        assert raw.flush(60) == 0
        # Behind all of that on its partition, the unacked message still comes back.
        again = wait_for(lambda: consumer.receive(0.2), 120, what="the redelivery behind the hostile records")
        assert again.id == msg_id == first.id and again.delivery_count == 2
        again.ack()
        consumer.flush()
        consumer.close()
        refused = 3 * ISSUE_12_STARTS + 2
        beyond = WIDE_RECORDS * 4 * L

        def counted():
            h = get_json(own_tracker.url + "/kmq/health")
            return h if (h["malformed_markers"] - before["malformed_markers"] >= refused
                         and h["set_aside"]["beyond-end"] - before["set_aside"]["beyond-end"] >= beyond) else None
        health = wait_for(counted, 180, interval_s=0.5, what="every hostile marker counted")
        assert health["malformed_markers"] - before["malformed_markers"] == refused
        assert health["set_aside"]["beyond-end"] - before["set_aside"]["beyond-end"] == beyond
        assert health["set_aside"]["payload-expired"] == before["set_aside"]["payload-expired"]
        grown_mb = (worker.memory_info().rss - rss_before) / 2**20
        assert grown_mb < 100, f"the worker grew {grown_mb:.0f} MB"
        print(f"worker RSS grew {grown_mb:.1f} MB over {len(bad) + len(wide)} hostile records")
        # No fake dead letters for the offsets past the end.
        assert letters_of(settings, queue) == []
    finally:
        client.close()
