"""Clock skew (seed 003): a consumer whose wall clock is 10 minutes ahead or behind causes
no early and no lost redelivery.

A consumer's wall clock reaches the tracker only as the timestamps librdkafka puts on
its marker records (CreateTime). So the test writes a consumer's START marker stamped
10 minutes ahead or behind, over a real record, and times the tracker's redelivery
against the true clock. (Skewing a whole consumer process does not work here: under
Debian's libfaketime, or an LD_PRELOAD shim that moves only wall-clock readings,
librdkafka's own timed waits hang or expire at once; see docs/reliability.md.)
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import kmq
from kmq.protocol import envelope
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition, queue_partitions
from tests.conftest import partition_mode, wait_for

VISIBILITY_MS = 3000
EARLY_SLACK_S = 0.05
LATE_BOUND_S = 5.0  # far below the 10-minute skew it tells apart; 2 s left a loaded machine little room
CREATE_TIME = 0  # confluent_kafka.TIMESTAMP_CREATE_TIME
TS_CREATE = 1


def read_partition(settings, topic: str, partition: int, until, timeout_s: float):
    """Records of one partition (no group) until ``until(records)`` is truthy."""
    c = Consumer({**settings.client_config(), "group.id": "skew-reader", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 20, "fetch.queue.backoff.ms": 5})
    c.assign([TopicPartition(topic, partition, 0)])
    seen = []
    try:
        def step():
            seen.extend(r for r in c.consume(100, 0.05) if r.error() is None)
            return until(seen)
        return wait_for(step, timeout_s, interval_s=0.001, what=f"records of {topic}[{partition}]")
    finally:
        c.close()


@pytest.mark.parametrize("skew_s", [600, -600])
def test_a_skewed_consumer_clock_causes_no_early_and_no_lost_redelivery(shared_settings, tracker, queue, skew_s):
    s = shared_settings
    with kmq.Client(settings=s) as client:
        partition_mode(client, queue)  # the START below is a group consumer's, written raw
    p = Producer({**s.client_config(), "linger.ms": 0})
    part = queue_partitions(queue, s.queue_partitions)[0]
    offsets = []
    p.produce(s.queue_topic, b"skewed", queue.encode(), partition=part, headers=[("kmq.id", b"skew-1")],
              on_delivery=lambda err, msg: offsets.append(msg.offset()))
    p.flush(10)
    (offset,) = offsets
    r = M.RangeRef(queue, part, offset, offset + 1)
    started_at = time.time()
    p.produce(s.markers_topic, marker_codec.encode([M.Start(r, VISIBILITY_MS, 1)]), queue.encode(),
              partition=markers_partition(queue, s.markers_partitions),
              timestamp=int((started_at + skew_s) * 1000))  # what the skewed consumer's librdkafka stamps
    p.flush(10)
    # The skew reached the broker: the stored marker carries the consumer's time.
    (marker,) = read_partition(s, s.markers_topic, markers_partition(queue, s.markers_partitions),
                               lambda recs: [x for x in recs if x.key() == queue.encode()], 10)
    kind, ts_ms = marker.timestamp()
    assert kind == TS_CREATE and abs(ts_ms / 1000 - started_at - skew_s) < 1

    def redelivery(recs):
        return [x for x in recs if x.key() == queue.encode()
                and dict(x.headers() or []).get(envelope.DELIVERIES) == b"1"]
    found = read_partition(s, s.queue_topic, part, redelivery, VISIBILITY_MS / 1000 + 15)
    redelivered_at = found[0].timestamp()[1] / 1000  # stamped by the tracker: the true clock
    lateness_s = redelivered_at - (started_at + VISIBILITY_MS / 1000)
    print(f"skew {skew_s:+d}s: redelivered {lateness_s:+.3f}s after the deadline")
    assert lateness_s >= -EARLY_SLACK_S, f"redelivered {-lateness_s:.2f}s early"
    assert lateness_s <= LATE_BOUND_S, f"redelivered {lateness_s:.2f}s late"
