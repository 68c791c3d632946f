"""Marker records in every codec Kafka has: the tracker reads them all and redelivery goes on.

aiokafka (the tracker's client) needs cramjam for snappy, lz4 and zstd; without
it the first such record crash-looped the worker (issue 12).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from tests.conftest import wait_for

pytestmark = pytest.mark.usefixtures("tracker")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_marker_records_are_read_and_redelivery_goes_on(shared_settings, make_client, queue, codec):
    settings = shared_settings.replace(compression=codec)  # the SDK's own markers, compressed
    client = make_client(settings)
    ids = [client.send(queue, b"m-%d" % i) for i in range(2)]
    client.flush()
    # A plain producer's compressed records too: one about a range nobody holds, one garbage.
    raw = Producer({**settings.client_config(), "compression.type": codec, "linger.ms": 0})
    mp = markers_partition(queue, settings.markers_partitions)
    never = M.RangeRef(queue, 0, 10**6, 10**6 + 3)
    raw.produce(settings.markers_topic, marker_codec.encode([M.Ack(never, 0b111)]), queue.encode(), partition=mp)
    raw.produce(settings.markers_topic, b"\x01garbage" * 50, queue.encode(), partition=mp)
    assert raw.flush(30) == 0
    with client.consumer(queue, visibility_timeout_s=2) as c:
        got = []
        wait_for(lambda: got.extend(c.receive_batch(2, 0.2)) or len(got) >= 2, 30, what="both messages")
        assert sorted(m.id for m in got) == sorted(ids)
        keep, drop = got
        keep.ack()
        c.flush()
        again = wait_for(lambda: c.receive(0.2), 60, what=f"the redelivery after {codec} markers")
        assert again.id == drop.id and again.delivery_count == 2
        again.ack()
        c.flush()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def test_compression_bombs_on_the_markers_topic_do_not_stay_in_the_trackers_memory(make_settings, artifacts):
    # An audit: each record of 200 MiB of zeros (lz4, under 1 MB on the wire) kept ~200 MB of
    # the tracker for good. confluent-kafka's produce, refusing the dead-letter copy as too large
    # inside the decode error's handler, leaked that error, which held the record.
    from kmq.dev.devstack import TrackerProcess
    s = make_settings(dispatch="partition")
    bomb_mib, bombs = 96, 3
    with TrackerProcess(s, artifacts / "tracker-bombs.log") as t:
        pid = t.process.pid
        malformed = lambda: t.health()["malformed_markers"]  # noqa: E731
        raw = Producer({**s.client_config(), "compression.type": "lz4", "linger.ms": 50,
                        "message.max.bytes": 1_000_000_000, "batch.size": 1_000_000_000})
        value = b"\x00" * (bomb_mib << 20)

        def bomb(n: int) -> None:
            # A small record after it: the record last read is the agent's until the next comes.
            raw.produce(s.markers_topic, value, b"bomb", partition=n % s.markers_partitions)
            raw.produce(s.markers_topic, b"\x09small", b"after", partition=n % s.markers_partitions)
            assert raw.flush(60) == 0
            wait_for(lambda: malformed() >= 2 * (n + 1), 120, what=f"bomb {n + 1} and the record after it set aside")
        bomb(0)
        after_first = rss_mib(pid)
        for n in range(1, bombs):
            bomb(n)
        # The client's fetch buffers let go of the last one a moment after it was applied;
        # a kept bomb never does (192 MiB for two, measured before).
        def back_within() -> tuple[float] | None:
            grown = rss_mib(pid) - after_first
            return (grown,) if grown < bomb_mib else None
        wait_for(back_within, 60, interval_s=0.5,
                 what=f"the tracker's memory back within {bomb_mib} MiB of its size after the first of {bombs} bombs")
