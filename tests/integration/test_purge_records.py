"""A markers record of many PURGEs (anyone who may write the markers topic may write one)
costs one read of the settings, one of the queue topic's ends and one producer's writes,
not one of each per PURGE: before (an audit), a record of 100 made-up ones took about
100 s to apply, and stalled every markers partition of the worker meanwhile."""

from __future__ import annotations

import time

from confluent_kafka import Producer

import kmq
from kmq.dev.devstack import TrackerProcess
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from tests.conftest import wait_for

PURGES = 100


def test_a_record_of_many_purges_is_applied_at_once_and_stalls_nothing(make_settings, artifacts, queue):
    s = make_settings()
    with TrackerProcess(s, artifacts / "tracker-purge-records.log"), kmq.Client(settings=s) as client:
        names = [f"made-up-{i}" for i in range(PURGES)]
        raw = Producer(s.client_config())
        raw.produce(s.markers_topic, marker_codec.encode([M.Purge(n) for n in names]),
                    partition=markers_partition(queue, s.markers_partitions))
        assert raw.flush(30) == 0
        started = time.monotonic()
        configs = client.queue_configs()
        wait_for(lambda: all(configs.get(n).purged_before for n in names), 60,
                 what=f"the {PURGES} purge points")
        # A queue on the same markers partition goes on at once (the agent applies one record
        # at a time, for all its partitions).
        client.send(queue, b"after")
        client.flush()
        with client.consumer(queue) as c:
            m = wait_for(lambda: c.receive(0.2), 60, what="the message sent after the purges")
            m.ack()
        took_s = time.monotonic() - started
    assert took_s < 30, f"{took_s:.1f} s for {PURGES} PURGEs and a round trip (before: ~100 s)"
