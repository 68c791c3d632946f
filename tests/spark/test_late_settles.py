"""An ACK that comes after the tracker took its messages back is no ack in the Spark jobs either.

The audit's case on the real stack (the session's broker and tracker): two messages
held past their visibility timeout, taken back and redelivered by the tracker, then
acked. The tracker counts those ACKs ``late`` and keeps the messages due; the jobs
used to count them acked after ~6 s against a 2 s deadline, miss the timeouts in
``rates`` and leave the messages out of ``never_acked``.
"""

from __future__ import annotations

import time

import pytest

from kmq.spark import jobs
from kmq.spark.events import marker_events, queue_records
from kmq.spark.session import kafka_reader
from tests.conftest import wait_for
from tests.integration.views import queue_detail

pytestmark = pytest.mark.slow


def since_start(tracker, queue: str) -> dict:
    d = queue_detail(tracker, queue)
    return d["since_start"] if d else {}


def test_acks_after_the_tracker_took_the_messages_back_are_timeouts_in_every_job(
        make_client, shared_settings, tracker, spark, queue):
    client = make_client(shared_settings)
    client.configure_queue(queue, visibility_timeout_s=2, max_processing_s=2)
    client.send_batch(queue, [b"slow-0", b"slow-1"])
    client.flush()
    with client.consumer(queue) as c:
        held = []
        wait_for(lambda: held.extend(c.receive_batch(2, 0.2)) or len(held) >= 2, 30, what="both messages")
        assert [m.delivery_count for m in held] == [1, 1]
        # Given: the tracker took both back (a TICK passed their deadline) and redelivered them.
        wait_for(lambda: since_start(tracker, queue).get("redelivered", 0) >= 2, 60,
                 what="the tracker redelivering both")
        # When: their first consumer acks them only now.
        for m in held:
            m.ack()
        c.flush()
        counts = wait_for(lambda: (lambda s: s if s.get("late", 0) >= 2 else None)(since_start(tracker, queue)),
                          30, what="the tracker counting both ACKs late")
    assert not counts.get("acked"), counts  # the tracker's verdict the jobs must share

    read = lambda t, h=False: kafka_reader(spark, shared_settings.bootstrap_servers,  # noqa: E731
                                           subscribe=t, includeHeaders=h).load()
    events = marker_events(read(shared_settings.markers_topic))
    dels = jobs.deliveries(events, int(time.time() * 1000)).where(f"queue = '{queue}'").cache()
    # Then: each first delivery timed out, its ACK late, no processing time.
    first = {(r.queue_partition, r.offset): r for r in dels.where("delivery = 1").collect()}
    for m in held:
        d = first[(m.partition, m.offset)]
        assert (d.outcome, d.processing_ms, d.settled_ms) == ("timed-out", None, None), d
        assert d.settled_late, d
        assert d.deadline_ms >= d.start_ms + 2000, d  # the 2 s visibility, perhaps moved by a keepalive
    # percentiles counts no ack of the queue, rates counts the timeouts,
    assert jobs.percentiles(dels).where(f"queue = '{queue}'").count() == 0
    rates = {(r.kind, r.reason): r["count"] for r in jobs.rates(dels).where(f"queue = '{queue}'").collect()}
    assert rates.get(("redelivery", "timed-out"), 0) >= 2, rates
    # and never_acked lists both messages.
    records = queue_records(read(shared_settings.queue_topic, True)).where(f"queue = '{queue}'")
    never = {r.message_id for r in jobs.never_acked(dels, records).collect()}
    assert {m.id for m in held} <= never, never
    dels.unpersist()
