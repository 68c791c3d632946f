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
