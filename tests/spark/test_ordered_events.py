"""Spark events of a shared, ordered queue: its dispatcher's ACQUIREs are deliveries, its
bookkeeping markers (CREDIT, BEGIN, FLOOR, PURGE) are events and never break a job, and
events, deliveries, queue records and dead letters carry the ordered group (``kmq.group``).
"""

from __future__ import annotations

import pytest

from kmq.protocol import envelope as H
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.spark import jobs
from kmq.spark.events import dead_letters, marker_events, queue_records, with_group
from kmq.spark.session import kafka_reader
from tests.spark.conftest import produce

pytestmark = pytest.mark.slow

T = 1_900_000_000_000
Q = "ordered-events"


@pytest.fixture(scope="module")
def ordered(spark, broker, make_topic):
    bs = broker.bootstrap_servers
    markers, queue, dlq = make_topic("markers"), make_topic("queue"), make_topic("dlq")
    # Given: four records, groups a, a, b and none; the dispatcher hands out a0 and b0,
    # a0 is acked, a1 handed out next and rejected; b0 still in flight.
    groups = [b"a", b"a", b"b", None]
    produce(bs, queue, [dict(value=b"x", key=Q.encode(), partition=0, timestamp=T - 1000,
                             headers=[(H.ID, f"m{i}".encode())] + ([(H.GROUP, g)] if g else []))
                        for i, g in enumerate(groups)])
    r = M.RangeRef(Q, 0, 0, 3)
    workload = [
        (0, [M.Begin(7)]),
        (10, [M.Credit(Q, "c1", 0, 7, 0, 5, 10_000, 30_000)]),
        (20, [M.Acquire(r, 30_000, 0b101, 7), M.Floor(Q, 0, 1, 7)]),
        (120, [M.Ack(r, 0b001)]),
        (130, [M.Acquire(r, 30_000, 0b010, 7), M.Floor(Q, 0, 3, 7)]),
        (180, [M.Reject(r, 0b010, "bad")]),
        (200, [M.Purge("other-queue")]),
    ]
    produce(bs, markers, [dict(value=marker_codec.encode(ms), key=b"q", partition=0, timestamp=T + dt)
                          for dt, ms in workload])
    produce(bs, dlq, [dict(value=b"x", key=Q.encode(), headers=[
        (H.ID, b"m1"), (H.GROUP, b"a"), (H.DLQ_REASON, b"rejected")])])
    read = lambda t, h=False: kafka_reader(spark, bs, subscribe=t, includeHeaders=h).load()  # noqa
    return dict(events=marker_events(read(markers)).cache(), records=queue_records(read(queue, True)),
                dead=dead_letters(read(dlq, True)))


def test_every_marker_of_a_shared_queue_is_an_event(ordered):
    counts = {r.event: r["count"] for r in ordered["events"].groupBy("event").count().collect()}
    assert counts == {"begin": 1, "credit": 1, "acquire": 3, "floor": 2, "ack": 1, "reject": 1,
                      "purge": 1}


def test_events_carry_the_group_of_their_record(ordered):
    ev = with_group(ordered["events"], ordered["records"])
    got = sorted((r.event, r.offset, r.group) for r in ev.where("event in ('acquire', 'ack', 'reject')")
                 .collect())
    assert got == [("ack", 0, "a"), ("acquire", 0, "a"), ("acquire", 1, "a"), ("acquire", 2, "b"),
                   ("reject", 1, "a")]
    assert ev.columns == ordered["events"].columns + ["group"]
    assert {r.group for r in ev.where("event = 'credit'").collect()} == {None}


def test_acquires_are_deliveries_and_deliveries_carry_the_group(ordered):
    dels = with_group(jobs.deliveries(ordered["events"], as_of_ms=T + 1000), ordered["records"])
    got = {(r.offset, r.group): (r.outcome, r.processing_ms) for r in dels.collect()}
    assert got == {(0, "a"): ("acked", 100), (1, "a"): ("rejected", None), (2, "b"): ("in-flight", None)}


def test_queue_records_and_dead_letters_carry_the_group(ordered):
    assert {r.message_id: r.group for r in ordered["records"].collect()} == \
        {"m0": "a", "m1": "a", "m2": "b", "m3": None}
    assert [(r.message_id, r.group) for r in ordered["dead"].collect()] == [("m1", "a")]
