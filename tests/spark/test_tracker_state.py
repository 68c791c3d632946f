"""The in-flight state Spark rebuilds from the changelog equals what the tracker reports.

A real tracker worker, real SDK consumers: some messages acked (their ranges
end as tombstones), some released with a long delay, some held by a consumer
that vanished with a long visibility timeout, and delayed sends. Once nothing
changes, the per-partition digest Spark computes from the changelog must
equal the tracker's ``GET /kmq/debug/state`` for the same moment.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from kmq.dev.devstack import TrackerProcess
from kmq.spark.changelog import inflight_state, membership_digest, tracker_changelog_topic
from kmq.spark.session import kafka_reader
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

TRACKED = ("ranges", "scheduled", "pending", "membership_sha256")


def tracker_digest(tracker: TrackerProcess) -> dict:
    with urllib.request.urlopen(tracker.url + "/kmq/debug/state", timeout=5) as r:
        return {int(p): {k: d[k] for k in TRACKED} for p, d in json.loads(r.read()).items()}


def vanish(consumer) -> None:
    """The consumer dies without a goodbye: no release, no keepalive (as in test_crashes)."""
    consumer._vanish()


def test_spark_rebuilds_exactly_the_in_flight_state_the_tracker_reports(
        make_client, spark, make_settings, artifacts, queue):
    settings = make_settings(visibility_timeout_s=600.0, max_deliveries=5)
    tracker = TrackerProcess(settings, artifacts / "tracker-spark-state.log").start(timeout_s=120)
    client = make_client(settings)
    try:
        queues = [f"{queue}-a", f"{queue}-b", f"{queue}-c"]
        for q in queues:
            client.send_batch(q, [b"%s-%d" % (q.encode(), i) for i in range(200)])
            for i in range(3):
                client.send(q, b"later", delay_s=3600)  # scheduled sends (S keys)
        client.flush()
        held = released = 0
        for q in queues:
            c = client.consumer(q, visibility_timeout_s=600, batch_size=40, max_in_flight=1000)
            got = []
            wait_for(lambda: got.extend(c.receive_batch(200, 0.2)) or len(got) >= 200, 30,
                     what=f"200 received from {q}")
            for i, m in enumerate(got):
                if i >= 160 or i % 3 == 0:
                    m.ack()  # the last ranges wholly: their entries become tombstones
                elif i % 7 == 0:
                    m.release(delay_s=3600)  # stays in flight, cause RELEASED
                    released += 1
                else:
                    held += 1
            c.flush()
            vanish(c)

        def settled():
            first = tracker_digest(tracker)
            again = tracker_digest(tracker)
            done = (sum(d["scheduled"] for d in first.values()) == 9
                    and sum(d["pending"] for d in first.values()) == held + released)
            return first if done and first == again else None
        before = wait_for(settled, 60, interval_s=0.5, what="tracker state to settle")
        assert sum(d["pending"] for d in before.values()) == held + released

        topic = tracker_changelog_topic(settings.app_id)

        def rebuilt():
            records = kafka_reader(spark, settings.bootstrap_servers, subscribe=topic).load()
            return membership_digest(inflight_state(records), settings.markers_partitions)
        # The changelog may trail the tables by a produce round trip: poll until it matches.
        spark_view = wait_for(lambda: (lambda d: d if d == before else None)(rebuilt()), 60,
                              interval_s=0.5, what="Spark's rebuilt state to match the tracker's")
        assert spark_view == tracker_digest(tracker) == before
        assert sum(d["ranges"] for d in spark_view.values()) > 0
    finally:
        tracker.stop()
