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
