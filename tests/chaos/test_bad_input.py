"""Bad input: garbage markers, odd queue records, unknown queue ids. The tracker sets them
aside, counts them (/kmq/health, /metrics), keeps running, and good traffic still flows."""

from __future__ import annotations

import random
import urllib.request

import pytest
from confluent_kafka import Producer

import kmq
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.errors import MarkerDecodeError
from kmq.protocol.placement import markers_partition, queue_partitions
from tests.chaos.conftest import get_json
from tests.conftest import wait_for, wait_for_count
from tests.integration.dlq import letters_of

RANDOM_RECORDS = 100_000


def undecodable(value: bytes) -> bool:
    try:
        marker_codec.decode(value)
    except MarkerDecodeError:
        return True
    return False


def crafted_markers(queue: str) -> list[bytes]:
    """Truncated, old-version, future-version and otherwise broken marker records."""
    r = M.RangeRef(queue, 0, 10, 20)
    good = [marker_codec.encode([M.Start(r, 1000, r.full_mask)]), marker_codec.encode([M.Ack(r, 0b101)]),
            marker_codec.encode([M.Schedule(queue, "id-1", 1, b"v" * 50, (("h", b"x"),))]),
            marker_codec.encode([M.Release(r, 1, 5, True), M.Reject(r, 2, "why")])]
    out = []
    for g in good:
        out += [g[:n] for n in range(1, len(g))]                         # every truncation
        out += [bytes([0]) + g[1:], bytes([2]) + g[1:], bytes([255]) + g[1:]]  # old and future versions
        out += [g + b"\x00", g[:1] + b"\x00\x00" + g[3:]]                  # trailing bytes, no markers
    return out


@pytest.mark.slow
def test_100k_random_and_crafted_bad_markers_are_counted_set_aside_and_traffic_flows(flooded_tracker, queue):
    settings = flooded_tracker.settings
    rng = random.Random(3)
    raw = Producer({**settings.client_config(), "linger.ms": 20, "queue.buffering.max.messages": 200_000})
    client = kmq.Client(settings=settings)
    try:
        msg_id = client.send(queue, b"before the garbage")
        client.flush()
        consumer = client.consumer(queue, visibility_timeout_s=3)
        first = wait_for(lambda: consumer.receive(0.2), 30, what="the first delivery")
        bad = crafted_markers(queue)
        bad += [rng.randbytes(rng.randint(0, 64)) for _ in range(RANDOM_RECORDS)]
        expected = sum(1 for b in bad if undecodable(b))
        assert expected >= RANDOM_RECORDS  # (a random record that decodes would be a marker)
        mp = markers_partition(queue, settings.markers_partitions)
        for i, value in enumerate(bad):
            raw.produce(settings.markers_topic, value, partition=mp if i % 2 else rng.randrange(
                settings.markers_partitions))
            if i % 10_000 == 0:
                raw.poll(0)
        wait_for_count(lambda: len(bad) - raw.flush(5), len(bad), interval_s=0, what="garbage written")
        got = []

        def take() -> list:
            for m in consumer.receive_batch(10, 0.2):  # the consumer polls as a user's would
                got.append((m.id, m.delivery_count))
                m.ack()
            return got

        seen = [0]

        def malformed() -> int:
            take()
            try:
                seen[0] = get_json(flooded_tracker.url + "/kmq/health")["malformed_markers"]
            except OSError:  # a tracker busy with the flood may answer late: counts as no progress
                pass
            return seen[0]
        # The tracker works through the flood at the machine's pace (about 4,000 records a
        # second here alone, a quarter of that in a loaded CI run): waited for while it moves.
        wait_for_count(malformed, expected, what="malformed markers counted")
        # Behind all of that on its partition, the unacked message comes back once it is read.
        wait_for(take, 60, what="the redelivery behind the garbage")
        assert got == [(msg_id, 2)] and first.id == msg_id
        consumer.flush()
        consumer.close()
        counted = get_json(flooded_tracker.url + "/kmq/health")
        assert counted["malformed_markers"] == expected
        assert counted["set_aside"]["malformed-marker"] == expected
        with urllib.request.urlopen(flooded_tracker.url + "/metrics", timeout=10) as r:
            assert f'kmq_tracker_set_aside_total{{reason="malformed-marker"}} {expected}.0' in r.read().decode()
        wait_for_count(lambda: len(letters_of(settings, "!malformed-markers")), expected, interval_s=1,
                       what="malformed markers on the dead-letter topic")
    finally:
        client.close()


def test_odd_queue_records_and_unknown_queue_ids_are_set_aside_and_redelivery_goes_on(own_tracker, queue):
    settings = own_tracker.settings
    before = get_json(own_tracker.url + "/kmq/health")["set_aside"]  # before anything is written
    part = queue_partitions(queue, settings.queue_partitions)[0]
    big = Producer({**settings.client_config(), "message.max.bytes": 5_000_000})
    odd = [
        (b"no kmq headers", None),
        (b"bad header values", [("kmq.id", b"\xff\xfe"), ("kmq.deliveries", b"zz"),
                                ("kmq.enqueued-ms", b"-x"), ("kmq.first-delivery-ms", None)]),
        (None, [("kmq.id", b"null-value")]),
        (b"x" * 2_000_000, [("kmq.id", b"huge")]),  # Tansu takes it; redelivery could not write it
    ]
    for value, headers in odd:
        big.produce(settings.queue_topic, value, queue.encode(), partition=part, headers=headers)
    big.produce(settings.queue_topic, b"no key at all", None, partition=part)
    # Markers about queues and ranges nobody has: unknown partition, past the end, never started.
    ghost = f"{queue}-ghost"
    gp = markers_partition(ghost, settings.markers_partitions)
    for r in (M.RangeRef(ghost, 999, 0, 5), M.RangeRef(ghost, part, 10**9, 10**9 + 5)):
        big.produce(settings.markers_topic, marker_codec.encode([M.Start(r, 300, r.full_mask)]), ghost.encode(),
                    partition=gp)
    # Past the ghost's cursor (its forged START moved it to 10**9 + 5): never handed out.
    never = M.RangeRef(ghost, part, 10**9 + 7, 10**9 + 9)
    big.produce(settings.markers_topic, marker_codec.encode([M.Ack(never, 1), M.Release(never, 2, 0)]),
                ghost.encode(), partition=gp)
    big.flush(30)
    client = kmq.Client(settings=settings)
    try:
        with client.consumer(queue, visibility_timeout_s=2) as c:
            got = []
            wait_for(lambda: got.extend(c.receive_batch(10, 0.2)) or len(got) >= 4, 30, what="4 odd records")
            assert sorted(len(m.value) for m in got) == [0, 14, 17, 2_000_000]
            assert {m.id for m in got} >= {"null-value", "huge", "\ufffd\ufffd"}
            # None acked: all come back except the huge one, which is set aside.
            back = []
            wait_for(lambda: back.extend(c.receive_batch(10, 0.2)) or len(back) >= 3, 30,
                     what="3 redeliveries")
            assert sorted(m.id for m in back) == sorted(m.id for m in got if m.id != "huge")
            assert {m.delivery_count for m in back} == {2}
            back_values = {m.id: m.value for m in back}
            assert back_values["null-value"] == b"" and back_values["\ufffd\ufffd"] == b"bad header values"
            for m in back:
                m.ack()
            c.flush()
            # Redelivery goes on after all of it.
            fresh = client.send(queue, b"after the odd ones")
            client.flush()
            m = wait_for(lambda: c.receive(0.2), 30, what="a fresh message")
            assert m.id == fresh
            m2 = wait_for(lambda: c.receive(0.2), 30, what="its redelivery")
            assert m2.id == fresh and m2.delivery_count == 2
            m2.ack()

        def aside():
            now = get_json(own_tracker.url + "/kmq/health")["set_aside"]
            diff = {k: now[k] - before.get(k, 0) for k in now}
            return diff if diff["too-large"] >= 1 and diff["beyond-end"] >= 5 else None
        diff = wait_for(aside, 30, what="the set-aside counts")
        assert diff["unknown-partition"] == 5 and diff["too-large"] == 1
        # The START past the partition's end: counted, no fake payload-expired dead letters.
        assert diff["beyond-end"] == 5 and diff["payload-expired"] == 0 and diff["unknown-range"] == 2
        assert letters_of(settings, ghost) == []
        (huge,) = letters_of(settings, queue)
        headers = dict(huge.headers())
        assert headers["kmq.dlq.reason"] == b"payload-too-large" and headers["kmq.id"] == b"huge"
        assert huge.value() in (b"", None)
    finally:
        client.close()
