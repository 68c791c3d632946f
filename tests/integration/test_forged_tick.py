"""A TICK far ahead of the tracker's clock (anyone who may write the markers topic may write
one, with any time) is set aside: it must not make every delayed send and every message in
flight of its markers partition due at once."""

from __future__ import annotations

import time

from confluent_kafka import Producer

import kmq
from kmq.dev.devstack import TrackerProcess
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from tests.conftest import wait_for
from tests.integration.views import set_aside

DAY_MS = 86_400_000


def test_a_tick_from_the_future_makes_nothing_due(make_settings, artifacts, queue):
    s = make_settings()
    with TrackerProcess(s, artifacts / "tracker-forged-tick.log") as tracker, kmq.Client(settings=s) as client:
        client.send(queue, b"in 300 s", delay_s=300)
        client.flush()
        before = set_aside(tracker, "malformed-marker")
        raw = Producer(s.client_config())
        raw.produce(s.markers_topic, marker_codec.encode([M.Tick(int(time.time() * 1000) + 10 * DAY_MS)]),
                    partition=markers_partition(queue, s.markers_partitions))
        assert raw.flush(30) == 0
        with client.consumer(queue) as c:
            early = c.receive(5.0)
            assert early is None, f"delivered {early.value!r} 295 s early"
        wait_for(lambda: set_aside(tracker, "malformed-marker") > before, 30, what="the forged TICK set aside")
