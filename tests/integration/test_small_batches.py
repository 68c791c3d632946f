"""Readers keep reading partitions of many one-record batches (kmq.kafka.fetch_wait).

The embedded broker answered nothing, for good, to a 10 or 20 ms fetch of a partition
of 40,000 one-record batches (bench.broker_batches): a librdkafka reader at 10 ms got
nothing from such a tail in 15 s, and a tracker (its markers consumer waits 20 ms)
on such a markers partition delivered nothing in 90 s. The readers now raise their
fetch wait while records wait and none come: these tests fail without that. (A queue
partition of such batches, where the dispatcher reads through another queue's 40,000
records first, is bench.small_batches_stall: 15-16 s to the first delivery on a quiet
machine, too slow for a test on a loaded one.) The embedded profile writes one changelog
record per batch, so a long-lived tracker's changelog is such a partition too: recovery
from an empty data dir never finished in 240 s without the rising wait.
"""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka import Producer, TopicPartition

import kmq
from bench.small_batches_stall import last_range_entry
from kmq.dev.devstack import TrackerProcess
from kmq.kafka import profiles
from kmq.kafka.acls import changelog_topic
from kmq.kafka.patient_reader import PatientReader
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from tests.conftest import wait_for, wait_for_count
from tests.integration.views import all_acked, queue_detail, set_aside

BATCHES = 40_000


def _one_per_batch(settings, topic: str, value: bytes, key: bytes) -> None:
    # One record a batch, and so a produce request each, pipelined (not a flush each: 11 s against 15)
    p = Producer({**settings.client_config(), "linger.ms": 0, "batch.num.messages": 1})
    for _ in range(BATCHES):
        p.produce(topic, value, key, partition=0)
        p.poll(0)
    assert not p.flush(120), f"{BATCHES} records to {topic} were not written within 120 s"


@pytest.fixture(scope="module")
def crowded(make_settings):
    """Own topics of one partition each; the markers partition holds 40,000 one-record ACKs of
    ranges nobody started (as a long trickle of settlements writes them)."""
    s = make_settings(queue_partitions=1, markers_partitions=1, dlq_partitions=1, dispatch="shared",
                      max_deliveries=10)
    _one_per_batch(s, s.markers_topic, marker_codec.encode([M.Ack(M.RangeRef("filler", 0, 0, 1), 1)]), b"filler")
    return s


def test_a_reader_starting_at_10_ms_reads_the_tail_of_a_partition_of_40000_batches(crowded):
    reader = PatientReader(profiles.reader_config(crowded, "kmq-test-patient", fetch_wait_ms=10, eof=True))
    try:
        reader.assign([TopicPartition(crowded.markers_topic, 0, BATCHES - 1)])
        got = []
        wait_for(lambda: got.extend(r for r in reader.consume(10, 0.2) if r.error() is None) or got, 60,
                 what=f"the record at offset {BATCHES - 1}")
        assert got[0].offset() == BATCHES - 1
        print(f"read with a fetch wait of {reader.fetch_wait_ms} ms")
    finally:
        reader.close()


def test_a_shared_queue_on_a_markers_partition_of_40000_batches_delivers_redelivers_and_acks(crowded, artifacts):
    tracker = TrackerProcess(crowded, artifacts / "tracker-small-batches.log")
    try:
        tracker.start(timeout_s=120)
        with kmq.Client(settings=crowded) as client:
            client.send("q", b"hello")
            client.flush()
            with client.consumer("q", visibility_timeout_s=2) as c:
                got = []

                def filler_read() -> int:
                    if not got:  # the consumer polls meanwhile, as a user's would
                        got.extend(c.receive_batch(1, 0.2))
                    return set_aside(tracker, "unknown-range")  # the filler's ACKs of ranges never started
                # The tracker reads the filler at the broker's and the machine's pace (26-105 s
                # in fresh-clone CI runs; none before): waited for while it moves.
                wait_for_count(filler_read, BATCHES, what="filler markers read")
                first = got[0] if got else wait_for(lambda: c.receive(0.2), 60, what="the first delivery")
                assert first.value == b"hello"
                again = wait_for(lambda: c.receive(0.2), 60, what="the redelivery after the visibility timeout")
                assert again.id == first.id and again.delivery_count > first.delivery_count
                again.ack()
            wait_for(lambda: all_acked(tracker, "q", 1), 60, what="the ack applied")
    finally:
        tracker.stop()


def test_a_tracker_with_an_empty_data_dir_recovers_a_changelog_of_40000_batches(make_settings, artifacts):
    """The embedded profile writes one changelog record per produce batch, so a long-lived
    tracker's changelog is such a partition. A tracker started on an empty data dir reads it
    all (its Faust consumer's fetch wait rises), knows the message acquired before, and
    applies the ack its consumer sends after."""
    s = make_settings(queue_partitions=1, markers_partitions=1, dlq_partitions=1, dispatch="shared")
    log = artifacts / "tracker-changelog-batches.log"
    before, after = TrackerProcess(s, log), TrackerProcess(s, log)
    try:
        before.start(timeout_s=120)
        with kmq.Client(settings=s) as client:
            # Held across the restart: a visibility timeout no recovery here comes near.
            with client.consumer("q", visibility_timeout_s=600) as c:
                client.send("q", b"hello")
                client.flush()
                held = wait_for(lambda: c.receive(0.2), 60, what="the first delivery")
                wait_for(lambda: (queue_detail(before, "q") or {}).get("in_flight") == 1, 30,
                         what="the acquisition applied")
                entry = wait_for(lambda: last_range_entry(s), 30, what="the range's entry in the changelog")
                before.stop()
                _one_per_batch(s, changelog_topic(s), entry.value(), entry.key())  # the same entry again
                shutil.rmtree(s.data_dir)
                after.start(timeout_s=240)  # 7 s beside a short changelog, 17-20 s beside this one
                wait_for(lambda: (queue_detail(after, "q") or {}).get("in_flight") == 1, 30,
                         what="the recovered tracker counting the held message")
                held.ack()
                c.flush()
                wait_for(lambda: all_acked(after, "q", 1), 60, what="the ack applied")
    finally:
        before.stop()
        after.stop()
