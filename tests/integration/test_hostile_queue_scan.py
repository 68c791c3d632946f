"""The depth scan (web/queue_scan.py) over a queue topic any producer may write: keys no queue
has and batches nobody can read cost it nothing lasting and stop no pass."""

from __future__ import annotations

import os

import kmq
from kmq.protocol.placement import queue_partitions
from kmq.queue_config import QueueConfig
from tests import hostile_batches as H
from web.queue_scan import QueueScanner


def scanner_of(s, queues):
    return QueueScanner(s, owned=lambda: set(range(s.markers_partitions)), known_queues=lambda: set(queues),
                        started_upto=lambda q, p: None, config=lambda q: QueueConfig())


def test_keys_longer_than_any_queue_id_are_not_kept(make_settings):
    s = make_settings()
    (p,) = queue_partitions("scan-keys", s.queue_partitions)
    with kmq.Client(settings=s) as client:
        client.send_batch("scan-keys", [b"k"] * 3)
    from confluent_kafka import Producer
    raw = Producer({**s.client_config(), "message.max.bytes": 2_000_000})
    for i in range(20):  # 20 distinct keys of 512 KiB each
        raw.produce(s.queue_topic, b"v", bytes([i]) * (512 << 10), partition=p)
    assert raw.flush(30) == 0
    scanner = scanner_of(s, ["scan-keys"])
    scanner._pass()
    assert scanner.result.depth["scan-keys"].records == 3
    # Before: each key was cached (10 MiB here), kept until 100,000 keys were.
    assert sum(len(k) for k in scanner._key_cache if k) < 64 << 10


def test_a_batch_nobody_can_read_stops_no_pass(make_settings):
    s = make_settings()
    queue = "scan-unreadable"
    (p,) = queue_partitions(queue, s.queue_partitions)
    with kmq.Client(settings=s) as client:
        client.send_batch(queue, [b"a"] * 2)
        client.flush()
        bad = H.batch([(queue.encode(), b"h", [])] * 3, codec=H.ZSTD, payload=b"\x28\xb5\x2f\xfd" + os.urandom(100))
        assert H.send_raw(s.bootstrap_servers, s.queue_topic, p, bad) == 0
        client.send_batch(queue, [b"b"] * 2)
    scanner = scanner_of(s, [queue])
    scanner._pass()
    assert scanner.result.depth[queue].records == 4  # the readable ones, on both sides of it
    assert (scanner.skips.batches, scanner.skips.offsets) == (1, 3)
    scanner._pass()  # read again from below: skipped at once, counted once (was once a pass)
    assert scanner.result.depth[queue].records == 4
    assert (scanner.skips.batches, scanner.skips.offsets) == (1, 3)
