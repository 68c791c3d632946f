"""The tracker's queue scanner (depth from the queue topic) against a real broker."""

from __future__ import annotations

import kmq
from web.queue_scan import QueueScanner
from kmq.protocol.placement import queue_partitions
from kmq.queue_config import QueueConfig
from tests.conftest import wait_for


def test_a_purge_point_past_the_end_of_the_log_does_not_stall_the_scan(make_settings):
    # Given: a queue with 5 records whose purge point is inside its partition,
    # and one on an empty partition whose purge point is past the end (as
    # after the topic was recreated).
    s = make_settings()
    live = "scan-live"
    (p_live,) = queue_partitions(live, s.queue_partitions)
    stale = next(q for q in (f"scan-stale-{i}" for i in range(100))
                 if queue_partitions(q, s.queue_partitions) != (p_live,))
    (p_stale,) = queue_partitions(stale, s.queue_partitions)
    with kmq.Client(settings=s) as client:
        client.send_batch(live, [b"l"] * 5)
    configs = {stale: QueueConfig(purged_before={p_stale: 1_000_000}),
               live: QueueConfig(purged_before={p_live: _offset_of_third(s, live, p_live)})}
    scanner = QueueScanner(s, owned=lambda: set(range(s.markers_partitions)),
                           known_queues=lambda: set(configs), started_upto=lambda q, p: None,
                           config=lambda q: configs.get(q, QueueConfig()))
    # When: one pass runs (it raised a timeout after 60 s before the fix).
    scanner._pass()
    # Then: the stale queue counts nothing, the live one what is above its purge point.
    assert scanner.result.depth[stale].records == 0
    assert scanner.result.depth[live].records == 3


def _offset_of_third(settings, queue: str, partition: int) -> int:
    """The offset of the queue's third record on its partition (other queues may share it)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**settings.client_config(), "group.id": "scan-test", "enable.partition.eof": True,
                  "fetch.wait.max.ms": 10})
    try:
        c.assign([TopicPartition(settings.queue_topic, partition, 0)])
        mine: list[int] = []

        def third():
            mine.extend(m.offset() for m in c.consume(100, 0.5)
                        if m.error() is None and m.key() == queue.encode())
            return len(mine) >= 3
        wait_for(third, 30, interval_s=0, what=f"three records of {queue}")
        return mine[2]
    finally:
        c.close()


def test_a_drained_queue_has_no_depth_after_its_tracker_restarts(make_settings, artifacts):
    # Settled ranges leave the table; what says where the queue's consumers got to after a
    # restart is the table's cursor (a drained shared queue showed its whole log as depth:
    # the scan fell back to a consumer group a shared queue does not have, then the log start).
    from kmq.dev.devstack import TrackerProcess
    from tests.integration.views import all_acked, queue_detail

    s = make_settings(stats_refresh_ms=200, dispatch="shared")
    queue = "scan-after-restart"

    def no_depth(t) -> None:
        """Depth 0 in a scan pass (two passes at least: before any, depth is 0 for nothing
        scanned). The gauges are rebuilt on the partition's first event after assignment,
        so a pass before it may count the log; 0 must come within the deadline."""
        def scanned_empty() -> bool:
            d = queue_detail(t, queue)  # a view: the scanner runs while somebody looks
            return d is not None and t.health()["scanner"]["passes"] >= 2 and d["depth"] == 0
        wait_for(scanned_empty, 60, interval_s=0.2, what=f"depth 0 for {queue} in a scan")

    t = TrackerProcess(s, artifacts / "tracker-scan-restart-1.log").start(timeout_s=120)
    try:
        with kmq.Client(settings=s) as client:
            client.send_batch(queue, [b"m"] * 30)
            client.flush()
            with client.consumer(queue) as c:
                got: list = []
                wait_for(lambda: got.extend(c.receive_batch(30 - len(got), timeout_s=0.2)) or len(got) >= 30,
                         60, what="30 messages")
                for m in got:
                    m.ack()
        wait_for(lambda: all_acked(t, queue, 30), 60, what="the tracker counting 30 acks")
        no_depth(t)
    finally:
        t.stop()
    t = TrackerProcess(s, artifacts / "tracker-scan-restart-2.log").start(timeout_s=120)
    try:
        no_depth(t)  # was 30 for good: the whole log
    finally:
        t.stop()
