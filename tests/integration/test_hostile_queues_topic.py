"""A record on the queues topic that no decoder reads (anyone allowed to write there may
write one) is ignored and counted: new clients start, the tracker stays ready, and the
settings after it count. Before (an audit of the hostile input rule), the value b"1" made
every new client's first send raise AttributeError, for as long as compaction kept it."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

import kmq
from tests.conftest import wait_for


def unreadable_configs(tracker) -> int:
    return (tracker.health() or {}).get("unreadable_configs", 0)


def test_an_unreadable_queues_record_stops_no_client_and_is_counted(shared_settings, tracker, queue):
    before = unreadable_configs(tracker)
    raw = Producer(shared_settings.client_config())
    raw.produce(shared_settings.queues_topic, b"1", f"hostile-{uuid.uuid4().hex[:8]}".encode())
    assert raw.flush(30) == 0
    with kmq.Client(settings=shared_settings) as client:  # reads the queues topic at its start
        client.configure_queue(queue, max_deliveries=7)
        client.send(queue, b"after")
        client.flush()
        with client.consumer(queue) as c:
            m = wait_for(lambda: c.receive(0.2), 60, what="the message sent after the hostile record")
            assert m.value == b"after"
            m.ack()
    wait_for(lambda: unreadable_configs(tracker) > before, 30, what="the record counted")


def test_a_decodable_config_of_no_queue_or_with_odd_tracker_fields_stops_no_shared_queue(
        shared_settings, tracker, queue):
    # An audit: `{"dispatch":"partition","handover_pending":true}` under a key that is no queue
    # id (or "dispatch_since_ms":"soon" under a queue's) failed every dispatch round of the
    # tracker: a shared queue on another markers partition got 0 of 10 in 43 s.
    before = unreadable_configs(tracker)
    tag = uuid.uuid4().hex[:8]
    raw = Producer(shared_settings.client_config())
    raw.produce(shared_settings.queues_topic, b'{"v":1,"dispatch":"partition","handover_pending":true}',
                f"bad key {tag}".encode())
    raw.produce(shared_settings.queues_topic, b'{"v":1,"dispatch_since_ms":"soon"}', f"odd-{tag}".encode())
    assert raw.flush(30) == 0
    wait_for(lambda: unreadable_configs(tracker) >= before + 2, 30, what="both records counted")
    with kmq.Client(settings=shared_settings) as client:
        client.configure_queue(queue, dispatch="shared")
        for i in range(10):
            client.send(queue, b"%d" % i)
        client.flush()
        got: set[bytes] = set()
        with client.consumer(queue) as c:
            def all_ten():
                for m in c.receive_batch(10, timeout_s=0.2):
                    got.add(m.value)
                    m.ack()
                return len(got) == 10
            wait_for(all_ten, 60, interval_s=0, what="the shared queue's ten messages")
