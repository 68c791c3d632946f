"""`kmq spark dead-letters` (README: `kmq spark JOB --out DIR`) counts dead letters only.

A redrive and a purge append control events to the dead-letter topic (header
``kmq.dlq.control``: ``redriven`` / ``purged``, kmq/ops/deadletters.py); they are no
queue's messages. Run against the demo of `kmq dev` after `kmq dlq redrive` and
`kmq dlq purge`, the report showed them as dead letters with a null reason.
"""

from __future__ import annotations

import pytest

from kmq.ops.deadletters import CONTROL, CONTROL_OFFSET
from kmq.protocol import envelope as H
from kmq.spark import jobs
from kmq.spark.events import dead_letters
from kmq.spark.session import kafka_reader
from tests.spark.conftest import produce

pytestmark = pytest.mark.slow

T = 1_800_000_000_000


def test_redrive_and_purge_events_are_not_dead_letters(spark, broker, make_topic):
    dlq = make_topic("dlq-controls")
    letter = dict(value=b"payload", key=b"orders", headers=[
        (H.ID, b"orders-m1"), (H.DELIVERIES, b"3"), (H.DLQ_REASON, b"max-deliveries"),
        (H.ENQUEUED_MS, str(T).encode()), (H.DLQ_AT_MS, str(T + 500).encode())])
    # What Client.redrive and Client.purge_dead_letters append after it.
    redriven = dict(value=b"", key=b"orders", headers=[(CONTROL, b"redriven"), (CONTROL_OFFSET, b"0")])
    purged = dict(value=b"", key=b"orders", headers=[(CONTROL, b"purged"), (CONTROL_OFFSET, b"2")])
    produce(broker.bootstrap_servers, dlq, [letter, redriven, letter, purged])

    dead = dead_letters(kafka_reader(spark, broker.bootstrap_servers, subscribe=dlq,
                                     includeHeaders=True).load())

    assert sorted(((r.queue, r.reason) for r in dead.collect()), key=repr) == [
        ("orders", "max-deliveries"), ("orders", "max-deliveries")]
    summary = [(r.queue, r.reason, r["count"]) for r in jobs.dead_letter_summary(dead).collect()]
    assert summary == [("orders", "max-deliveries", 2)]
