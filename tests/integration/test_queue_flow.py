"""The whole flow on a real broker: send, receive, ack, time out, redeliver, dead-letter."""

from __future__ import annotations

import json
import urllib.request

import pytest
from confluent_kafka import Producer

import kmq
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from tests.conftest import wait_for
from tests.integration.dlq import dead_letters
from tests.integration.views import queue_detail, tracker_sees

pytestmark = pytest.mark.usefixtures("tracker")


@pytest.fixture
def client(shared_settings):
    with kmq.Client(settings=shared_settings) as c:
        yield c


def stats_of(tracker, queue: str) -> dict:
    """What the tracker counted for ``queue`` since it started (``/kmq/stats``)."""
    with urllib.request.urlopen(tracker.url + "/kmq/stats", timeout=10) as r:
        return json.loads(r.read())["queues"].get(queue, {})


def receive_all(consumer, n, timeout_s=30.0):
    got = []
    wait_for(lambda: got.extend(consumer.receive_batch(n - len(got), timeout_s=0.2)) or len(got) >= n,
             timeout_s, what=f"{n} messages")
    return got


def test_sent_messages_are_received_with_payload_headers_and_id(client, queue):
    ids = [client.send(queue, b"payload-%d" % i, headers={"h": b"v", "n": str(i)}) for i in range(20)]
    client.flush()
    with client.consumer(queue, visibility_timeout_s=5) as c:
        got = receive_all(c, 20)
        assert sorted(m.id for m in got) == sorted(ids)
        for m in got:
            i = int(m.value.split(b"-")[1])
            assert m.queue == queue and m.headers == {"h": b"v", "n": str(i).encode()}
            assert m.delivery_count == 1
            m.ack()
        c.flush()
        assert c.in_flight == 0


def test_acked_messages_never_come_back(client, queue):
    client.send_batch(queue, [b"x"] * 50)
    client.flush()
    # Visibility 3 s: the acks reach the tracker well within it even on a loaded machine
    # (with 1 s, a shared consumer's read-ahead of 10 once expired before its acks were applied).
    with client.consumer(queue, visibility_timeout_s=3) as c:
        for m in receive_all(c, 50):
            m.ack()
        c.flush()
        # Well past the visibility timeout (and several tracker ticks): nothing returns.
        assert c.receive_batch(100, timeout_s=5.0) == []


def test_an_unacked_message_comes_back_after_its_visibility_timeout(client, queue, tracker):
    msg_id = client.send(queue, b"slow", headers={"h": b"1"})
    client.flush()
    with client.consumer(queue, visibility_timeout_s=1.5) as c:
        first = receive_all(c, 1)[0]
        assert first.delivery_count == 1
        again = wait_for(lambda: c.receive(0.2), 20, what="redelivery")
        assert again.id == msg_id and again.delivery_count == 2
        assert again.value == b"slow" and again.headers == {"h": b"1"}
        wait_for(lambda: first.lapsed, 10, what="the first copy to lapse")
        assert c.in_flight == 1  # the lapsed copy no longer counts against max_in_flight
        first.ack()  # a stale copy: changes nothing
        c.flush()
        # The tracker counts it as late (a settle for a copy it took back), not as a marker
        # it could not place (set aside: unknown-range).
        counts = wait_for(lambda: (lambda q: q if q.get("late") else None)(stats_of(tracker, queue)), 20,
                          what="the late ack counted")
        assert counts["late"] == 1 and counts.get("unknown-range", 0) == 0, counts
        assert queue_detail(tracker, queue)["since_start"]["late"] == 1
        again.ack()
        c.flush()


def test_past_max_deliveries_a_message_is_dead_lettered_with_reason(client, queue, shared_settings):
    msg_id = client.send(queue, b"poison", headers={"user": b"header"})
    client.flush()
    counts = []
    with client.consumer(queue, visibility_timeout_s=1) as c:
        def third_delivery():
            m = c.receive(0.2)
            if m is not None:
                counts.append(m.delivery_count)
            return len(counts) >= shared_settings.max_deliveries
        wait_for(third_delivery, 40, what="all deliveries")
        dead = wait_for(lambda: dead_letters(shared_settings, queue), 20, what="a dead letter")
        assert c.receive(1.0) is None
    assert counts == [1, 2, 3]
    (d,) = dead
    assert d["value"] == b"poison" and d["user"] == {"user": b"header"}
    k = d["kmq"]
    assert k["kmq.id"] == msg_id.encode() and k["kmq.dlq.reason"] == b"max-deliveries"
    assert k["kmq.deliveries"] == b"3"
    assert int(k["kmq.first-delivery-ms"]) <= int(k["kmq.dlq.last-delivery-ms"]) <= int(k["kmq.dlq.at-ms"])


def test_a_plain_kafka_producer_can_enqueue(client, queue, shared_settings):
    p = Producer({"bootstrap.servers": shared_settings.bootstrap_servers,
                  "partitioner": "murmur2_random"})  # what Java clients do by default
    p.produce(shared_settings.queue_topic, b"from kcat", queue.encode())
    p.flush()
    with client.consumer(queue, visibility_timeout_s=1) as c:
        m = receive_all(c, 1)[0]
        assert m.value == b"from kcat" and m.delivery_count == 1 and m.headers == {}
        plain_id = m.id
        again = wait_for(lambda: c.receive(0.2), 20, what="redelivery")
        assert again.id == plain_id and again.delivery_count == 2  # the id survives redelivery
        again.ack()


def test_garbage_on_the_markers_topic_is_counted_and_set_aside(client, queue, shared_settings, tracker):
    p = Producer({"bootstrap.servers": shared_settings.bootstrap_servers})
    mp = markers_partition(queue, shared_settings.markers_partitions)
    for garbage in (b"", b"\xff" * 10, b"\x01\x00\x01\x63", marker_codec.encode([M.Tick(1)])[:-1]):
        p.produce(shared_settings.markers_topic, garbage, queue.encode(), partition=mp)
    p.flush()

    def malformed():
        with urllib.request.urlopen(tracker.url + "/kmq/health", timeout=2) as r:
            return json.loads(r.read())["malformed_markers"] >= 4
    wait_for(malformed, 20, what="malformed markers counted")
    # ... and the tracker still works: a message round-trips with a redelivery.
    client.send(queue, b"after garbage")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=1) as c:
        receive_all(c, 1)
        again = wait_for(lambda: c.receive(0.2), 20, what="redelivery after garbage")
        assert again.value == b"after garbage" and again.delivery_count == 2
        again.ack()


def test_without_dead_letters_a_message_is_dropped_at_its_last_delivery(client, queue, tracker, shared_settings):
    # It was redelivered for ever (--no-dead-letter says "dead-letter, or drop").
    client.configure_queue(queue, max_deliveries=2, dead_letter=False)
    tracker_sees(tracker, queue, max_deliveries=2, dead_letter=False)
    msg_id = client.send(queue, b"given-up")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=30) as c:
        for n in (1, 2):
            m = wait_for(lambda: c.receive(0.2), 30, what=f"delivery {n}")
            assert (m.id, m.delivery_count) == (msg_id, n)
            m.release(delay_s=0)
        c.flush()
        wait_for(lambda: stats_of(tracker, queue).get("discarded") == 1, 30, what="the drop counted")
        assert c.receive(2.0) is None  # dropped, not redelivered
    assert dead_letters(shared_settings, queue) == []
