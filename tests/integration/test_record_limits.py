"""Messages at KMQ_MAX_MESSAGE_BYTES through every path that writes them again (an audit,
2026-11-29): a delayed send (its payload in the tracker's table and changelog), a reject
with the longest reason (the dead letter), a redrive; and records beyond it, which the
tracker sets aside or dead-letters without payload, and a redrive leaves where they are.

Before: the delayed send crashed the tracker worker (aiokafka's 1,000,000-byte request
limit on the changelog); the rejected message was dead-lettered without its payload; its
redrive failed with a raw librdkafka error, and put a payload-less letter back as an
empty message.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

import kmq
from kmq import send_args
from kmq.dev.devstack import TrackerProcess
from kmq.protocol import envelope, marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition, queue_partitions
from tests.conftest import wait_for
from tests.integration.views import set_aside


def largest_payload(s, queue: str) -> int:
    """The largest payload the SDK sends to ``queue`` without headers."""
    return s.max_message_bytes - len(queue) - send_args.HEADER_OVERHEAD_BYTES


def received(c, timeout_s: float = 60.0):
    return wait_for(lambda: c.receive(0.5), timeout_s, what="a message")


def test_a_delayed_send_at_the_limit_is_delivered_and_a_larger_schedule_is_set_aside(
        make_settings, artifacts, queue):
    s = make_settings()
    with TrackerProcess(s, artifacts / "tracker-record-limits.log") as tracker, kmq.Client(settings=s) as client:
        payload = b"d" * largest_payload(s, queue)
        msg_id = client.send(queue, payload, delay_s=1)
        client.flush()
        with client.consumer(queue) as c:
            m = received(c)
            assert (m.id, len(m.value)) == (msg_id, len(payload))
            m.ack()
        before = set_aside(tracker, "malformed-marker")
        # Another client's SCHEDULE past the limit (a larger KMQ_MAX_MESSAGE_BYTES, or hostile).
        raw = Producer({**s.client_config(), "message.max.bytes": 4 * s.max_message_bytes})
        too_big = M.Schedule(queue, "forged-1", int(time.time() * 1000) + 1000, b"x" * (s.max_message_bytes + 1), ())
        raw.produce(s.markers_topic, marker_codec.encode([too_big]),
                    partition=markers_partition(queue, s.markers_partitions))
        assert raw.flush(30) == 0
        wait_for(lambda: set_aside(tracker, "malformed-marker") > before, 60, what="the SCHEDULE set aside")
        assert tracker.process.poll() is None and tracker.health()["ready"]


def test_a_rejected_message_at_the_limit_keeps_its_payload_and_a_letter_without_one_stays(
        make_settings, artifacts, queue):
    s = make_settings(max_deliveries=2)  # the oversize one is released once: then written again
    with TrackerProcess(s, artifacts / "tracker-record-limits-dlq.log"), kmq.Client(settings=s) as client:
        payload = b"r" * largest_payload(s, queue)
        client.send(queue, payload)
        client.flush()
        # A plain producer's record past the limit: redelivered, it would not fit the queue
        # topic, so it is dead-lettered without its payload (payload-too-large).
        raw = Producer({**s.client_config(), "message.max.bytes": 4 * s.max_message_bytes})
        raw.produce(s.queue_topic, b"o" * (s.max_message_bytes + 2048), queue.encode(),
                    partition=queue_partitions(queue, s.queue_partitions)[0], headers=[(envelope.ID, b"oversize-1")])
        assert raw.flush(30) == 0
        with client.consumer(queue) as c:
            for _ in range(2):
                m = received(c)
                if m.id == "oversize-1":
                    m.release()  # written again to the queue topic: it does not fit
                else:
                    m.reject("R" * 4096)  # the longest reason a reject takes
        letters = wait_for(lambda: (lambda ds: ds if len(ds) == 2 else None)(client.dead_letters(queue)),
                           60, what="two dead letters")
        by_reason = {d.reason: d for d in letters}
        assert len(by_reason["rejected"].value) == len(payload)  # before: 0 (payload-too-large)
        assert by_reason["payload-too-large"].value == b""
        result = client.redrive(queue)
        assert (result.moved, result.remaining, result.without_payload) == (1, 1, 1)
        with client.consumer(queue) as c:
            m = received(c)
            assert len(m.value) == len(payload) and m.delivery_count == 1
            m.ack()
            assert c.receive(1.0) is None  # the payload-less letter did not come back empty
