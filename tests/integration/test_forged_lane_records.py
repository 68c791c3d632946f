"""Lane records another client wrote (anyone who may write the deliveries topics may): a
forged REFERENCE to offsets the queue topic does not hold stops a shared consumer for at
most its own visibility timeout, and is counted. Before (an audit), one claiming a 12 h
timeout held every later delivery of the consumer for 12 h: 0 of 50 messages in 40 s,
redelivered to it again and again towards their dead letters."""

from __future__ import annotations

import uuid
from contextlib import contextmanager

from confluent_kafka import Consumer, Producer, TopicPartition

import kmq
from kmq.protocol import deliveries as D
from kmq.protocol.limits import MAX_TIMEOUT_MS
from kmq.protocol.markers import RangeRef
from kmq.protocol.placement import queue_partitions
from tests.conftest import wait_for
from tests.integration.views import dispatcher_stats, tracker_sees


def last_delivery(s, topic: str, partition: int, consumer_id: str) -> D.Delivery:
    """The newest delivery header for ``consumer_id`` on its lane (what a lane reader sees)."""
    kc = Consumer({**s.client_config(), "group.id": f"peek-{uuid.uuid4().hex}", "enable.auto.commit": False,
                   "enable.partition.eof": True})
    try:
        kc.assign([TopicPartition(topic, partition, 0)])
        key, last, eof = D.header_key(consumer_id), None, False
        while not eof:
            for m in kc.consume(1000, 5.0):
                if m.error() is not None:
                    eof = True
                elif m.key() == key:
                    last = D.decode(m.value())
        assert isinstance(last, D.Delivery)
        return last
    finally:
        kc.close()


@contextmanager
def shared_queue_consumer(s, tracker, queue: str, **options):
    """(client, consumer) of ``queue`` made shared, once its first message came and was acked."""
    with kmq.Client(settings=s) as client:
        client.configure_queue(queue, dispatch="shared")
        tracker_sees(tracker, queue, dispatch="shared")
        with client.consumer(queue, **options) as c:
            client.send(queue, b"first")
            client.flush()
            wait_for(lambda: c.receive(0.2), 30, what="the first message").ack()
            yield client, c


def test_a_forged_reference_past_the_log_holds_a_consumer_no_longer_than_its_visibility(
        shared_settings, tracker, queue):
    s = shared_settings
    with shared_queue_consumer(s, tracker, queue, visibility_timeout_s=4) as (client, c):
        layout = client.lane_layout()
        topic, partition = layout.topic(c._source.lane), layout.partition(c._source.lane)
        real = last_delivery(s, topic, partition, c._source.consumer_id)
        p = queue_partitions(queue, s.queue_partitions)[0]
        far = RangeRef(queue, p, 10**12, 10**12 + 10)
        forged = D.Delivery(D.REFERENCE, real.epoch, real.seq + 1, MAX_TIMEOUT_MS, far, far.full_mask)
        raw = Producer(s.client_config())
        raw.produce(topic, D.encode(forged), D.header_key(c._source.consumer_id), partition=partition)
        assert raw.flush(30) == 0
        wait_for(lambda: c.receive(0.2) is None and c.stats.get("references-incomplete", 0) >= 1, 60,
                 interval_s=0, what="the forged reference given up")
        sent = set(client.send_batch(queue, [b"after-%d" % i for i in range(10)]))
        client.flush()
        got: dict[str, int] = {}

        def all_ten() -> bool:
            for m in c.receive_batch(10, 0.2):
                got[m.id] = m.delivery_count
                m.ack()
            return set(got) >= sent
        wait_for(all_ten, 60, interval_s=0, what="the ten sent after the forged reference")
        assert set(got.values()) == {1}


def test_a_plain_producers_run_header_does_not_gate_an_unordered_queue(shared_settings, tracker, queue):
    # An audit: a record with kmq.run (a header only the dispatcher writes, on an ordered
    # queue's copies) among other tenants' records went out as a copy with it, switched the
    # consumer's group gate on, and the group's messages after it waited behind it unacked.
    s = shared_settings
    p = queue_partitions(queue, s.queue_partitions)[0]
    other = next(f"{queue}-other-{i}" for i in range(100_000)
                 if queue_partitions(f"{queue}-other-{i}", s.queue_partitions)[0] == p)
    with kmq.Client(settings=s) as client:
        client.configure_queue(queue, dispatch="shared")
        tracker_sees(tracker, queue, dispatch="shared")
        raw = Producer(s.client_config())
        for _ in range(200):  # another tenant's records around it: a copy, not a reference
            raw.produce(s.queue_topic, b"x" * 1000, other.encode(), partition=p)
        raw.produce(s.queue_topic, b"forged", queue.encode(), partition=p,
                    headers=[("kmq.id", b"forged-1"), ("kmq.run", b"5"), ("kmq.group", b"g")])
        for _ in range(200):
            raw.produce(s.queue_topic, b"x" * 1000, other.encode(), partition=p)
        assert raw.flush(30) == 0
        sent = [client.send(queue, b"g-%d" % i, group="g") for i in range(3)]
        client.flush()
        with client.consumer(queue) as c:
            got: list = []
            wait_for(lambda: got.extend(c.receive_batch(10, 0.2)) or len(got) >= 4, 60, interval_s=0,
                     what="all four without acking any (an unordered queue holds no group back)")
            assert {m.id for m in got} == {"forged-1", *sent} and c._gate is None
            assert all(m.delivery_count == 1 for m in got)
            for m in got:
                m.ack()
    assert dispatcher_stats(tracker)["forged-run-headers"] >= 1


def test_forged_copies_of_a_range_the_consumer_holds_are_left_out_and_counted(shared_settings, tracker, queue):
    # An audit: each copy of a held range replaced it in the consumer's table and was handed
    # to user code again; what the replaced ones held never left in_flight (12 copies: 9 of
    # 10 slots taken for good).
    s = shared_settings
    with kmq.Client(settings=s) as client:
        client.configure_queue(queue, dispatch="shared")
        tracker_sees(tracker, queue, dispatch="shared")
        with client.consumer(queue, max_in_flight=10, visibility_timeout_s=60) as c:
            victim = client.send(queue, b"victim")
            client.flush()
            held = wait_for(lambda: c.receive(0.2), 30, what="the message")
            assert held.id == victim
            layout = client.lane_layout()
            topic, partition = layout.topic(c._source.lane), layout.partition(c._source.lane)
            real = last_delivery(s, topic, partition, c._source.consumer_id)
            kc = Consumer({**s.client_config(), "group.id": f"peek-{uuid.uuid4().hex}", "enable.auto.commit": False})
            kc.assign([TopicPartition(s.queue_topic, real.range.partition, real.range.start)])
            record = wait_for(lambda: next((r for r in kc.consume(1, 1.0) if r.error() is None), None), 30,
                              what="the record")
            kc.close()
            copy = D.Delivery(D.COPY, real.epoch, real.seq, real.timeout_ms, real.range, real.mask)
            raw = Producer(s.client_config())
            for _ in range(5):
                raw.produce(topic, D.encode(copy), D.header_key(c._source.consumer_id), partition=partition)
                raw.produce(topic, record.value(), c._source.consumer_id.encode(), partition=partition,
                            headers=record.headers())
            assert raw.flush(30) == 0
            again: list = []
            wait_for(lambda: again.extend(c.receive_batch(10, 0.2)) or c.stats.get("duplicate-deliveries", 0) >= 5,
                     60, interval_s=0, what="the five copies left out")
            assert again == [] and c.in_flight == 1
            held.ack()
            c.flush()
            assert c.in_flight == 0


def test_a_batch_on_the_lane_no_client_can_read_is_skipped_and_counted(shared_settings, tracker, queue):
    # It was skipped (kmq.kafka.batch_skips) but counted nowhere a user looks (an audit).
    import os

    from tests import hostile_batches as H

    s = shared_settings
    with shared_queue_consumer(s, tracker, queue, visibility_timeout_s=30) as (client, c):
        layout = client.lane_layout()
        topic, partition = layout.topic(c._source.lane), layout.partition(c._source.lane)
        cid = c._source.consumer_id.encode()
        garbage = H.batch([(cid, b"x", [])] * 3, codec=H.ZSTD, payload=b"\x28\xb5\x2f\xfd" + os.urandom(200))
        assert H.send_raw(s.bootstrap_servers, topic, partition, garbage) == 0
        after = client.send(queue, b"after")
        client.flush()
        m = wait_for(lambda: c.receive(0.2), 120, what="the message after the batch")
        assert m.id == after
        m.ack()
        wait_for(lambda: c.stats.get("lane-batches-skipped") == 1, 30, what="the batch counted")
