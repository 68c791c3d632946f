"""A BEGIN written by someone else on a shared queue's markers partition (anyone who may
write the markers topic may) leaves redelivery working: the dispatcher begins anew. Before,
every later ACQUIRE of it was fenced and what it handed out was tracked by no one: a message
not acked under a 3 s visibility timeout did not come back in 46 s (an audit)."""

from __future__ import annotations

from confluent_kafka import Producer

import kmq
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition, queue_partitions
from tests.conftest import wait_for
from tests.integration.views import dispatcher_stats, tracker_sees


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


def test_a_forged_acquire_far_past_the_end_does_not_stop_a_shared_queue(shared_settings, tracker, queue):
    # An audit: one ACQUIRE of one offset at 10**15 with the current epoch (anyone who reads the
    # markers topic sees it in its BEGIN) set the queue's cursor there; from the next BEGIN on,
    # the queue got 0 of 5 for good. Here the record forges that epoch itself, then the
    # ACQUIRE; the dispatcher finds a foreign BEGIN and begins anew from the table's cursors.
    s = shared_settings
    epoch = (1 << 63) + 12345
    with kmq.Client(settings=s) as client:
        client.configure_queue(queue, dispatch="shared")
        tracker_sees(tracker, queue, dispatch="shared")
        qp = queue_partitions(queue, s.queue_partitions)[0]
        far = M.RangeRef(queue, qp, 10**15, 10**15 + 1)
        raw = Producer(s.client_config())
        raw.produce(s.markers_topic, marker_codec.encode([M.Begin(epoch), M.Acquire(far, 30_000, 1, epoch)]),
                    partition=markers_partition(queue, s.markers_partitions))
        assert raw.flush(30) == 0
        wait_for(lambda: dispatcher_stats(tracker)["cursors-out-of-topic"] >= 1, 60,
                 what="the dispatcher beginning anew at the partition's end")
        sent = set(client.send_batch(queue, [b"%d" % i for i in range(5)]))
        client.flush()
        got: set[str] = set()
        with client.consumer(queue) as c:
            def all_five() -> bool:
                for m in c.receive_batch(5, 0.2):
                    got.add(m.id)
                    m.ack()
                return got >= sent
            wait_for(all_five, 60, interval_s=0, what="the five sent after the forged ACQUIRE")
