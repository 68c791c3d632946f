"""A BEGIN written by someone else on a shared queue's markers partition (anyone who may
write the markers topic may) leaves redelivery working: the dispatcher begins anew. Before,
every later ACQUIRE of it was fenced and what it handed out was tracked by no one: a message
not acked under a 3 s visibility timeout did not come back in 46 s (an audit)."""

from __future__ import annotations

from confluent_kafka import Producer

import kmq
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from tests.conftest import wait_for


def test_a_forged_begin_leaves_a_shared_queue_redelivering(shared_settings, tracker, queue):
    s = shared_settings
    with kmq.Client(settings=s) as client:
        client.configure_queue(queue, dispatch="shared", visibility_timeout_s=3)
        raw = Producer(s.client_config())
        raw.produce(s.markers_topic, marker_codec.encode([M.Begin((1 << 64) - 1)]),
                    partition=markers_partition(queue, s.markers_partitions))
        assert raw.flush(30) == 0
        (sent,) = client.send_batch(queue, [b"held, never acked"])
        client.flush()
        with client.consumer(queue, max_processing_s=3) as c:  # holds it: it lapses after 3 s
            seen: list[int] = []

            def step() -> bool:
                m = c.receive(0.2)
                if m is not None and m.id == sent:
                    seen.append(m.delivery_count)
                return len(seen) >= 2
            wait_for(step, 60, what="the message handed out again")
            for m in c.receive_batch(10, 0.5):
                m.ack()
